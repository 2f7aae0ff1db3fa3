"""Two gloo ranks: dataio drop-ins that no framework was handed, iterated on rank 0 alone inside a framework's run
(a Lightning callback's evaluation, an Accelerate script's rank-0 evaluation); used by test_ranks.py, not a test.

``torchrun --nproc-per-node 2 ranks_frameworks_script.py SHARDS OUT MODE`` (MODE: lightning, accelerate or
mixed_shard): rank 0 writes ``OUT/rank0.json`` with the sample ids it read.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the checkout
import dataio  # noqa: E402

OPTIONS = dict(batch_size=4, num_workers=1, image_size=16, normalize=False)


def ids(loader) -> list[int]:
    return [-1 if r else int(i) for b in loader.batches() for i, r in zip(b.samples, b.repeated, strict=True)]


def lightning(shards: Path, out: Path) -> None:
    import lightning.pytorch as pl
    from torch.utils.data import DataLoader, TensorDataset

    class Module(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.layer = torch.nn.Linear(2, 1)
            self.zero_shot = dataio.DataLoader(shards, **OPTIONS)  # the user's own eval loader, never given to Lightning

        def training_step(self, batch, _):
            return self.layer(batch[0]).sum()

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

        def on_train_epoch_end(self) -> None:
            if self.global_rank == 0:  # open_clip's zero-shot pattern: rank 0 evaluates the whole set
                (out / "rank0.json").write_text(json.dumps({"eval": ids(self.zero_shot)}))

    data = DataLoader(TensorDataset(torch.zeros(8, 2)), batch_size=2)
    trainer = pl.Trainer(accelerator="cpu", devices=2, strategy="ddp", max_epochs=1, logger=False,
                         enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False)
    trainer.fit(Module(), data)


def accelerate(shards: Path, out: Path) -> None:
    from accelerate import Accelerator

    accelerator = Accelerator(cpu=True)
    evaluation = dataio.DataLoader(shards, **OPTIONS)  # not prepared: torch's loader would read the whole set
    native = dataio.ImageLoader(shards, shard=None, **OPTIONS)  # the drop-in's rule asked of a face: its note
    notes: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: notes.append(record.getMessage())  # type: ignore[method-assign]
    logging.getLogger("dataio").addHandler(handler)
    if accelerator.is_main_process:
        record = {"eval": ids(evaluation), "native": ids(native)}
        record["notes"] = [note for note in notes if "follows torch's DataLoader" in note]
        (out / "rank0.json").write_text(json.dumps(record))
    accelerator.wait_for_everyone()


def mixed_shard(shards: Path, out: Path) -> None:
    import torch.distributed as dist

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    start = time.perf_counter()
    # rank 0 reads the whole set (shard=False), rank 1 the default share: one loader site, other options per rank
    loader = dataio.ImageLoader(shards, shard=False if rank == 0 else True, **OPTIONS)
    try:
        got = {"ids": ids(loader)}
    except Exception as error:  # noqa: BLE001 - recorded for the test
        got = {"error": f"{type(error).__name__}: {error}"}
    got["seconds"] = time.perf_counter() - start
    (out / f"rank{rank}.json").write_text(json.dumps(got))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    {"lightning": lightning, "accelerate": accelerate, "mixed_shard": mixed_shard}[sys.argv[3]](
        Path(sys.argv[1]), Path(sys.argv[2]))
