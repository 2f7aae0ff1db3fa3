"""A text loader imports nothing of the image side: kornia (the device augmentation) costs a second at start-up,
and the skeleton's base once pulled it in through the seed key of image batches."""

from __future__ import annotations

import subprocess
import sys


def test_a_text_loader_imports_no_image_augmentation(text_shards):
    script = ("import sys, dataio\n"
              f"loader = dataio.TextLoader({str(text_shards)!r}, mode='fixed', batch_size=8)\n"
              "next(iter(loader))\n"
              "print(sorted(m for m in ('kornia', 'dataio.augment', 'dataio.images') if m in sys.modules))\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
