"""Runs open_clip's own ``open_clip_train.main`` (a subprocess of tests/clients/test_open_clip_main.py, one per rank
under torchrun) after two things a test needs and a user does not: the tiny model's config registered
(``open_clip.add_model_config``, as a user's JSON would be), and open_clip's text pooling watched, each row's pooled
position checked against its EOT, counts written to ``POOL_LOG.RANK``. One stand-in for the GPUs this machine lacks:
open_clip's main wraps the model in ``DistributedDataParallel(model, device_ids=[device])``, which torch refuses for a
CPU module, so ``device_ids`` is dropped for CPU devices (what DDP over gloo on CPU takes).

Usage: python open_clip_run.py MODEL_JSON POOL_LOG -- ARGS OF open_clip_train.main
"""

from __future__ import annotations

import json
import os
import sys

import open_clip
import torch
import open_clip.model
from open_clip_train import main as open_clip_main

model_json, pool_log, _, *args = sys.argv[1:]
open_clip.add_model_config(model_json)
eot = open_clip.get_tokenizer(os.path.basename(model_json)[:-len(".json")]).eot_token_id
counts = {"rows": 0, "eot_pooled": 0}
pool = open_clip.model.text_global_pool


def watched(x, text=None, pool_type="argmax", eos_token_id=None):
    """open_clip's pooling, counting the rows whose pooled position (argmax, as its pool_type says) holds the EOT."""
    if text is not None and pool_type == "argmax":
        rows = text.shape[0]
        counts["rows"] += rows
        counts["eot_pooled"] += int((text[range(rows), text.argmax(dim=-1)] == eot).sum())
    return pool(x, text, pool_type, eos_token_id=eos_token_id)


open_clip.model.text_global_pool = watched
ddp = torch.nn.parallel.DistributedDataParallel


def cpu_ddp(module, device_ids=None, **options):
    """DDP as open_clip's main builds it, its ``device_ids`` left out on CPU (torch refuses them there)."""
    on_cpu = device_ids is not None and all(torch.device(d).type == "cpu" for d in device_ids)
    return ddp(module, device_ids=None if on_cpu else device_ids, **options)


torch.nn.parallel.DistributedDataParallel = cpu_ddp
try:
    open_clip_main.main(args)
finally:
    with open(f"{pool_log}.{os.environ.get('RANK', '0')}", "w") as out:
        json.dump(counts, out)
