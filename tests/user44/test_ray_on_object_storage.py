"""Issue 44: 'Inputs and outputs may be object storage (s3://...)' for convert images/text and dataio index."""

from __future__ import annotations

import pytest

from .conftest import cli, ok, ray_flags, s3_flags

pytest.importorskip("ray")


def test_verify_reads_merged_ray_output_on_s3(ray_head, s3, images):
    """convert images --engine ray to s3://, then `dataio verify` the URL: now every part's shard is 'missing'."""
    fs = s3.fs()
    fs.mkdir("u44-verify")
    fs.put(str(images), "u44-verify/src", recursive=True)
    out = "s3://u44-verify/out"
    ok(cli("convert", "images", "s3://u44-verify/src", out, *ray_flags(ray_head), *s3_flags(s3)))
    assert fs.exists("u44-verify/out/rank-00000-of-00002/shard-000000.tar")
    result = cli("verify", out, *s3_flags(s3))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "missing" not in result.stdout + result.stderr


def test_text_from_s3_source_on_ray(ray_head, s3, corpus, tmp_path):
    """convert text s3://.../corpus.txt --engine ray: now a TypeError traceback (RemoteRoot given to Path)."""
    fs = s3.fs()
    fs.mkdir("u44-text")
    fs.put_file(str(corpus), "u44-text/corpus/corpus.txt")
    result = cli("convert", "text", "s3://u44-text/corpus/corpus.txt", str(tmp_path / "out"),
                 "--train-tokenizer", "bpe", "--vocab-size", "300", *ray_flags(ray_head), *s3_flags(s3))
    ok(result)
    assert (tmp_path / "out" / "manifest.json").exists()


def test_index_of_tars_on_s3_is_refused_in_one_line(ray_head, tmp_path):
    """`dataio index s3://bucket/wds`: the index is written beside the tars, so tars on object storage are refused
    in one line naming the URL (it once mangled the URL into 's3:/bucket/...: not a .tar file')."""
    result = cli("index", "s3://u44-index/wds", *ray_flags(ray_head))
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "s3://u44-index/wds" in lines[0] and "not a URL yet" in lines[0], result.stderr
