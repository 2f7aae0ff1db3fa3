"""torch ``DataLoader`` workers started by ``spawn`` over ``dataio.ShardDataset(image_size=...)`` (whose samples
the extension's crop-resize makes), after ``use_tier("avx2")`` under ``if __name__ == "__main__":``, then with
``use_tier("avx2")`` at the top level too (U45_TOP set: a spawned worker imports the script as ``__mp_main__``).
Each worker prints the tier it runs: the data set it unpickles carries the parent's cap either way.
``spawn_workers.py SHARDS``."""

import os
import sys

import torch

import dataio
from dataio.formats.jpeg.cpu_tier import tier_in_use, use_tier

if os.environ.get("U45_TOP"):
    use_tier("avx2")


def report(worker_id: int) -> None:
    print(f"{'top' if os.environ.get('U45_TOP') else 'main'}: worker tier {tier_in_use()}", flush=True)


if __name__ == "__main__":
    use_tier("avx2")
    dataset = dataio.ShardDataset(sys.argv[1], image_size=64)
    for where in ("main", "top"):
        if where == "top":
            os.environ["U45_TOP"] = "1"
        loader = torch.utils.data.DataLoader(dataset, batch_size=4, num_workers=1, multiprocessing_context="spawn",
                                             worker_init_fn=report)
        next(iter(loader))
        del loader
    print(f"parent tier {tier_in_use()}", flush=True)
