"""``dataio index`` of tars it cannot adopt, and ``dataio verify`` of a data set of no sample: neither says OK."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import tarfile
from pathlib import Path

from PIL import Image


def run_cli(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dataio", *map(str, args)], cwd=cwd, capture_output=True,
                          text=True, timeout=120, env={**os.environ, "DATAIO_NUM_WORKERS": "1"})


def _jpeg(index: int) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (24, 16), (index * 40 % 256, 90, 160)).save(out, "JPEG")
    return out.getvalue()


def _tar(path: Path, members: dict[str, bytes]) -> None:
    with tarfile.open(path, "w") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def test_tars_without_cls_or_txt_members_exit_1_saying_which_members_are_needed(tmp_path):
    folder = tmp_path / "pictures"
    folder.mkdir()
    for shard in range(2):  # pictures and metadata only: neither classes (.cls) nor image-text pairs (.txt)
        _tar(folder / f"{shard:05d}.tar", {name: data for key in range(3) for name, data in (
            (f"{shard}{key:03d}.jpg", _jpeg(key)), (f"{shard}{key:03d}.json", b'{"url": "x"}'))})
    done = run_cli("index", folder, "--no-progress", cwd=tmp_path)
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr == (f"dataio index: nothing indexed in {folder}: dataio index needs an image member (.jpg, "
                           ".jpeg, .png, .webp) and a .cls member (classes) or a .txt caption (image-text pairs) "
                           "per key; the 2 tar(s) hold 6 key(s) with .jpg (6), .json (6); each key is listed with "
                           f"the reason in {folder / 'rejected.jsonl'}\n")
    assert (folder / "rejected.jsonl").read_text().count('"reason": "lacks a .cls member"') == 6
    assert sorted(p.name for p in folder.iterdir()) == ["00000.tar", "00001.tar", "rejected.jsonl"]
    assert run_cli("verify", folder, cwd=tmp_path).returncode == 1  # no manifest: nothing to call OK

    for shard in range(2):  # the labels added: the same command adopts them, no --overwrite needed
        with tarfile.open(folder / f"{shard:05d}.tar", "a") as tar:
            for key in range(3):
                info = tarfile.TarInfo(f"{shard}{key:03d}.cls")
                info.size = 1
                tar.addfile(info, io.BytesIO(b"1"))
    done = run_cli("index", folder, "--no-progress", cwd=tmp_path)
    assert done.returncode == 0 and done.stdout.startswith("indexed 6 images in 2 tars"), done.stderr
    assert run_cli("verify", folder, "--deep", cwd=tmp_path).returncode == 0


def test_an_empty_tar_is_nothing_indexed(tmp_path):
    _tar(tmp_path / "empty.tar", {})
    done = run_cli("index", tmp_path / "empty.tar", "--no-progress", cwd=tmp_path)
    assert done.returncode == 1 and done.stderr.count("\n") == 1
    assert "the 1 tar(s) hold 0 key(s) with no members" in done.stderr and "Traceback" not in done.stderr


def test_verify_of_a_data_set_of_no_sample_is_a_problem(tmp_path):
    (tmp_path / "src" / "cat").mkdir(parents=True)
    (tmp_path / "src" / "cat" / "x.jpg").write_bytes(b"not a jpeg")
    assert run_cli("convert", "images", "src", "out", "--no-progress", cwd=tmp_path).returncode == 1
    assert (tmp_path / "out" / "manifest.json").is_file()  # the conversion of nothing leaves its manifest
    done = run_cli("verify", "out", cwd=tmp_path)
    assert done.returncode == 1
    assert done.stdout == "verify out: 0 shards, 0 samples decoded: 1 problem(s)\n"
    assert done.stderr == ("out: holds no samples (its manifest lists 0): nothing was converted or indexed; the "
                           "rejected inputs are listed in out/rejected.jsonl\n")
