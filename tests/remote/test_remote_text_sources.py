"""``dataio convert text s3://...``: .txt/.jsonl/.parquet sources on object storage tokenise as their local copies."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dataio.formats.text.text_convert import ConvertTextConfig, convert_text
from dataio.formats.text.tokenizer_setup import TokenizerConfig
from tests.remote.remote_source_helpers import cli, mirrored, one_line


def _outputs(out) -> dict:
    """The shards' and the table's bytes, and the manifest less its sources' names."""
    manifest = json.loads((out / "manifest.json").read_text())
    return {"files": {p.name: p.read_bytes() for p in sorted(out.iterdir())
                      if p.suffix in (".arrow", ".tar") and p.is_file()},
            "shards": [(s["file"], s["sha256"]) for s in manifest["shards"]], "samples": manifest["num_samples"]}


@pytest.fixture(scope="module")
def corpus(text_corpus, tmp_path_factory):
    """The session corpus as .txt, .jsonl (with a bad line) and .parquet (two row groups), in one folder."""
    folder = tmp_path_factory.mktemp("remote_corpus")
    lines = text_corpus.read_text().splitlines()
    (folder / "a.txt").write_text("\n".join(lines[:60]) + "\n")
    (folder / "b.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in lines[60:120]) + "{bad\n")
    pq.write_table(pa.table({"text": lines[120:180]}), folder / "c.parquet", row_group_size=30)
    return folder


@pytest.mark.parametrize("world", [1, 2])
def test_text_sources_on_s3_tokenise_as_their_local_copies(s3, corpus, text_shards, tmp_path, world):
    url = mirrored(s3, corpus, tmp_path / "local")
    tokenizer = TokenizerConfig(path=text_shards / "tokenizer.json")
    common = dict(tokenizer=tokenizer, shard_tokens=3000, progress=False, world_size=world)
    for rank in range(world):
        convert_text(ConvertTextConfig(sources=(tmp_path / "local",), out=tmp_path / "from-local", rank=rank, **common))
        convert_text(ConvertTextConfig(sources=(url,), out=tmp_path / "from-s3", rank=rank,
                                       storage_options=s3.options(), **common))
    local, remote = _outputs(tmp_path / "from-local"), _outputs(tmp_path / "from-s3")
    assert local == remote and local["samples"] > 100


def test_the_cli_takes_a_glob_of_s3_sources_and_names_a_missing_one(s3, corpus, text_shards, tmp_path):
    url = mirrored(s3, corpus, tmp_path / "local")
    tokenizer = str(text_shards / "tokenizer.json")
    result = cli(s3, "convert", "text", f"{url}/*.jsonl", str(tmp_path / "out"), "--tokenizer", tokenizer,
                 "--no-progress")
    assert result.returncode == 0, result.stderr
    assert "bad_json" in result.stderr and url in result.stderr  # the bad line, named by its URL and line
    missing = cli(s3, "convert", "text", f"{url}/nothing.jsonl", str(tmp_path / "o2"), "--tokenizer", tokenizer,
                  "--no-progress")
    assert missing.returncode == 2 and f"{url}/nothing.jsonl" in one_line(missing)
