"""tests/clients/open_clip_run.py (open_clip's own ``open_clip_train.main``) with one thing watched: the epoch
each training pass of a dataio loader reads, appended to EPOCH_LOG as JSON lines. Not a test module.

Usage: python open_clip_epochs_run.py EPOCH_LOG MODEL_JSON POOL_LOG -- ARGS OF open_clip_train.main
"""

from __future__ import annotations

import json
import runpy
import sys
from pathlib import Path

import dataio.pairs.loader

epoch_log = sys.argv.pop(1)
iterate = dataio.pairs.loader.PairLoader.__iter__


def watched(self):
    if self.config.train:
        with open(epoch_log, "a") as out:
            out.write(json.dumps({"epoch": self.epoch}) + "\n")
    return iterate(self)


dataio.pairs.loader.PairLoader.__iter__ = watched
runner = Path(__file__).resolve().parents[1] / "clients" / "open_clip_run.py"
sys.argv = [str(runner), *sys.argv[1:]]
runpy.run_path(str(runner), run_name="__main__")
