"""A user's tokenizer at pack time (``dataio index --tokenizer``, as a user runs it): nothing it gives is trusted.

Before: the ids' dtype followed the vocabulary's count, so a pruned vocabulary (300 entries, ids up to 70001)
was stored as uint16, wrapped, and ``verify --deep`` said OK; a regex pre-tokenizer that panicked ended the
run in a 27-line traceback with the DALI indexes and the journal left behind."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa

from dataio.formats.pairs.synthetic_pair_writers import write_img2dataset
from dataio.formats.pairs.synthetic_pairs import SyntheticPairsConfig, make_pair
from tests.hostile_helpers import one_line_refusal, rewrite_table, run_cli
from tests.pairs.tokenizer_makers import PANIC_ON_ALL, PANIC_ON_SQUARE, PRUNED_TOP, panics, pruned_tokenizer, \
    word_tokenizer

PAIRS = SyntheticPairsConfig(count=12, samples_per_shard=6, failed_fraction=0.0, seed=3)


def tars(folder: Path) -> Path:
    write_img2dataset(folder, PAIRS)
    return folder


def test_a_pruned_vocabulary_is_stored_without_wrap_and_verify_deep_checks_its_ids(tmp_path):
    folder = tars(tmp_path / "tars")
    pruned_tokenizer(tmp_path / "pruned.json")
    done = run_cli("index", str(folder), "--tokenizer", "pruned.json", "--no-progress", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["options"]["tokenizer"]["vocab_size"] == PRUNED_TOP + 1  # largest id + 1, not the count 300
    assert manifest["options"]["token_dtype"] == "uint32"
    table = pa.ipc.open_file(folder / "samples.arrow").read_all()
    rows = table.column("input_ids").to_pylist()
    assert all(row[0] == PRUNED_TOP - 1 and row[-1] == PRUNED_TOP for row in rows)  # <s> ... </s>, unwrapped
    assert run_cli("verify", str(folder), "--deep", cwd=tmp_path).returncode == 0

    def past(table: pa.Table) -> pa.Table:  # one id past the vocabulary, as a hand-edited table would hold
        ids = [list(row) for row in rows]
        ids[2][1] = PRUNED_TOP + 1
        index = table.schema.get_field_index("input_ids")
        return table.set_column(index, "input_ids", pa.array(ids, table.schema.field(index).type))

    rewrite_table(folder, past)
    found = run_cli("verify", str(folder), "--deep", cwd=tmp_path)
    assert found.returncode == 1 and f"token id {PRUNED_TOP + 1} >= vocabulary size {PRUNED_TOP + 1}" in \
        found.stdout + found.stderr, (found.stdout, found.stderr)


def test_a_tokenizer_panicking_on_every_caption_fails_index_in_one_line_leaving_no_files(tmp_path):
    folder = tars(tmp_path / "tars")
    before = sorted(p.name for p in folder.iterdir())
    word_tokenizer(tmp_path / "panics.json", pattern=PANIC_ON_ALL)
    done = run_cli("index", str(folder), "--tokenizer", "panics.json", "--no-progress", cwd=tmp_path)
    err = one_line_refusal(done)
    assert done.returncode == 1 and "the tokenizer failed on every caption" in err and "PanicException" in err, err
    # the report of why is all that is left: no index, table, manifest, tokenizer, journal or temp file
    assert sorted(p.name for p in folder.iterdir()) == sorted(before + ["rejected.jsonl"])
    lines = [json.loads(line) for line in (folder / "rejected.jsonl").read_text().splitlines()]
    assert len(lines) == PAIRS.count and all("PanicException" in line["reason"] for line in lines)


def test_a_tokenizer_panicking_on_some_captions_rejects_their_pairs_one_line_each(tmp_path):
    folder = tars(tmp_path / "tars")
    tokenizer = word_tokenizer(tmp_path / "panics.json", pattern=PANIC_ON_SQUARE)
    failing = {i for i in range(PAIRS.count) if panics(tokenizer, make_pair(i, PAIRS).caption)}
    assert 0 < len(failing) < PAIRS.count
    done = run_cli("index", str(folder), "--tokenizer", "panics.json", "--no-progress", cwd=tmp_path)
    assert done.returncode == 0 and "Traceback" not in done.stderr and "panicked" not in done.stderr, done.stderr
    assert f"indexed {PAIRS.count - len(failing)} image-text pairs" in done.stdout
    lines = [json.loads(line) for line in (folder / "rejected.jsonl").read_text().splitlines()]
    assert len(lines) == len(failing) and all("the tokenizer failed on it (PanicException" in line["reason"]
                                              for line in lines)
    manifest = json.loads((folder / "manifest.json").read_text())
    assert sum(shard["num_samples"] for shard in manifest["shards"]) == manifest["num_samples"] == \
        PAIRS.count - len(failing)
    table = pa.ipc.open_file(folder / "samples.arrow").read_all()
    assert len(table) == len(table.column("input_ids")) == PAIRS.count - len(failing)
    assert run_cli("verify", str(folder), "--deep", cwd=tmp_path).returncode == 0
