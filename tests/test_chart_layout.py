"""The benchmark charts (``make demo`` / ``dataio demo``, every ``dataio bench``) show every label whole.

``dataio bench images`` runs as a user runs it, through ``chart_probe.py``, which measures each figure as it is
saved (every drawn text's window extent against the canvas) on a machine with a long CPU name.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from PIL import Image

ROOT = Path(__file__).resolve().parents[1]
PROBE = Path(__file__).resolve().with_name("chart_probe.py")
# the demo's longest label, and two others
LABELS = ("(h) dataio.ShardDataset + the standard transform + DataLoader", "(a) standard: ImageFolder + PIL + "
          "DataLoader", "(d') dataio.ImageLoader, sample checksums off")


def test_every_label_of_the_image_chart_lies_inside_the_saved_image(image_folder, tmp_path):
    out, report = tmp_path / "out", tmp_path / "figures.json"
    done = subprocess.run([sys.executable, str(PROBE), str(report), "bench", "images", str(image_folder[0]),
                           "--out", str(out), "--batch-size", "16", "--epochs", "1", "--warmup", "0",
                           "--image-size", "64", "--workers", "1",
                           "--loaders", "standard,shard_dataset,dataio,dataio_unchecked"],
                          capture_output=True, text=True, timeout=600, cwd=ROOT,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert done.returncode == 0, done.stderr[-3000:]
    figures = json.loads(report.read_text())
    assert list(figures) == ["images.png"]
    chart = figures["images.png"]
    assert chart["outside"] == []
    text = chart["text"].replace("\n", " ")
    assert all(label in text for label in LABELS) and "56 cores per socket), " in text  # nothing cut
    with Image.open(out / "images.png") as image:  # what was measured is what was written
        assert list(image.size) == chart["size"]
