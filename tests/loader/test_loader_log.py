"""What a loader chose is logged on the ``dataio`` logger (issue 24 §4), and nothing is printed unless asked."""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap

from dataio import ImageLoader, TextLoader


def test_loaders_log_what_they_chose(coloured_shards, text_shards, caplog):
    with caplog.at_level(logging.INFO, logger="dataio"):
        ImageLoader(coloured_shards, batch_size=4, image_size=16, num_workers=1, train=False).close()
        TextLoader(text_shards, mode="budget", max_tokens=512).close()
    lines = [r.getMessage() for r in caplog.records if r.name == "dataio"]
    image = next(line for line in lines if line.startswith("ImageLoader("))
    assert "45 samples" in image and "evaluation transforms" in image and "decoder turbo" in image
    assert "1 decode threads" in image and "uint8 output on cpu" in image
    text = next(line for line in lines if line.startswith("TextLoader("))
    assert "mode budget" in text


def test_nothing_is_printed_unless_logging_is_configured(coloured_shards, text_shards):
    script = textwrap.dedent(f"""
        from dataio import DataLoader, ImageLoader, TextLoader
        for images, labels in DataLoader({str(coloured_shards)!r}, batch_size=8):
            pass
        TextLoader({str(text_shards)!r}, mode="fixed", batch_size=4).close()
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout == "" and done.stderr == "", done.stderr
