"""Issue 44: a split conversion (ranks merged) shuffles as the one-process conversion of the same input.

Each part closes its last shard early, so the merged folder's shards are not a one-process folder's; the merge
replays the writers' shard rule over the parts' record sizes (``shard_rule``) into ``order_shard``, and the
loaders' two-level shuffle permutes those, so the same seed gives the same batches.
"""

from __future__ import annotations

import numpy as np
import pytest

import dataio
from dataio import DetectionLoader, ImageLoader
from dataio.formats.coco.coco_convert import ConvertCocoConfig, convert_coco
from dataio.formats.dataset.manifest import read_manifest
from dataio.formats.dataset.sample_table import read_sample_table
from dataio.formats.images.image_convert import ConvertImagesConfig, convert_images
from tests.formats.journal_stop import Interrupted, interrupt_after

WORLD = 3


def _table(folder):
    root, manifest = read_manifest(folder)
    return read_sample_table(root / manifest.sample_table, declared=manifest.table_columns())


def _split_and_one(convert, tmp_path, **options):
    """(one-process folder, the same input converted by WORLD ranks and merged)."""
    convert(tmp_path / "one", **options)
    for rank in range(WORLD):
        convert(tmp_path / "split", rank=rank, world_size=WORLD, **options)
    return tmp_path / "one", tmp_path / "split"


def _images(src):
    def convert(out, **options):
        convert_images(ConvertImagesConfig(src=src, out=out, num_workers=1, progress=False, **options))
    return convert


def _labels(loader, epochs=2):
    return [[y.tolist() for _, y in loader] for _ in range(epochs)]


def _check_order_shards(one, split):
    """The merged table's order shard of every sample is its shard in the one-process folder; the one-process
    table holds no such column, and the parts' record sizes are not in the merged table."""
    one_table, split_table = _table(one), _table(split)
    assert one_table.order_shard is None and "record_size" not in one_table.table.schema.names
    assert "record_size" not in split_table.table.schema.names
    assert split_table.order_shard is not None
    assert not np.array_equal(split_table.shard, one_table.shard)  # the physical layout does differ
    assert np.array_equal(split_table.order_shard, one_table.shard)


@pytest.mark.parametrize("layout", [{}, {"format": "arrow"}], ids=["wds", "arrow"])
def test_split_images_shuffle_as_one_process(image_folder, tmp_path, layout):
    one, split = _split_and_one(_images(image_folder[0]), tmp_path, max_shard_samples=4, **layout)
    _check_order_shards(one, split)
    runs = []
    for folder in (one, split):
        with ImageLoader(folder, batch_size=5, image_size=24, train=False, shuffle=True, seed=3,
                         shuffle_window=4) as loader:
            runs.append(_labels(loader))
    assert runs[0] == runs[1] and runs[0][0] != runs[0][1]


def test_split_images_by_size_give_the_drop_in_loaders_batches(image_folder, tmp_path):
    """Shards closed by bytes (``shard_size``), read through ``dataio.DataLoader(folder, shuffle=True, seed=...)``."""
    one, split = _split_and_one(_images(image_folder[0]), tmp_path, shard_size="220KB")
    _check_order_shards(one, split)
    runs = []
    for folder in (one, split):
        loader = dataio.DataLoader(str(folder), batch_size=4, shuffle=True, seed=0, num_workers=0)
        runs.append(_labels(loader))
    assert runs[0] == runs[1]


def test_split_coco_shuffles_as_one_process(coco_folder, tmp_path):
    def convert(out, **options):
        convert_coco(ConvertCocoConfig(images=coco_folder[0], annotations=coco_folder[1], out=out,
                                       max_shard_samples=2, num_workers=1, progress=False, **options))
    one, split = _split_and_one(convert, tmp_path)
    _check_order_shards(one, split)
    runs = []
    for folder in (one, split):
        with DetectionLoader(folder, batch_size=2, image_size=64, train=False, shuffle=True, seed=5,
                             shuffle_window=2) as loader:
            runs.append([[b["image_id"].tolist() for b in loader] for _ in range(2)])
    assert runs[0] == runs[1]


def test_a_resumed_part_keeps_its_record_sizes(image_folder, tmp_path, monkeypatch):
    """A part interrupted after its first shard and run again: the journal kept the finished shards' sizes."""
    convert = _images(image_folder[0])
    convert(tmp_path / "one", max_shard_samples=4)
    interrupt_after(monkeypatch, 2)
    with pytest.raises(Interrupted):
        convert(tmp_path / "split", rank=0, world_size=WORLD, max_shard_samples=4)
    monkeypatch.undo()
    for rank in range(WORLD):
        convert(tmp_path / "split", rank=rank, world_size=WORLD, max_shard_samples=4)
    _check_order_shards(tmp_path / "one", tmp_path / "split")


def test_merged_folders_of_parts_without_sizes_read_as_before(image_folder, tmp_path):
    """Parts packed before (no record sizes): the merge writes no order shard and the loader uses the shards."""
    import pyarrow as pa

    from dataio.formats.dataset.sample_table import write_sample_table
    from dataio.formats.ranks.rank_merge import merge_ranks

    convert = _images(image_folder[0])
    for rank in range(WORLD):
        convert(tmp_path / "split", rank=rank, world_size=WORLD, max_shard_samples=4)
    for part in sorted(tmp_path.joinpath("split").glob("rank-*")):
        table = read_sample_table(part / "samples.arrow").table.drop_columns(["record_size"])
        write_sample_table(part / "samples.arrow", {name: table.column(name) for name in table.schema.names})
    merge_ranks(tmp_path / "split")
    merged = _table(tmp_path / "split")
    assert merged.order_shard is None and np.array_equal(merged.order_shards, merged.shard)
    assert isinstance(merged.table, pa.Table)


def test_split_text_shuffles_as_one_process(text_corpus, tmp_path):
    """Token shards close by ``shard_tokens``: the merged manifest keeps it and the loader replays the rule over
    the rows' lengths (``order_shard_of``); one-process folders shuffle by their shards as before."""
    from dataio import TextLoader
    from dataio.formats.text.tokenizer_setup import TokenizerConfig
    from dataio.text.token_shards import TokenShards
    from tests.text_fixtures import convert

    one = convert([text_corpus], tmp_path / "one", shard_tokens=1500)
    given = TokenizerConfig(path=one / "tokenizer.json")
    for rank in range(WORLD):
        convert([text_corpus], tmp_path / "split", shard_tokens=1500, rank=rank, world_size=WORLD, tokenizer=given)
    single, merged = TokenShards(one), TokenShards(tmp_path / "split")
    assert single.order_shard_of is single.shard_of and "shard_tokens" not in single.manifest.options
    assert not np.array_equal(merged.shard_of, single.shard_of)
    assert np.array_equal(merged.order_shard_of, single.shard_of)
    runs = []
    for folder in (one, tmp_path / "split"):
        loader = TextLoader(folder, mode="fixed", batch_size=8, shuffle=True, seed=4, shuffle_window=8)
        runs.append([[batch["input_ids"].tolist() for batch in loader] for _ in range(2)])
    assert runs[0] == runs[1] and runs[0][0] != runs[0][1]
