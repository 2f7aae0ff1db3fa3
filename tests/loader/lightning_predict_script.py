"""Lightning DDP (2 CPU processes) over DataModules that share one loader between validation and prediction, three
runs of a user in one launch (each launch costs two processes' Lightning imports, and the suite has a time budget).
Not a test module: ``python lightning_predict_script.py IMAGES TEXT OUT`` writes ``OUT/rank{r}.json`` with one
record per run, and says ``RUN <name>`` on stderr as each rank starts a run:

- ``shared``: fit one epoch with validation, then predict (tests/loader/test_lightning_shared_predict.py);
- ``text``: validate, then predict over a text loader (tests/loader/test_lightning_text_predict.py);
- ``stages``: as after loading a checkpoint, predict, validate, predict again, then a second Trainer with
  ``use_distributed_sampler=False`` validates (tests/user43/test_lightning_stages.py). Last: its unsharded
  validation says "reads all" on purpose, which the other runs must not.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the checkout
import dataio  # noqa: E402
from tests.loader.lightning_parts import (  # noqa: E402
    ImageModel, SharedLoaderData, TextModel, TrainingSharedLoaderData, ddp_trainer)


def image_loader(shards: Path, shuffle: bool = False):
    """An image loader whose batches carry sample ids and repeat flags."""
    return dataio.DataLoader(shards, batch_size=4, shuffle=shuffle, num_workers=1, image_size=16,
                             normalize=False).with_ids()


def shared(shards: Path, out: Path) -> dict:
    trainer = ddp_trainer(out, max_epochs=1, limit_train_batches=2, num_sanity_val_steps=0)
    model, data = ImageModel(), TrainingSharedLoaderData(lambda: image_loader(shards),
                                                        lambda: image_loader(shards, shuffle=True))
    trainer.fit(model, datamodule=data)
    predictions = trainer.predict(model, datamodule=data)
    return {"read": model.read, "predictions": sum(len(p) for p in predictions)}


def text(shards: Path, out: Path) -> dict:
    trainer = ddp_trainer(out)
    model, data = TextModel(), SharedLoaderData(lambda: dataio.DataLoader(shards, batch_size=4))
    trainer.validate(model, datamodule=data)
    predictions = trainer.predict(model, datamodule=data)
    return {"read": model.read, "predictions": sum(len(p) for p in predictions)}


def stages(shards: Path, out: Path) -> dict:
    model, data = ImageModel(), SharedLoaderData(lambda: image_loader(shards))
    first = ddp_trainer(out)
    counts = {}
    for stage in ("predict1", "validate", "predict2"):
        model.stage = stage
        if stage.startswith("predict"):
            counts[stage] = sum(len(p) for p in first.predict(model, datamodule=data))
        else:
            first.validate(model, datamodule=data, verbose=False)
    model.stage = "validate_unsharded"  # Lightning leaves a loader whole on every rank here
    unsharded = SharedLoaderData(lambda: image_loader(shards))
    ddp_trainer(out, use_distributed_sampler=False).validate(model, datamodule=unsharded, verbose=False)
    return {"read": model.read, "counts": counts}


def main() -> None:
    image_shards, text_shards, out = (Path(a) for a in sys.argv[1:4])
    records = {}
    for name, run, shards in (("shared", shared, image_shards), ("text", text, text_shards),
                              ("stages", stages, image_shards)):
        os.write(2, f"RUN {name}\n".encode())  # one write: the two ranks share the stderr pipe
        records[name] = run(shards, out)
    rank = torch.distributed.get_rank()
    (out / f"rank{rank}.json").write_text(json.dumps(records))
    torch.distributed.barrier()
    os._exit(0)  # gloo's teardown aborts now and then (docs/dataloader.md)


if __name__ == "__main__":
    main()
