"""Issue 44 attack: an s3:// OUT of --engine ray (moto on 127.0.0.1), --overwrite and secrets."""

from __future__ import annotations

import uuid

import pytest

pytest.importorskip("ray", reason="the ray extra is part of the test extra")
pytest.importorskip("s3fs", reason="the s3 extra is part of the test extra")

from tests.attack44.ray_cli import dataio, image_tree, ray_args  # noqa: E402
from tests.remote.conftest import KEY, S3, SECRET  # noqa: E402

SAFE_ENV = {"AWS_EC2_METADATA_DISABLED": "true", "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent",
            "AWS_CONFIG_FILE": "/nonexistent", "AWS_DEFAULT_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "",
            "AWS_SECRET_ACCESS_KEY": ""}


@pytest.fixture(scope="module")
def s3():
    server = S3()
    yield server
    server.stop()


def test_overwrite_of_an_s3_out_removes_only_dataios_files_and_prints_no_secret(ray_head, s3, tmp_path):
    """s3://bucket/data holds the user's keep.txt (not dataio's). `convert images SRC s3://bucket/data --engine
    ray --overwrite --storage-option secret=...`. Now: _start_remote runs fs.rm(OUT, recursive=True): keep.txt
    (anything under the prefix) is deleted. One process and a local OUT remove only dataio's own files
    (rank folders, plan.json, manifest, sample table). Should: keep.txt kept; the secret in no output."""
    src = image_tree(tmp_path / "src", per_class=2)
    bucket = f"b-{uuid.uuid4().hex[:10]}"
    fs = s3.fs()
    fs.mkdir(bucket)
    fs.pipe_file(f"{bucket}/data/keep.txt", b"the user's own object")
    url = f"s3://{bucket}/data"
    result = dataio("convert", "images", str(src), url, *ray_args(ray_head, "--items", "2", "--overwrite"),
                    "--staging", str(tmp_path / "staging"),
                    "--storage-option", f"key={KEY}", "--storage-option", f"secret={SECRET}",
                    "--storage-option", f"client_kwargs.endpoint_url={s3.endpoint}", env=SAFE_ENV)
    assert SECRET not in result.stderr + result.stdout
    assert result.returncode == 0, result.stderr[-2000:]
    assert SECRET.encode() not in fs.cat_file(f"{bucket}/data/plan.json")
    fs.invalidate_cache()
    assert fs.exists(f"{bucket}/data/keep.txt"), "--overwrite deleted an object dataio did not write"
