"""Issue 44 attack, ``dataio index --engine ray`` over tars that change after their item journaled them: before the
merge of the same run, or between a killed run and its rerun. The index must never publish a journal's stale
offsets, keys or checksums: the merge indexes a changed tar again, or refuses in one line naming it."""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path

import pyarrow as pa
import pytest

from dataio.formats.dataset.manifest import read_manifest
from dataio.formats.dataset.sample_table import sample_checksum
from dataio.formats.files import sha256_file
from dataio.formats.plan import plan_driver

from tests.attack44b.conftest import RAY, jpeg, one_line, run, tar_folder

pytest.importorskip("ray", reason="the ray extra is part of the test extra")


def true_index(folder: Path) -> list[str]:
    """Every row's bytes read at its offset hash to its xxh3, and every tar's sha256 is its file's; the keys."""
    manifest = read_manifest(folder)[1]
    files = [entry.file for entry in manifest.shards]
    for entry in manifest.shards:
        assert entry.sha256 == sha256_file(folder / entry.file), f"{entry.file}: the manifest's sha256 is stale"
    table = pa.ipc.open_file(str(folder / "samples.arrow")).read_all().to_pylist()
    for row in table:
        with open(folder / files[row["shard"]], "rb") as f:
            f.seek(row["offset"])
            data = f.read(row["size"])
        assert sample_checksum(data) == row["xxh3"], f"{row['path']}: offset {row['offset']} is stale"
    return [row["key"] for row in table]


def merge_after(monkeypatch, change) -> None:
    """The driver's merge runs after ``change()`` (the tars changed once every item journaled its tars)."""
    real = plan_driver.merge_plan

    def merge(plan, mirror):
        change()
        return real(plan, mirror)

    monkeypatch.setattr(plan_driver, "merge_plan", merge)


def killed_before_merge(monkeypatch, capsys, folder: Path) -> None:
    """A run whose driver is interrupted (Ctrl-C) once every item journaled its tars, before the merge."""
    def interrupted(plan, mirror):
        raise KeyboardInterrupt

    with monkeypatch.context() as patch:
        patch.setattr(plan_driver, "merge_plan", interrupted)
        code, err = run(capsys, "index", str(folder), *RAY)
    assert code == 130 and (folder / ".index-journal" / "part-001.tar.json").is_file(), err


def swap_keeping_mtimes(a: Path, b: Path) -> None:
    """Rewrite two tars of the same size with each other's bytes, in place, their mtimes put back (as `cp -p`,
    `rsync -a` or a restore from a backup leave them): size and mtime, the journal's stamp, say unchanged."""
    stats = a.stat(), b.stat()
    assert stats[0].st_size == stats[1].st_size
    data_a, data_b = a.read_bytes(), b.read_bytes()
    for path, data, stat in ((a, data_b, stats[0]), (b, data_a, stats[1])):
        with open(path, "r+b") as f:
            f.write(data)
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))


def test_tars_rewritten_with_their_mtime_kept_before_the_merge_are_indexed_anew(ray_here, monkeypatch, capsys,
                                                                                tmp_path):
    """Four tars, two items; after both items journaled, part-001.tar and part-002.tar (same size) get each
    other's bytes with their mtimes kept, then the merge runs. Before the fix: the journals' stamp (size, mtime)
    matched, so the index published part-001.tar's old keys, labels and checksums over part-002's bytes (every
    xxh3 wrong, the manifest's sha256 stale), exit 0. Should: the changed tars indexed again."""
    folder = tar_folder(tmp_path / "tars")
    merge_after(monkeypatch, lambda: swap_keeping_mtimes(folder / "part-001.tar", folder / "part-002.tar"))
    code, err = run(capsys, "index", str(folder), *RAY)
    assert code == 0, err
    keys = true_index(folder)
    assert sorted(keys) == [f"k{k:05d}" for k in range(12)]


def test_tars_rewritten_with_their_mtime_kept_after_a_killed_run_are_indexed_anew(ray_here, monkeypatch, capsys,
                                                                                  tmp_path):
    """The same change between a run killed before its merge and its rerun (the same command)."""
    folder = tar_folder(tmp_path / "tars")
    killed_before_merge(monkeypatch, capsys, folder)
    swap_keeping_mtimes(folder / "part-001.tar", folder / "part-002.tar")
    code, err = run(capsys, "index", str(folder), *RAY)
    assert code == 0, err
    true_index(folder)


def truncate(path: Path) -> None:
    with open(path, "r+b") as f:
        f.truncate(1500)


def test_control_a_tar_truncated_before_the_merge_is_named_in_one_line(ray_here, monkeypatch, capsys, tmp_path):
    """Control: part-001.tar cut to 1,500 bytes once its item journaled it: the merge refuses in one line naming
    it, exit 1, and publishes no manifest."""
    folder = tar_folder(tmp_path / "tars")
    merge_after(monkeypatch, lambda: truncate(folder / "part-001.tar"))
    code, err = run(capsys, "index", str(folder), *RAY)
    assert code == 1 and "part-001.tar" in one_line(err), err
    assert not (folder / "manifest.json").exists()


def test_a_tar_truncated_after_a_killed_run_is_named_in_the_rerun(ray_here, monkeypatch, capsys, tmp_path):
    """part-001.tar cut to 1,500 bytes between a killed run and its rerun (the same command). Now: exit 2,
    `.index-journal/plan.json: the tars are being indexed by another plan (other options, tars or --items); give
    the same command again to finish it, or pass --overwrite`: no tar named, and the same command (the one just
    given) is refused for ever. Should: index again or refuse in one line naming part-001.tar."""
    folder = tar_folder(tmp_path / "tars")
    killed_before_merge(monkeypatch, capsys, folder)
    truncate(folder / "part-001.tar")
    code, err = run(capsys, "index", str(folder), *RAY)
    assert code in (1, 2) and "part-001.tar" in one_line(err), err
    assert not (folder / "manifest.json").exists()


def test_control_a_tar_appended_to_before_the_merge_is_indexed_anew(ray_here, monkeypatch, capsys, tmp_path):
    """Control: a member appended to part-003.tar after its item journaled it: the merge indexes the tar again
    (its size changed), the new key at its true offset."""
    folder = tar_folder(tmp_path / "tars")

    def append() -> None:
        with tarfile.open(folder / "part-003.tar", "a") as tar:
            for ext, data in (("jpg", jpeg((1, 2, 3))), ("cls", b"1")):
                info = tarfile.TarInfo(f"k99999.{ext}")
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))

    merge_after(monkeypatch, append)
    code, err = run(capsys, "index", str(folder), *RAY)
    assert code == 0, err
    assert "k99999" in true_index(folder)
