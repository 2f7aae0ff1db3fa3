"""A user's Accelerate evaluation over a pair folder (2 ranks under torchrun): the loader built as docs/pairs.md
builds it, passed through ``accelerator.prepare``, each batch's sample ids gathered with ``gather_for_metrics``.
Not a test module: ``torchrun ... accelerate_pairs_script.py PAIRS OUT FACE`` writes ``OUT/rank{r}.json``."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import torch
from accelerate import Accelerator

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the checkout
import dataio  # noqa: E402

pairs, out, face = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
accelerator = Accelerator(cpu=True)
options = dict(batch_size=6, image_size=16, train=False)
if face == "PairLoader":
    loader = dataio.PairLoader(pairs, **options)
else:
    loader = dataio.DataLoader(pairs, **options)
model = accelerator.prepare(torch.nn.Linear(2, 2))
loader = accelerator.prepare(loader)
gathered = []
for batch in loader:
    gathered += accelerator.gather_for_metrics(batch["sample_ids"]).tolist()
(out / f"rank{accelerator.process_index}.json").write_text(json.dumps(gathered))
accelerator.wait_for_everyone()
os._exit(0)
