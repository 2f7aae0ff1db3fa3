"""Fixtures of the second issue 44 attack: this process a Ray driver of the worker's head (``ray_head``) for a
module, the CLI called in-process, tiny image folders and tars, and a moto S3 on 127.0.0.1."""

from __future__ import annotations

import io
import tarfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from dataio.cli import main

from tests.cluster.ray_head import driver_env
from tests.remote.conftest import clear_ambient_aws


@pytest.fixture(scope="module")
def ray_here(ray_head) -> Iterator[None]:
    """Connected to ``ray_head`` for the module, then ``ray.shutdown()`` and the environment as it was."""
    ray = pytest.importorskip("ray", reason="the ray extra is part of the test extra")
    with pytest.MonkeyPatch.context() as patch:
        for name, value in driver_env({}).items():
            patch.setenv(name, value)
        for name in ("RAY_ADDRESS", "RAY_AUTH_TOKEN"):
            patch.delenv(name, raising=False)
        patch.setenv("DATAIO_NUM_WORKERS", "1")
        ray.init(address=ray_head.address, include_dashboard=False, log_to_driver=False)
        try:
            yield
        finally:
            ray.shutdown()


RAY = ("--engine", "ray", "--items", "2", "--no-progress")


def run(capsys, *argv: str) -> tuple[int, str]:
    """``dataio ARGV`` in this process: (exit code, stderr)."""
    capsys.readouterr()
    code = main(list(argv))
    return code, capsys.readouterr().err


def one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert "Traceback" not in err and len(lines) == 1, err[-3000:]
    return lines[0]


def jpeg(colour: tuple[int, int, int]) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(np.full((16, 16, 3), colour, np.uint8)).save(buffer, format="JPEG", quality=95)
    return buffer.getvalue()


def image_tree(root: Path, classes: int = 2, per_class: int = 3) -> Path:
    """Class folders of tiny JPEGs, each a colour of its own."""
    for c in range(classes):
        (root / f"class{c}").mkdir(parents=True, exist_ok=True)
        for i in range(per_class):
            (root / f"class{c}" / f"img{i}.jpg").write_bytes(jpeg((60 * c + 20 * i, 100, 30 * i)))
    return root


def write_tar(path: Path, first: int, count: int, label: int = 0) -> Path:
    """A WebDataset tar of ``count`` keys (``k{first}``...): KEY.jpg and KEY.cls."""
    with tarfile.open(path, "w", format=tarfile.USTAR_FORMAT) as tar:
        for key in range(first, first + count):
            for ext, data in (("jpg", jpeg((key * 7 % 256, 50, 90))), ("cls", str(label).encode())):
                info = tarfile.TarInfo(f"k{key:05d}.{ext}")
                info.size, info.mtime = len(data), 0
                tar.addfile(info, io.BytesIO(data))
    return path


def tar_folder(root: Path, tars: int = 4, per_tar: int = 3) -> Path:
    root.mkdir(parents=True)
    for t in range(tars):
        write_tar(root / f"part-{t:03d}.tar", t * per_tar, per_tar, label=t % 2)
    return root


@pytest.fixture(scope="module")
def s3():
    pytest.importorskip("s3fs", reason="the s3 extra is part of the test extra")
    from tests.remote.conftest import S3

    server = S3()
    yield server
    server.stop()


def s3_flags(s3) -> tuple[str, ...]:
    return ("--storage-option", f"client_kwargs.endpoint_url={s3.endpoint}", "--storage-option", "key=testing-key",
            "--storage-option", "secret=testing-secret")


@pytest.fixture
def no_ambient_aws(monkeypatch) -> None:
    """Nothing from the machine's AWS setup, and never the metadata service (only where a test asks)."""
    clear_ambient_aws(monkeypatch)
