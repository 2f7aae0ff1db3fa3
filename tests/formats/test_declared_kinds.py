"""Every converter and ``dataio index`` declares the kind of sample it packed, and the fields that kind's ``fields``
part gives for the options it wrote: the table of kinds (``dataio.formats.kinds``) is where a kind's fields are
found. Merges keep the kind; the label is a column of classification's tables only."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dataio.formats.dataset.manifest import read_manifest
from dataio.formats.dataset.sample_table import read_sample_table
from dataio.formats.errors import DataioError
from dataio.formats.images.image_convert import ConvertImagesConfig, convert_images
from dataio.formats.images.wds_index import IndexConfig, index_shards
from dataio.formats.kinds import KINDS, kind_of
from dataio.formats.ranks.rank_merge import merge_ranks
from dataio.formats.ranks.rank_split import rank_folder
from tests.text_fixtures import convert as convert_text_folder

LABELLED = {"classification"}  # the kinds whose tables have a label column


def check_declared(folder: Path, kind: str) -> None:
    manifest = read_manifest(folder)[1]
    assert manifest.sample_kind == kind == manifest.declared_kind() == kind_of(manifest).name
    assert manifest.fields == KINDS[kind].part("fields")(manifest.options)
    assert json.loads((folder / "manifest.json").read_text())["sample_kind"] == kind
    if manifest.kind == "images":
        table = read_sample_table(folder / manifest.sample_table, declared=manifest.table_columns())
        assert (table.label is not None) == (kind in LABELLED)
    # a table without labels is format 2: a dataio from before reads 1 only, and refuses it by its version
    assert manifest.version == (1 if kind in LABELLED or manifest.kind == "text" else 2)


@pytest.mark.parametrize("fixture, kind", [("image_shards", "classification"), ("coloured_shards", "classification"),
                                           ("pair_tars", "pairs"), ("pair_tars_text", "pairs"),
                                           ("coco_shards", "detection"), ("text_shards", "tokens")])
def test_each_converter_declares_its_kind_and_the_fields_of_its_options(fixture, kind, request):
    check_declared(request.getfixturevalue(fixture), kind)


def test_an_index_of_cls_tars_declares_classification(image_shards, tmp_path):
    tars = tmp_path / "tars"
    tars.mkdir()
    for tar in sorted(image_shards.glob("*.tar")):
        shutil.copy(tar, tars / tar.name)
    summary = index_shards(IndexConfig(shards=(tars,), num_workers=1, progress=False))
    assert summary.line().startswith(f"indexed {summary.num_samples} images")
    check_declared(tars, "classification")


def test_arrow_and_parquet_conversions_declare_classification(image_folder, tmp_path):
    convert_images(ConvertImagesConfig(src=image_folder[0], out=tmp_path / "arrow", format="arrow", num_workers=1,
                                       progress=False))
    check_declared(tmp_path / "arrow", "classification")
    files = sorted((image_folder[0] / "n00000001").glob("*.JPEG"))[:4]
    rows = [{"image": {"bytes": f.read_bytes(), "path": f.name}, "label": i % 2} for i, f in enumerate(files)]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "train.parquet")
    convert_images(ConvertImagesConfig(src=tmp_path / "train.parquet", out=tmp_path / "parquet", num_workers=1,
                                       progress=False))
    check_declared(tmp_path / "parquet", "classification")


def test_the_image_encoding_of_adopted_pairs_is_declared(pair_tars):
    manifest = read_manifest(pair_tars)[1]
    image = next(f for f in manifest.fields if f.name == "image")
    assert image.dtype == manifest.options["image_encoding"] == "jpeg"
    assert next(f for f in manifest.fields if f.name == "input_ids").dtype == manifest.options["token_dtype"]


def test_merges_keep_the_kind_and_refuse_ranks_of_another(image_folder, text_corpus, tmp_path):
    for rank in (0, 1):
        convert_images(ConvertImagesConfig(src=image_folder[0], out=tmp_path / "images", max_shard_samples=8,
                                           num_workers=1, progress=False, rank=rank, world_size=2))
    check_declared(tmp_path / "images", "classification")
    for rank in (0, 1):
        convert_text_folder([text_corpus], tmp_path / "text", rank=rank, world_size=2)
    check_declared(tmp_path / "text", "tokens")
    second = tmp_path / "images" / rank_folder(1, 2) / "manifest.json"  # a rank that packed another kind
    data = json.loads(second.read_text())
    second.write_text(json.dumps({**data, "sample_kind": "views"}, indent=1, sort_keys=True) + "\n")
    with pytest.raises(DataioError, match="converted with other options"):
        merge_ranks(tmp_path / "images")


def test_the_packing_parts_of_the_table_resolve_in_the_kinds_rooms():
    for kind in KINDS.values():
        for part in ("fields", "check", "verify", "packing"):
            reference = getattr(kind, part)
            if reference:
                assert kind.part(part) is not None, (kind.name, part)
                module = reference.split(":")[0].split(".")
                room = "/".join(module[1:3]) if module[:2] == ["dataio", "formats"] else ""
                assert room in (*kind.rooms, "formats/dataset"), (kind.name, part, reference)
    assert [name for name, kind in KINDS.items() if kind.packing] == ["classification", "pairs", "views"]


def test_a_version_this_dataio_does_not_read_is_named_as_such(image_shards, tmp_path):
    out = tmp_path / "newer"
    shutil.copytree(image_shards, out)
    data = json.loads((out / "manifest.json").read_text())
    data["version"] = 3
    (out / "manifest.json").write_text(json.dumps(data))
    with pytest.raises(DataioError, match=r"unsupported version 3 \(this dataio reads 1 and 2; written by a newer"):
        read_manifest(out)
