"""One rank of tests/views/test_views_ranks.py (spawned; not a test module): builds a ViewsLoader in a gloo group
of two on 127.0.0.1 and writes what its first pass did."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path


def run(rank: int, port: int, folder: str, views: list[dict], out: str) -> None:
    import torch.distributed as dist

    import dataio

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2,
                            timeout=timedelta(seconds=30))
    try:
        options = dict(views[rank])
        seed = options.pop("seed", 1)
        loader = dataio.ViewsLoader(folder, views=dataio.ViewsConfig(**options), batch_size=4, seed=seed,
                                    num_workers=1)
        dist.barrier()
        shapes = [tuple(batch["collated_local_crops"].shape) for batch in loader]
        said = {"ok": True, "shapes": shapes}
    except Exception as e:  # noqa: BLE001 (reported to the test)
        said = {"ok": False, "error": f"{type(e).__name__}: {e}"}
    Path(out, f"rank{rank}.json").write_text(json.dumps(said))
    try:
        dist.destroy_process_group()
    except Exception:  # noqa: BLE001
        pass
