"""Partition of a conversion's inputs across ranks: pure functions, many world sizes, no processes."""

from __future__ import annotations

from itertools import pairwise

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dataio.formats.ranks.rank_split import rank_bounds, rank_owners, rank_range
from dataio.formats.text.text_sources import SourceStats, TextPiece, iter_documents, join_pieces, text_pieces

WORLD_SIZES = [1, 2, 3, 4, 5, 7, 8, 16, 33, 64]


def _loads(sizes, bounds) -> np.ndarray:
    weights = np.maximum(sizes, 1)
    return np.array([weights[a:b].sum() for a, b in pairwise(bounds)])


@pytest.mark.parametrize("world_size", WORLD_SIZES)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_ranges_tile_the_input_in_order_and_balance_bytes(world_size, seed):
    rng = np.random.default_rng(seed)
    count = int(rng.integers(0, 500))
    sizes = rng.integers(0, 200_000, count) if seed != 2 else (rng.pareto(1.0, count) * 1000).astype(np.int64)
    ranges = [rank_range(sizes, rank, world_size) for rank in range(world_size)]
    covered = [i for start, stop in ranges for i in range(start, stop)]
    assert covered == list(range(len(sizes)))  # every unit once, in order, ranks in order
    owners = rank_owners(sizes, world_size)
    assert np.all(np.diff(owners) >= 0) and (len(owners) == 0 or owners.max() < world_size)
    counts = np.array([stop - start for start, stop in ranges])
    if len(sizes) >= world_size:  # nobody idles while there is a unit for everyone
        assert counts.min() >= 1
    else:
        assert counts.max() <= 1
    if len(sizes):  # a rank holds at most its 1/N of the bytes plus one unit
        bounds = rank_bounds(sizes, world_size)
        weights = np.maximum(sizes, 1)
        assert _loads(sizes, bounds).max() <= weights.sum() / world_size + weights.max()


@pytest.mark.parametrize("world_size", WORLD_SIZES)
def test_few_or_uneven_units_leave_no_rank_idle_while_another_has_two(world_size):
    """Issue 23 case 11: by the first byte of each unit, 2 near-equal files on 2 ranks both went to rank 0."""
    rng = np.random.default_rng(world_size)
    for units in range(1, 3 * world_size + 2):
        for sizes in (np.full(units, 1000) + rng.integers(-5, 6, units), rng.integers(1, 10**6, units),
                      np.array([10**9] + [1] * (units - 1)), np.array([1] * (units - 1) + [10**9])):
            counts = np.diff(rank_bounds(sizes, world_size))
            assert counts.sum() == units
            assert counts.min() >= 1 or counts.max() <= 1, (sizes, counts)
    assert rank_range(np.array([1000, 1001]), 1, 2) == (1, 2) and rank_range(np.array([1001, 1000]), 1, 2) == (1, 2)


def test_more_ranks_than_inputs_leaves_some_ranks_empty_and_never_splits_an_input():
    sizes = np.array([10, 10, 10])
    ranges = [rank_range(sizes, r, 8) for r in range(8)]
    assert sum(stop - start for start, stop in ranges) == 3
    assert sum(stop == start for start, stop in ranges) == 5


def test_bad_rank_or_world_size_is_a_value_error_naming_it():
    with pytest.raises(ValueError, match="world_size"):
        rank_owners(np.array([1]), 0)
    with pytest.raises(ValueError, match="rank"):
        rank_range(np.array([1]), 3, 3)


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    """A .txt of lines and paragraphs (blank lines of spaces and CRLF, a bad UTF-8 line, a long line),
    a .jsonl with bad records and a .parquet of several row groups."""
    root = tmp_path_factory.mktemp("pieces")
    rng = np.random.default_rng(3)
    words = ["alpha", "beta", "gamma", "delta", "eps"]
    lines = []
    for i in range(400):
        kind = i % 23
        lines.append(b"" if kind == 5 else b"  \t" if kind == 11 else b"bad \xff utf8" if kind == 17 else
                     " ".join(rng.choice(words, int(rng.integers(1, 40 if i != 200 else 3000)))).encode())
    text = b"".join(line + (b"\r\n" if i % 7 == 0 else b"\n") for i, line in enumerate(lines))
    (root / "a.txt").write_bytes(text + b"last line without newline")
    records = [b'{"text": "record %d"}' % i if i % 9 else b"not json" for i in range(300)]
    (root / "b.jsonl").write_bytes(b"\n".join(records) + b"\n")
    pq.write_table(pa.table({"text": [f"row {i}" if i % 13 else None for i in range(250)]}), root / "c.parquet",
                   row_group_size=40)
    (root / "empty.txt").write_bytes(b"")
    return [root / "a.txt", root / "empty.txt", root / "b.jsonl", root / "c.parquet"]


def _read(items, doc_sep):
    stats = SourceStats()
    documents = [(d.source, d.number, d.text) for d in iter_documents(items, doc_sep=doc_sep, field_name="text",
                                                                      stats=stats)]
    return documents, stats


@pytest.mark.parametrize("doc_sep", ["line", "blank"])
@pytest.mark.parametrize("world_size", [1, 2, 3, 5, 8, 17, 64])
def test_text_pieces_cut_at_document_boundaries_and_ranks_read_the_whole(sources, doc_sep, world_size):
    """Each rank's pieces, read in rank order, give the documents (line numbers counted from each file's
    start) and skipped input of reading the files whole; with enough pieces, no rank is idle."""
    whole, whole_stats = _read(sources, doc_sep)
    pieces, sizes = text_pieces(sources, world_size, doc_sep=doc_sep, field_name="text")
    assert [(p.path, p.stop) for p in join_pieces(pieces)] == [(p, None) for p in sources]  # they tile the files
    parts, skipped = [], {}
    bounds = rank_bounds(np.array(sizes), world_size)
    for rank in range(world_size):
        share = join_pieces(pieces[bounds[rank]:bounds[rank + 1]])
        documents, stats = _read(share, doc_sep)
        parts += documents
        for kind, count in stats.skipped.items():
            skipped[kind] = skipped.get(kind, 0) + count
        if rank == 0:
            first_examples = stats.examples
    assert parts == whole
    assert skipped == whole_stats.skipped
    assert all(first_examples[k] == whole_stats.examples[k][:len(first_examples[k])] for k in first_examples)
    if len(pieces) >= world_size:
        assert np.diff(bounds).min() >= 1
    if world_size >= 8:  # the files are cut inside: more pieces than files
        assert len(pieces) > len(sources)


def test_an_example_from_a_later_piece_names_the_line_of_the_file(tmp_path):
    path = tmp_path / "t.txt"
    path.write_bytes(b"".join(b"line %d\n" % i for i in range(1, 100)) + b"\xff bad\n" + b"tail\n")
    stats = SourceStats()
    start = 9 * len(b"line 1\n") + 90 * len(b"line 10\n")  # the start of line 100
    documents = list(iter_documents([TextPiece(path, start, None)], doc_sep="line", field_name="text", stats=stats))
    assert [(d.number, d.text) for d in documents] == [(101, "tail")]
    assert stats.examples == {"bad_utf8": [f"{path}:100"]}
