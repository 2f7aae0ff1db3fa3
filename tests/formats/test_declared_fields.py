"""A sample's fields declared in the manifest (issue 34): folders packed before the declaration read bit for bit,
new folders declare theirs, and the sample table may hold the columns its fields declare (a superset check)."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import dataio
import dataio.cli
from dataio.formats.dataset.manifest import ManifestError, read_manifest
from dataio.formats.dataset.sample_fields import IMAGE_FIELDS, FieldSpec, text_fields
from dataio.formats.dataset.sample_table import read_sample_table, write_sample_table
from dataio.formats.errors import DataioError
from dataio.images.image_shards import ImageShards
from dataio.images.config import ImageLoaderConfig

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "format_1_1"  # packed by dataio before fields existed


def test_a_folder_packed_before_fields_were_declared_reads_bit_for_bit():
    expected = json.loads((FIXTURE / "expected.json").read_text())
    folder, manifest = read_manifest(FIXTURE / "images")
    assert manifest.fields == () and manifest.sample_fields() == IMAGE_FIELDS
    shards = ImageShards.open(FIXTURE / "images", ImageLoaderConfig())
    read = {shards.table.path(i): hashlib.sha256(shards.read(i)).hexdigest() for i in range(len(shards))}
    assert read == expected["images"]  # every image member's bytes, checked against its xxh3 too
    loader = dataio.ImageLoader(FIXTURE / "images", batch_size=4, image_size=16, train=False, num_workers=1)
    labels = [(int(s), int(label)) for batch in loader.batches()
              for s, label in zip(batch.samples, batch.labels, strict=True)]
    assert [label for _, label in sorted(labels)] == [loader.classes.index(shards.table.path(s).split("/")[0])
                                                      for s, _ in sorted(labels)]
    tokens = dataio.TokenDataset(FIXTURE / "text")
    assert [tokens[i].tolist() for i in range(len(tokens))] == expected["tokens"]
    assert read_manifest(FIXTURE / "text")[1].sample_fields() == text_fields("uint16")
    text = dataio.TextLoader(FIXTURE / "text", mode="fixed", batch_size=5, shuffle=False)
    assert sorted(int(s) for batch in text for s in batch["sample_ids"]) == list(range(len(tokens)))


def test_converted_folders_declare_their_fields(image_shards, text_shards):
    assert read_manifest(image_shards)[1].fields == IMAGE_FIELDS
    manifest = read_manifest(text_shards)[1]
    assert manifest.fields == text_fields(manifest.options["token_dtype"])
    assert json.loads((image_shards / "manifest.json").read_text())["fields"][0] == {
        "name": "image", "kind": "image", "dtype": "jpeg", "stored": "member"}


def _with_column(folder: Path, tmp_path: Path, declare: bool) -> Path:
    """A copy of ``folder`` whose sample table holds a ``caption`` column, declared in the manifest or not."""
    copy = tmp_path / ("declared" if declare else "undeclared")
    shutil.copytree(folder, copy)
    table = read_sample_table(copy / "samples.arrow").table
    columns = {name: table.column(name) for name in table.schema.names}
    columns["caption"] = pa.array([f"caption {i}" for i in range(len(table))])
    write_sample_table(copy / "samples.arrow", columns)
    if declare:
        data = json.loads((copy / "manifest.json").read_text())
        data["fields"] = [f.to_dict() for f in IMAGE_FIELDS] + [{"name": "caption", "kind": "text", "dtype": "utf-8"}]
        (copy / "manifest.json").write_text(json.dumps(data))
    return copy


def test_a_declared_column_is_read_beside_the_table_and_an_undeclared_one_is_refused(coloured_shards, tmp_path):
    declared = _with_column(coloured_shards, tmp_path, declare=True)
    assert read_manifest(declared)[1].fields[-1] == FieldSpec(name="caption", kind="text", dtype="utf-8")
    table = read_sample_table(declared / "samples.arrow", declared=read_manifest(declared)[1].table_columns())
    assert table.table.column("caption")[3].as_py() == "caption 3"
    plain = dataio.ImageLoader(coloured_shards, batch_size=8, image_size=16, train=False, num_workers=1)
    more = dataio.ImageLoader(declared, batch_size=8, image_size=16, train=False, num_workers=1)
    for a, b in zip(plain.batches(), more.batches(), strict=True):  # the added column changes nothing read
        assert np.array_equal(a.samples, b.samples) and a.images.equal(b.images) and a.labels.equal(b.labels)
    assert dataio.cli.main(["verify", str(declared)]) == 0
    undeclared = _with_column(coloured_shards, tmp_path, declare=False)
    with pytest.raises(DataioError, match="column 'caption' is not one of"):
        dataio.ImageLoader(undeclared, batch_size=8, image_size=16)


@pytest.mark.parametrize("fields, problem", [
    ([{"name": "image", "kind": "image", "dtype": "jpeg"}] * 2, "declared twice"),
    ([{"name": "image", "kind": "picture", "dtype": "jpeg"}], "kind must be one of"),
    ([{"name": "../x", "kind": "image", "dtype": "jpeg"}], "is not a field name"),
    ([{"name": "x", "kind": "image", "dtype": "jpeg", "code": "rm"}], "must be an object of"),
    ({"image": "jpeg"}, "must be a list"),
])
def test_a_bad_declaration_is_one_line_naming_the_manifest(coloured_shards, tmp_path, fields, problem):
    copy = tmp_path / "copy"
    shutil.copytree(coloured_shards, copy)
    data = json.loads((copy / "manifest.json").read_text())
    data["fields"] = fields
    (copy / "manifest.json").write_text(json.dumps(data))
    with pytest.raises(ManifestError, match=problem) as caught:
        read_manifest(copy)
    assert "manifest.json" in str(caught.value) and "\n" not in str(caught.value)


def test_a_repeat_at_the_end_of_a_huge_field_list_is_named_in_linear_time(coloured_shards, tmp_path):
    """A tampered manifest of 80,000 distinct fields and then a repeat of the last: naming the repeat counted each
    name over the whole list (98 s for 4 MB of JSON through ``dataio verify``); now one set, a fraction of a second."""
    copy = tmp_path / "copy"
    shutil.copytree(coloured_shards, copy)
    data = json.loads((copy / "manifest.json").read_text())
    many = [{"name": f"f{i}", "kind": "array", "dtype": "float32"} for i in range(80_000)]
    data["fields"] = many + [many[-1]]
    (copy / "manifest.json").write_text(json.dumps(data))
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "dataio", "verify", str(copy)], capture_output=True, text=True,
                          timeout=60)
    assert time.perf_counter() - start < 20  # the interpreter and the imports; the check itself is milliseconds
    assert done.returncode == 1, done.stderr
    assert done.stderr == f"dataio verify: {copy / 'manifest.json'}: field 'f79999' is declared twice\n"
