"""Folders packed before kinds were declared (December 2026) still open, verify and read bit for bit.

Until then a manifest had no ``sample_kind``, every image table a ``label`` column (-1 in an image-text pair
folder's, the largest object's label in a COCO folder's) and a COCO folder declared that label among its fields.
Each such folder is made here the way the old code wrote it: converted by today's code, then its manifest and
sample table rewritten as they were (no ``sample_kind``, the options and fields of then, the label column
added); its shards are today's, so whatever is read from it must equal what today's folder gives.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
import torch

import dataio
from dataio.formats.coco.coco_fields import read_target_arrays
from dataio.formats.dataset.manifest import read_manifest
from dataio.formats.dataset.sample_fields import IMAGE_FIELDS
from dataio.formats.dataset.sample_table import write_sample_table
from dataio.formats.dataset.verify import verify
from dataio.formats.kinds import kind_of
from dataio.formats.pairs.pair_fields import NO_LABEL
from dataio.detection.detection_config import DetectionConfig

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "format_1_1"  # packed by dataio before fields existed
READ = dict(batch_size=4, image_size=32, train=False, num_workers=1)


def raw_table(folder: Path) -> pa.Table:
    return pa.ipc.open_file(pa.memory_map(str(folder / "samples.arrow"), "r")).read_all()


def packed_before(folder: Path, copy: Path, *, fields: list[dict] | None = None, label: list[int] | None = None,
                  options: tuple[str, ...] = ()) -> Path:
    """A copy of ``folder`` as the old code wrote it: no ``sample_kind``, the options it did not write left out,
    ``fields`` as it declared them, and (``label``) the table's label column."""
    shutil.copytree(folder, copy)
    data = json.loads((copy / "manifest.json").read_text())
    del data["sample_kind"]
    for name in options:
        del data["options"][name]
    if fields is not None:
        data["fields"] = fields
    (copy / "manifest.json").write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    if label is not None:
        table = raw_table(copy)
        columns = {name: table.column(name) for name in table.schema.names}
        write_sample_table(copy / "samples.arrow", {**columns, "label": pa.array(label, pa.int32())})
    return copy


def same(a, b) -> bool:
    """Items and batches of any kind equal, bit for bit (tensors, arrays, dicts, tuples, scalars)."""
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and a.dtype == b.dtype and np.array_equal(a, b)
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (tuple, list)):
        return type(a) is type(b) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def read_alike(old: Path, new: Path, face, **options) -> None:
    """The old folder's batches and ``ShardDataset`` items are the new folder's."""
    with face(old, **READ, **options) as before, face(new, **READ, **options) as now:
        pairs = list(zip(before, now, strict=True))
        assert pairs and all(same(a, b) for a, b in pairs)
    view = dict(image_size=32, **({"targets": options["targets"]} if "targets" in options else {}))
    before, now = dataio.ShardDataset(old, **view), dataio.ShardDataset(new, **view)
    assert len(before) == len(now) and all(same(before[i], now[i]) for i in range(len(now)))


def test_the_committed_format_1_1_folders_verify_and_hold_their_kinds(tmp_path):
    for name, kind in (("images", "classification"), ("text", "tokens")):
        manifest = read_manifest(FIXTURE / name)[1]
        assert manifest.sample_kind == "" and manifest.declared_kind() == kind == kind_of(manifest).name
        shutil.copytree(FIXTURE / name, tmp_path / name)
        report = verify(tmp_path / name, deep=True)
        assert report.ok and report.samples_checked == manifest.num_samples, report.problems


def test_a_classification_folder_packed_before_kinds(image_shards, tmp_path):
    old = packed_before(image_shards, tmp_path / "old")
    manifest = read_manifest(old)[1]
    assert manifest.sample_kind == "" and manifest.declared_kind() == "classification"
    assert verify(old, deep=True).ok
    read_alike(old, image_shards, dataio.ImageLoader)


def test_a_pair_folder_packed_before_kinds(pair_tars, tmp_path):
    rows = raw_table(pair_tars).num_rows
    old = packed_before(pair_tars, tmp_path / "old", label=[NO_LABEL] * rows, options=("image_encoding", "token_dtype"))
    manifest = read_manifest(old)[1]
    assert manifest.sample_kind == "" and manifest.declared_kind() == "pairs"
    assert raw_table(old).column("label").to_pylist() == [NO_LABEL] * rows
    assert manifest.fields == read_manifest(pair_tars)[1].fields  # the pairs' fields have not changed
    report = verify(old, deep=True)
    assert report.ok and report.samples_checked == rows, report.problems
    read_alike(old, pair_tars, dataio.PairLoader)
    with dataio.ImageLoader(old, **READ) as loader:  # ImageLoader's face over a pair folder, as before
        assert loader.pairs and loader.classes == ()


def _largest_object_label(boxes: list[float], labels: list[int], iscrowd: list[int]) -> int:
    """The label ``convert coco`` stored in the table's label column until December 2026."""
    if not labels:
        return 0
    box = np.asarray(boxes, np.float64).reshape(-1, 4)
    areas = (box[:, 2] - box[:, 0]) * (box[:, 3] - box[:, 1]) - np.asarray(iscrowd) * 1e18
    return int(labels[int(np.argmax(areas))])


def test_a_coco_folder_packed_before_kinds(coco_shards, tmp_path):
    table = raw_table(coco_shards)
    assert "label" not in table.schema.names and read_manifest(coco_shards)[1].sample_kind == "detection"
    label = [_largest_object_label(*row) for row in zip(table.column("boxes").to_pylist(),
                                                        table.column("labels").to_pylist(),
                                                        table.column("iscrowd").to_pylist(), strict=True)]
    fields = [f.to_dict() for f in read_manifest(coco_shards)[1].fields]
    old_fields = [fields[0], IMAGE_FIELDS[1].to_dict(), *fields[1:]]  # then: the label declared beside the image
    old = packed_before(coco_shards, tmp_path / "old", fields=old_fields, label=label, options=("masks",))
    manifest = read_manifest(old)[1]
    assert manifest.sample_kind == "" and manifest.declared_kind() == "detection"
    assert sorted(set(label)) != [0]  # the made-up labels are real ones, checked against the classes by verify
    report = verify(old, deep=True)
    assert report.ok and report.samples_checked == table.num_rows, report.problems
    targets = read_target_arrays(raw_table(old), with_masks=True)
    assert targets.counts("boxes").tolist() == read_target_arrays(table, with_masks=True).counts("boxes").tolist()
    read_alike(old, coco_shards, dataio.DetectionLoader, targets=DetectionConfig(masks=True))


@pytest.mark.parametrize("kind", ["classification", "pairs", "detection"])
def test_a_folder_packed_before_kinds_opens_as_its_kind_through_dataio_dataloader(kind, image_shards, pair_tars,
                                                                                  coco_shards, tmp_path):
    folder = {"classification": image_shards, "pairs": pair_tars, "detection": coco_shards}[kind]
    old = packed_before(folder, tmp_path / "old", options={"pairs": ("image_encoding", "token_dtype"),
                                                           "detection": ("masks",)}.get(kind, ()))
    loader = dataio.DataLoader(old, batch_size=4, image_size=32, num_workers=1)
    try:
        assert type(loader).__name__ == kind_of(read_manifest(old)[1]).face.rsplit(":", 1)[1]
    finally:
        loader.close()
