"""Helpers of the remote-source tests: one tree both as a local folder and as an S3 prefix, and the outputs compared."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

from dataio.formats.dataset.manifest import read_manifest
from tests.remote.conftest import KEY, SECRET


def mirrored(s3, folder: Path, local: Path, bucket: str | None = None, prefix: str = "src") -> str:
    """The regular files under ``folder`` copied to ``local`` and to a new bucket's ``prefix``: the same tree
    twice (links, FIFOs and the like are not copied: object storage has none). Returns the S3 URL."""
    bucket = bucket or f"src-{uuid.uuid4().hex[:12]}"
    fs = s3.fs()
    fs.mkdir(bucket)
    for path in sorted(folder.rglob("*")):
        if path.is_symlink() or not path.is_file():
            continue
        relative = path.relative_to(folder).as_posix()
        (local / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, local / relative)
        fs.put_file(str(path), f"{bucket}/{prefix}/{relative}")
    return f"s3://{bucket}/{prefix}"


def put(s3, url: str, data: bytes) -> None:
    """One object at the s3:// ``url``."""
    s3.fs().pipe_file(url[len("s3://"):], data)


def outputs_of(out: Path) -> dict:
    """What must be the same for a URL source and its local copy: the shards' sha256 and sizes, the sample table,
    ``rejected.jsonl``, the classes and the sample count (options naming the source's path left out)."""
    _, manifest = read_manifest(out)
    rejected = (out / "rejected.jsonl").read_text() if (out / "rejected.jsonl").exists() else ""
    return {"shards": [(s.file, s.sha256, s.num_samples) for s in manifest.shards], "classes": manifest.classes,
            "num_samples": manifest.num_samples, "rejected": rejected,
            "table": (out / "samples.arrow").read_bytes()}


def cli(s3, *args: str) -> subprocess.CompletedProcess:
    """``dataio ARGS`` as a user runs it, the S3 endpoint and keys in the environment (never on the line)."""
    env = {**os.environ, "AWS_ENDPOINT_URL": s3.endpoint, "AWS_ACCESS_KEY_ID": KEY, "AWS_SECRET_ACCESS_KEY": SECRET,
           "AWS_DEFAULT_REGION": "us-east-1", "AWS_EC2_METADATA_DISABLED": "true", "DATAIO_NUM_WORKERS": "1"}
    return subprocess.run([sys.executable, "-m", "dataio", *args], capture_output=True, text=True, env=env,
                          timeout=300)


def one_line(result: subprocess.CompletedProcess) -> str:
    """The error line of a failed command: exactly one, no traceback."""
    lines = result.stderr.strip().splitlines()
    assert "Traceback" not in result.stderr and len(lines) == 1, result.stderr
    return lines[0]


def loads(lines: str) -> list[dict]:
    return [json.loads(line) for line in lines.splitlines()]
