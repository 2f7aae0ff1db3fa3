"""Shared helpers of the hostile tests: hostile copies of shard folders, the CLI as a user runs it."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.ipc as ipc
import pytest

from dataio.formats.images.image_convert import ConvertImagesConfig, convert_images

DROP = object()  # rewrite_manifest(..., key=DROP) removes the key


def copy_folder(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def rewrite_manifest(src: Path, dst: Path, **changes) -> Path:
    """A copy of shard folder ``src`` at ``dst`` whose manifest has ``changes`` (``DROP`` removes a key)."""
    copy_folder(src, dst)
    path = dst / "manifest.json"
    data = json.loads(path.read_text())
    for key, value in changes.items():
        if value is DROP:
            data.pop(key, None)
        else:
            data[key] = value
    path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    return dst


def rewrite_table(folder: Path, change: Callable[[pa.Table], pa.Table]) -> None:
    """Rewrite ``folder``'s sample table with ``change`` (read into memory first: the file is replaced)."""
    path = folder / "samples.arrow"
    table = ipc.open_file(pa.BufferReader(path.read_bytes())).read_all()
    table = change(table)
    with ipc.new_file(path, table.schema) as writer:
        writer.write_table(table)


def scale_sizes(rows: list[int], factor: int) -> Callable[[pa.Table], pa.Table]:
    """A table change: rows ``rows`` record ``factor`` times their width and height (a stale or altered table)."""
    def change(table: pa.Table) -> pa.Table:
        data = table.to_pydict()
        for row in rows:
            data["width"][row] *= factor
            data["height"][row] *= factor
        return pa.Table.from_pydict(data, schema=table.schema)
    return change


def views_folder(src: Path, out: Path) -> Path:
    """``src`` packed as `dataio convert images SRC OUT --kind views` packs it."""
    convert_images(ConvertImagesConfig(src=src, out=out, kind="views", num_workers=1, progress=False,
                                       max_shard_samples=16))
    return out


def write_pair_tar(folder: Path, members: dict[str, tuple[str, bytes]]) -> Path:
    """One WebDataset tar of ``{key: (ext, image bytes)}`` with a caption each, in ``folder`` (not indexed)."""
    folder.mkdir(parents=True, exist_ok=True)
    with tarfile.open(folder / "00000.tar", "w") as tar:
        for key, (ext, data) in members.items():
            for name, payload in ((f"{key}.{ext}", data), (f"{key}.txt", f"a caption of {key}".encode())):
                info = tarfile.TarInfo(name)
                info.size = len(payload)
                tar.addfile(info, io.BytesIO(payload))
    return folder


def run_cli(*args: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    env = {**os.environ, "DATAIO_NUM_WORKERS": "1"}
    return subprocess.run([sys.executable, "-m", "dataio", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)


def one_line_refusal(result: subprocess.CompletedProcess) -> str:
    """The stderr of a refused command, checked: exit 1 or 2, one line, no traceback."""
    err = result.stderr.strip()
    assert result.returncode in (1, 2), (result.returncode, err[-2000:])
    assert "Traceback" not in err, err[-2000:]
    assert len(err.splitlines()) == 1, err[-2000:]
    return err


@pytest.fixture(scope="session")
def views_shards(coloured_folder, tmp_path_factory) -> Path:
    """The 45 solid-colour images packed with --kind views (no classes), several shards."""
    return views_folder(coloured_folder, tmp_path_factory.mktemp("attack_views") / "out")
