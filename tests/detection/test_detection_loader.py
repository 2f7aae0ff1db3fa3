"""Everything else a sample with boxes gets from the loader: the dict contract, resume, equal batches per rank,
the error policy, mixtures, ``ShardDataset`` dicts, ``dataio.DataLoader``, Lightning, refusals (issue 36)."""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
import torch

import dataio
from dataio import ImageLoader, ShardDataset
from dataio.augment import MixConfig, RandAugmentConfig
from dataio.formats.coco.coco_convert import ConvertCocoConfig, convert_coco
from dataio.formats.coco.synthetic_coco import CATEGORIES, SyntheticCocoConfig, write_coco_folder
from dataio.formats.dataset.manifest import read_manifest
from dataio.formats.dataset.sample_table import read_sample_table, write_sample_table
from dataio.formats.errors import ConfigError, SampleError
from dataio.detection.detection_config import DetectionConfig
from tests.augment.shape_photos import shape_pixels

KEYS = {"image", "boxes", "labels", "valid", "num_boxes", "iscrowd", "image_id", "sample_ids", "repeated"}
EVAL_KEYS = {"orig_size", "scale", "offset"}  # evaluation batches: where each image went (detection.map_back)
TRAIN = dict(batch_size=4, image_size=96, train=True, seed=3, num_workers=2,
             randaugment=RandAugmentConfig(num_ops=2, magnitude=9), targets=DetectionConfig(masks=True))


def epoch(loader) -> list[dict]:
    return [{k: v.clone() for k, v in batch.items()} for batch in loader]


def same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_dict_batches_follow_the_contract_and_match_the_dataset_view(coco_shards) -> None:
    with ImageLoader(coco_shards, batch_size=5, image_size=96, train=False, normalize=True,
                     targets=DetectionConfig(masks=True)) as loader:
        batches = epoch(loader)
        assert [b.keys() == KEYS | EVAL_KEYS | {"masks"} for b in batches] == [True] * 3
        for batch in batches:
            n, k = batch["labels"].shape
            assert batch["image"].shape == (n, 3, 96, 96) and batch["image"].dtype == torch.float32
            assert batch["boxes"].shape == (n, k, 4) and k == int(batch["num_boxes"].max())
            assert len(batch["masks"]) == int(batch["num_boxes"].sum()) and batch["masks"].shape[1:] == (96, 96)
            for i, sample in enumerate(batch["sample_ids"].tolist()):  # ImageLoader.dataset: the same eval view
                view = loader.dataset[sample]
                valid = batch["valid"][i]
                assert torch.equal(view["boxes"], batch["boxes"][i][valid])
                assert torch.equal(view["labels"], batch["labels"][i][valid])
                assert torch.allclose(view["image"], batch["image"][i], atol=1e-5)
                assert view["image_id"] == int(batch["image_id"][i])
                first = int(batch["num_boxes"][:i].sum())
                assert torch.equal(view["masks"], batch["masks"][first:first + int(valid.sum())])


def test_a_mid_epoch_resume_gives_the_same_images_and_targets(coco_shards) -> None:
    with ImageLoader(coco_shards, **TRAIN) as loader:
        loader.set_epoch(1)
        whole = epoch(loader)
    with ImageLoader(coco_shards, **TRAIN) as loader:
        loader.set_epoch(1)
        batches = iter(loader)
        first = [next(batches), next(batches)]
        state = loader.state_dict()
    assert all(same(a, b) for a, b in zip(first, whole[:2], strict=True))
    with ImageLoader(coco_shards, **TRAIN) as resumed:
        resumed.load_state_dict(state)
        rest = epoch(resumed)
    assert len(rest) == len(whole) - 2 and all(same(a, b) for a, b in zip(rest, whole[2:], strict=True))


@pytest.mark.parametrize("world_size", [2, 3, 5])
def test_ranks_get_equal_batches_that_cover_the_data(coco_shards, world_size) -> None:
    counts, seen = [], []
    for rank in range(world_size):
        with ImageLoader(coco_shards, batch_size=2, image_size=64, world_size=world_size, rank=rank, seed=1) as loader:
            batches = epoch(loader)
            counts.append(len(batches))
            seen += [s for b in batches for s in b["sample_ids"][~b["repeated"]].tolist()]
    assert len(set(counts)) == 1 and sorted(seen) == list(range(12))


def copy_shards(source: Path, target: Path) -> Path:
    shutil.copytree(source, target)
    return target


def rewrite_column(folder: Path, name: str, change) -> str:
    """Apply ``change(values)`` to a target column of the copy's table; returns the key of row 1."""
    table = read_sample_table(folder / "samples.arrow", declared=read_manifest(folder)[1].table_columns()).table
    values = table.column(name).to_pylist()
    change(values)
    columns = {n: table.column(n) for n in table.schema.names}
    columns[name] = pa.array(values, table.schema.field(name).type)
    write_sample_table(folder / "samples.arrow", columns)
    return table.column("key")[1].as_py()


def flip_image_byte(folder: Path) -> str:
    """Flip one byte of sample 1's JPEG (its checksum then fails); returns its key."""
    table = read_sample_table(folder / "samples.arrow", declared=read_manifest(folder)[1].table_columns())
    shard = folder / f"shard-{int(table.shard[1]):06d}.tar"
    data = bytearray(shard.read_bytes())
    data[int(table.offset[1]) + int(table.size[1]) // 2] ^= 0xFF
    shard.write_bytes(bytes(data))
    return table.key(1)


@pytest.mark.parametrize("damage, reason", [
    (flip_image_byte, "checksum mismatch"),
    (lambda f: rewrite_column(f, "labels", lambda v: v[1].append(0)), "targets: 4 boxes but 5 labels"),
    (lambda f: rewrite_column(f, "masks", lambda v: v[1].__setitem__(0, b"0")), "mask: RLE runs do not cover")])
def test_a_bad_sample_is_named_or_skipped_with_its_targets(coco_shards, tmp_path, damage, reason) -> None:
    folder = copy_shards(coco_shards, tmp_path / "shards")
    key = damage(folder)
    options = dict(batch_size=4, image_size=64, train=False, shuffle=False, targets=DetectionConfig(masks=True))
    with ImageLoader(folder, **options) as loader, pytest.raises(SampleError) as raised:
        epoch(loader)
    assert raised.value.key == key and reason in raised.value.reason
    with ImageLoader(folder, on_error="skip", **options) as loader:
        batches = epoch(loader)
        assert len(loader.stats.errors) == 1 and loader.stats.errors[0]["key"] == key
    ids = [s for b in batches for s in b["sample_ids"].tolist()]
    assert ids == [s for s in range(12) if s != 1]
    first = batches[0]
    assert len(first["masks"]) == int(first["num_boxes"].sum()) and len(first["image_id"]) == 3


def renamed_coco(root: Path) -> Path:
    """Four photos whose categories are the same colours under other ids, in another order, and two new names."""
    folder, path = write_coco_folder(root, SyntheticCocoConfig(images=4, seed=9))
    document = json.loads(path.read_text())
    names = {cid: name for cid, name in CATEGORIES}
    renamed = {3: "red", 7: "green", 12: "azure", 20: "yellow", 41: "magenta", 90: "teal"}
    moved = {cid: 200 - cid for cid in names}  # other ids, so another label order
    document["categories"] = [{"id": moved[cid], "name": renamed[cid]} for cid in names]
    for a in document["annotations"]:
        a["category_id"] = moved[a["category_id"]]
    path.write_text(json.dumps(document))
    out = root / "shards"
    convert_coco(ConvertCocoConfig(images=folder, annotations=path, out=out, num_workers=1, progress=False))
    return out


def test_a_mixture_maps_each_sources_box_labels_to_the_combined_classes(coco_shards, tmp_path) -> None:
    other = renamed_coco(tmp_path / "other")
    colour = {name: i for i, (_, name) in enumerate(CATEGORIES)} | {"azure": 2, "teal": 5}
    with ImageLoader({"a": coco_shards, "b": other}, weights={"a": 0.5, "b": 0.5}, batch_size=4, image_size=96,
                     train=False, seed=0) as loader:
        # b's classes in the order of its ids (200 - a's): teal, magenta, yellow, azure, green, red
        assert loader.classes == ("red", "green", "blue", "yellow", "magenta", "cyan", "teal", "azure")
        sources, checked = set(), 0
        for batch in loader:
            sources |= set(loader.mixture.source_of(batch["sample_ids"].numpy()).tolist())
            images = batch["image"].mul(255).round().to(torch.uint8).permute(0, 2, 3, 1).numpy()  # [0, 1] floats
            for i in range(len(images)):
                for label in batch["labels"][i][batch["valid"][i]].tolist():
                    assert shape_pixels(images[i], colour[loader.classes[label]]).sum() > 20
                    checked += 1
    assert sources == {0, 1} and checked > 20


def test_shard_dataset_gives_dicts_and_its_transform_takes_them(coco_shards) -> None:
    whole = ShardDataset(coco_shards)
    sample = whole[0]
    assert sample["image"].shape[0] == 3 and sample["boxes"].shape == (4, 4) and "masks" not in sample
    assert (sample["boxes"][:, 2] <= sample["image"].shape[2]).all()
    masked = ShardDataset(coco_shards, image_size=64, targets=DetectionConfig(masks=True),
                          transform=lambda s: {**s, "seen": True})
    assert masked[3]["seen"] and masked[3]["masks"].shape == (len(masked[3]["labels"]), 64, 64)
    with pytest.raises(ConfigError, match="target_transform"):
        ShardDataset(coco_shards, target_transform=lambda t: t)
    batches = list(torch.utils.data.DataLoader(masked, batch_size=4, num_workers=2, collate_fn=list))
    assert sum(len(b) for b in batches) == 12 and all(s["image"].shape == (3, 64, 64) for b in batches for s in b)


def test_dataio_dataloader_reads_a_coco_folder_as_dicts(coco_shards) -> None:
    batches = list(dataio.DataLoader(coco_shards, batch_size=4, shuffle=True, image_size=64, num_workers=1))
    assert len(batches) == 3 and batches[0]["image"].dtype == torch.float32 and batches[0].keys() == KEYS
    view = list(dataio.DataLoader(ShardDataset(coco_shards, image_size=64, targets=DetectionConfig(masks=True)),
                                  batch_size=4))
    assert "masks" in view[0] and view[0]["image"].shape == (4, 3, 64, 64)


def test_mixing_and_folders_without_boxes_are_refused_in_one_line(coco_shards, image_shards) -> None:
    with pytest.raises(ConfigError, match="cannot be used with box or mask targets"):
        ImageLoader(coco_shards, mix=MixConfig(num_classes=6, mixup_alpha=0.2))
    with pytest.raises(ConfigError, match="declares no boxes"):
        ImageLoader(image_shards, targets=DetectionConfig())
    with pytest.raises(ConfigError, match="min_visible"):
        DetectionConfig(min_visible=1.5)


def test_lightning_fits_on_dict_batches_and_resumes_mid_epoch(coco_shards, tmp_path) -> None:
    pl = pytest.importorskip("lightning.pytorch")

    class Boxes(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net, self.seen = torch.nn.Conv2d(3, 4, 3), []

        def training_step(self, batch, batch_idx):
            self.seen.append(batch["sample_ids"].tolist())
            return self.net(batch["image"]).mean() + batch["boxes"][batch["valid"]].mean() * 0

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.01)

        def train_dataloader(self):
            return ImageLoader(coco_shards, batch_size=4, image_size=32, seed=2, normalize=True)

    def fit(out: Path, steps: int = -1, resume: Path | None = None) -> list:
        from lightning.pytorch.callbacks import ModelCheckpoint

        callbacks = [ModelCheckpoint(dirpath=out, every_n_train_steps=steps, save_top_k=-1)] if steps > 0 else []
        trainer = pl.Trainer(accelerator="cpu", max_epochs=2, max_steps=steps, logger=False, callbacks=callbacks,
                             enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0,
                             enable_checkpointing=bool(callbacks), default_root_dir=out)
        model = Boxes()
        trainer.fit(model, ckpt_path=resume)
        return model.seen

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        full = fit(tmp_path / "full")
        assert fit(tmp_path / "cut", steps=2) == full[:2]
        assert fit(tmp_path / "rest", resume=tmp_path / "cut" / "epoch=0-step=2.ckpt") == full[2:]
    assert len(full) == 6
