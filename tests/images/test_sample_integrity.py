"""Every damaged sample is caught and named: per-sample checksums, table/manifest cross-checks, state checks."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pyarrow as pa
import pytest

from dataio import ImageLoader
from dataio.cli import main
from dataio.errors import SampleError
from dataio.formats.dataset.manifest import read_manifest
from dataio.formats.dataset.sample_table import SCHEMA_WITH_CHECKSUM, read_sample_table, sample_checksum


def _copy(shards, tmp_path):
    out = tmp_path / "copy"
    shutil.copytree(shards, out)
    return out


def _entropy_positions(data: bytes) -> range:
    """Byte positions inside the entropy-coded data of a baseline JPEG (after SOS's header, before EOI)."""
    sos = data.index(b"\xff\xda")
    start = sos + 2 + int.from_bytes(data[sos + 2:sos + 4], "big")
    return range(start + 8, len(data) - 8)


def test_the_table_holds_each_images_checksum(image_shards):
    folder, manifest = read_manifest(image_shards)
    table = read_sample_table(folder / manifest.sample_table)
    assert table.checksum is not None and table.checksum.dtype == np.uint64
    loader = ImageLoader(image_shards)
    for sample in range(len(table)):
        assert sample_checksum(loader.files.read(int(table.shard[sample]), int(table.offset[sample]),
                                                 int(table.size[sample]))) == int(table.checksum[sample])
    loader.close()


def test_every_flip_in_entropy_coded_data_is_caught_and_named(image_shards, tmp_path):
    """A flipped entropy byte decodes to wrong pixels silently; the checksum names the sample, 40 flips of 40."""
    out = _copy(image_shards, tmp_path)
    folder, manifest = read_manifest(out)
    table = read_sample_table(folder / manifest.sample_table)
    rng = np.random.default_rng(0)
    caught = 0
    for trial in range(40):
        sample = int(rng.integers(len(table)))
        path = out / manifest.shards[int(table.shard[sample])].file
        original = path.read_bytes()
        offset, size = int(table.offset[sample]), int(table.size[sample])
        image = original[offset:offset + size]
        position = offset + int(rng.choice(_entropy_positions(image)))
        damaged = bytearray(original)
        damaged[position] ^= 1 << int(rng.integers(8))
        path.write_bytes(bytes(damaged))
        loader = ImageLoader(out, batch_size=16, image_size=32, on_error="skip")
        list(loader)
        named = {(e["shard"].split("/")[-1], e["key"]) for e in loader.stats.errors}
        caught += (manifest.shards[int(table.shard[sample])].file, table.key(sample)) in named
        assert all("checksum mismatch" in e["reason"] for e in loader.stats.errors)
        assert loader.stats.samples_ok == len(table) - 1
        loader.close()
        path.write_bytes(original)
    assert caught == 40


def test_tables_without_checksums_are_read_as_before(image_shards, tmp_path):
    out = _copy(image_shards, tmp_path)
    _, manifest = read_manifest(out)
    path = out / manifest.sample_table
    table = pa.ipc.open_file(pa.BufferReader(path.read_bytes())).read_all().drop_columns(["xxh3"])
    with pa.ipc.new_file(str(path), table.schema) as writer:
        writer.write_table(table)
    loader = ImageLoader(out, batch_size=16, image_size=32)
    assert loader.table.checksum is None and sum(len(labels) for _, labels in loader) == len(table)


def _rewrite_table(out, **changes):
    """Rewrite ``samples.arrow`` with row 0's columns changed."""
    _, manifest = read_manifest(out)
    path = out / manifest.sample_table
    columns = pa.ipc.open_file(pa.BufferReader(path.read_bytes())).read_all().to_pydict()
    for name, value in changes.items():
        columns[name][0] = value
    table = pa.Table.from_pydict(columns, schema=SCHEMA_WITH_CHECKSUM)
    with pa.ipc.new_file(str(path), table.schema) as writer:
        writer.write_table(table)
    return table.column("key")[0].as_py()


@pytest.mark.parametrize("changes, reason", [
    (dict(shard=-1), "shard index -1 is not in"), (dict(shard=999), "shard index 999 is not in"),
    (dict(label=12345), "label 12345 is not in"), (dict(offset=1 << 40), "not inside the shard"),
    (dict(size=1 << 40), "is absurd"), (dict(offset=-5), "not inside the shard"),
])
def test_a_row_that_disagrees_with_the_manifest_is_a_named_sample_error(image_shards, tmp_path, changes, reason):
    out = _copy(image_shards, tmp_path)
    key = _rewrite_table(out, **changes)
    loader = ImageLoader(out, batch_size=8, image_size=32, on_error="skip")
    total = sum(len(labels) for _, labels in loader)
    assert [e["key"] for e in loader.stats.errors] == [key] and reason in loader.stats.errors[0]["reason"]
    assert total == len(loader.table) - 1
    with pytest.raises(SampleError, match=reason):
        list(ImageLoader(out, batch_size=8, image_size=32))


@pytest.mark.parametrize("state, message", [
    ({"epoch": 0.5, "samples_consumed": 0, "seed": 0}, "epoch must be an integer"),
    ({"epoch": 0, "samples_consumed": "8", "seed": 0}, "samples_consumed must be an integer"),
    ({"epoch": 0, "samples_consumed": 0, "seed": 0, "world_size": 0}, "world_size must be >= 1"),
    ({"epoch": -1, "samples_consumed": 0, "seed": 0}, "epoch must be >= 0"),
    ({"epoch": True, "samples_consumed": 0, "seed": 0}, "epoch must be an integer"),
    ({"epoch": 0, "seed": 0}, "lacks"),
    ([1, 2], "must be a dict"),
    ({"epoch": 0, "samples_consumed": 0, "seed": 0, "dataset": "0123456789abcdef"}, "another data set"),
])
def test_load_state_dict_refuses_bad_or_foreign_states(image_shards, state, message):
    loader = ImageLoader(image_shards, batch_size=8, image_size=32)
    with pytest.raises(ValueError, match=message):
        loader.load_state_dict(state)


def test_a_state_round_trips_through_json(image_shards):
    loader = ImageLoader(image_shards, batch_size=8, image_size=32)
    iterator = iter(loader)
    next(iterator)
    state = json.loads(json.dumps(loader.state_dict()))
    resumed = ImageLoader(image_shards, batch_size=8, image_size=32)
    resumed.load_state_dict(state)
    assert resumed.state_dict() == state


def test_verify_reports_table_faults_cls_disagreements_and_checksums(image_shards, tmp_path, capsys):
    out = _copy(image_shards, tmp_path)
    key = _rewrite_table(out, shard=-3)
    assert main(["verify", str(out)]) == 1
    assert f"sample {key!r} in samples.arrow: shard index -3 is not in" in capsys.readouterr().err
    out2 = tmp_path / "labels"
    shutil.copytree(image_shards, out2)
    folder, manifest = read_manifest(out2)
    table = read_sample_table(folder / manifest.sample_table)
    key = _rewrite_table(out2, label=(int(table.label[0]) + 1) % len(manifest.classes))
    assert main(["verify", str(out2)]) == 0  # plain verify does not read the members
    assert main(["verify", str(out2), "--deep"]) == 1
    assert f"sample {key!r} in shard {manifest.shards[0].file}: .cls says" in capsys.readouterr().err


def test_verify_checks_the_tokenizer_against_the_manifest(text_shards, tmp_path, capsys):
    out = tmp_path / "text"
    shutil.copytree(text_shards, out)
    assert main(["verify", str(out)]) == 0
    with open(out / "tokenizer.json", "a") as f:
        f.write(" ")
    assert main(["verify", str(out)]) == 1
    assert "tokenizer.json: sha256 does not match the manifest" in capsys.readouterr().err
