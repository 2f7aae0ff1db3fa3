"""Issue 44 attack, links planted where a plan writes: a local OUT's part folders, plan record and merged files, a
URL OUT's staging folder, and the journal folder ``dataio index --engine ray`` keeps beside the tars. Each link
points outside, at a folder or file standing in for ``~/.ssh``: it must stay untouched, and the run be refused in
one line or the link replaced without being followed."""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path

import pytest

from tests.attack44b.conftest import RAY, image_tree, one_line, run, s3_flags, tar_folder

pytest.importorskip("ray", reason="the ray extra is part of the test extra")


@pytest.fixture(scope="module")
def finished(ray_here, tmp_path_factory) -> tuple[Path, Path]:
    """(SRC, OUT): a finished two-item conversion, copied by each test (a driver killed before its merge is this
    OUT without its merged files)."""
    root = tmp_path_factory.mktemp("links")
    src, out = image_tree(root / "src"), root / "out"
    from dataio.cli import main

    assert main(["convert", "images", str(src), str(out), *RAY]) == 0
    return src, out


def victim_folder(tmp_path: Path) -> Path:
    """A folder of the user's outside OUT (``~/.ssh``), with one file."""
    folder = tmp_path / "ssh"
    folder.mkdir()
    (folder / "id_ed25519").write_bytes(b"private key\n")
    return folder


def killed_before_merge(finished: tuple[Path, Path], tmp_path: Path) -> Path:
    out = tmp_path / "out"
    shutil.copytree(finished[1], out, symlinks=True)
    for name in ("manifest.json", "samples.arrow", "rejected.jsonl"):
        (out / name).unlink(missing_ok=True)
    return out


def test_a_part_folder_linked_out_of_out_is_refused_not_written_through(finished, capsys, tmp_path):
    """OUT of a driver killed before its merge; rank-00000-of-00002 replaced by a link to an empty folder of the
    user's. The same command again. Before the fix: the item found no manifest through the link and packed its
    part there (a lock, shards, a sample table written into the user's folder), exit 0. Should: one line naming
    the link, exit 2, the folder left empty."""
    out = killed_before_merge(finished, tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    shutil.rmtree(out / "rank-00000-of-00002")
    (out / "rank-00000-of-00002").symlink_to(elsewhere)
    code, err = run(capsys, "convert", "images", str(finished[0]), str(out), *RAY)
    assert list(elsewhere.iterdir()) == [], f"written through the link (exit {code}): {err[-1500:]}"
    assert code == 2 and "rank-00000-of-00002" in one_line(err) and "link" in err, err


@pytest.mark.parametrize("name", ["rank-00000-of-00002", "plan.json", "samples.arrow", "manifest.json"])
def test_control_overwrite_removes_a_planted_link_not_its_target(finished, capsys, tmp_path, name):
    """Control (holds): a link named as one of dataio's files in OUT, to the user's folder (a part folder's name)
    or file; `--overwrite` removes the link, never what it points at, and converts."""
    victim = victim_folder(tmp_path)
    out = killed_before_merge(finished, tmp_path)
    target = victim if name.startswith("rank") else victim / "id_ed25519"
    path = out / name
    shutil.rmtree(path) if path.is_dir() else path.unlink(missing_ok=True)
    path.symlink_to(target)
    code, err = run(capsys, "convert", "images", str(finished[0]), str(out), *RAY, "--overwrite")
    assert code == 0 and "Traceback" not in err, err
    assert sorted(p.name for p in victim.iterdir()) == ["id_ed25519"]
    assert (victim / "id_ed25519").read_bytes() == b"private key\n"
    assert not path.is_symlink()


@pytest.mark.parametrize("name", ["plan.json", "samples.arrow", "rejected.jsonl", "manifest.json"])
def test_control_a_linked_record_or_merged_file_is_refused_in_one_line(finished, capsys, tmp_path, name):
    """Control (holds): the same link without --overwrite: one line, exit 2, the target untouched."""
    victim = victim_folder(tmp_path)
    out = killed_before_merge(finished, tmp_path)
    (out / name).unlink(missing_ok=True)
    (out / name).symlink_to(victim / "id_ed25519")
    code, err = run(capsys, "convert", "images", str(finished[0]), str(out), *RAY)
    assert code == 2 and one_line(err), err
    assert (victim / "id_ed25519").read_bytes() == b"private key\n"


def staged(s3, src: Path, staging: Path, capsys, *more: str) -> tuple[int, str, str]:
    url = f"s3://b-{uuid.uuid4().hex[:10]}/out"
    s3.fs().mkdir(url[5:].split("/")[0])
    code, err = run(capsys, "convert", "images", str(src), url, *RAY, "--staging", str(staging), *s3_flags(s3), *more)
    return code, err, url


def test_a_staged_part_linked_out_of_staging_is_refused(finished, s3, no_ambient_aws, capsys, tmp_path):
    """An s3:// OUT staged in --staging (shared scratch); the plan's staged part rank-00000-of-00002 a link to an
    empty folder of the user's (planted by whoever shares the scratch: the plan's folder name is its fingerprint,
    the same for everyone converting the same input). Before the fix: the item packed its part through the link.
    Should: one line naming the link, the folder left empty."""
    staging = tmp_path / "staging"
    code, err, url = staged(s3, finished[0], staging, capsys)
    assert code == 0, err
    plan_folder = next(p for p in staging.iterdir() if len(p.name) == 16)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    shutil.rmtree(plan_folder / "rank-00000-of-00002")
    (plan_folder / "rank-00000-of-00002").symlink_to(elsewhere)
    code, err = run(capsys, "convert", "images", str(finished[0]), url, *RAY, "--staging", str(staging),
                    *s3_flags(s3), "--overwrite")
    assert list(elsewhere.iterdir()) == [], f"written through the link (exit {code}): {err[-1500:]}"
    assert code == 2 and "rank-00000-of-00002" in one_line(err), err


def test_a_staged_merge_folder_linked_elsewhere_is_refused_naming_it(finished, s3, no_ambient_aws, capsys,
                                                                     tmp_path):
    """The plan's merge mirror (STAGING/<plan>/merge) a link to the user's folder. Rerun with --overwrite. The
    folder must stay whole, and the refusal name the link (before the fix: `Cannot call rmtree on a symbolic
    link`, naming no path)."""
    staging = tmp_path / "staging"
    code, err, url = staged(s3, finished[0], staging, capsys)
    assert code == 0, err
    plan_folder = next(p for p in staging.iterdir() if len(p.name) == 16)
    victim = victim_folder(tmp_path)
    shutil.rmtree(plan_folder / "merge")
    (plan_folder / "merge").symlink_to(victim)
    code, err = run(capsys, "convert", "images", str(finished[0]), url, *RAY, "--staging", str(staging),
                    *s3_flags(s3), "--overwrite")
    assert sorted(p.name for p in victim.iterdir()) == ["id_ed25519"]
    assert code in (1, 2) and "merge" in one_line(err), err


def test_control_a_linked_staging_folder_is_used(finished, s3, no_ambient_aws, capsys, tmp_path):
    """Control (holds): --staging given as a link to a folder (the user's own choice, as OUT may be) works."""
    real = tmp_path / "scratch"
    real.mkdir()
    (tmp_path / "staging").symlink_to(real)
    code, err, url = staged(s3, finished[0], tmp_path / "staging", capsys)
    assert code == 0 and "Traceback" not in err, err
    assert s3.fs().exists(f"{url[5:]}/manifest.json")


@pytest.mark.parametrize("engine", [RAY, ()], ids=["ray", "one-process"])
def test_an_index_journal_linked_elsewhere_is_refused(ray_here, capsys, tmp_path, engine):
    """A folder of tars whose `.index-journal` is a link to the user's folder (holding keep.json). `dataio index
    DIR --engine ray` (and one process). Before the fix: plan.json and a journal per tar written into the user's
    folder, then every *.json there deleted (the user's keep.json too) as the journal was removed, and the run
    ended `Not a directory`. Should: one line naming the link, exit 2, the folder as it was."""
    folder = tar_folder(tmp_path / "tars")
    victim = tmp_path / "config"
    victim.mkdir()
    (victim / "keep.json").write_text("{}\n")
    (folder / ".index-journal").symlink_to(victim)
    code, err = run(capsys, "index", str(folder), *engine, *(() if engine else ("--no-progress",)))
    assert sorted(p.name for p in victim.iterdir()) == ["keep.json"], f"exit {code}: {err[-1500:]}"
    assert code == 2 and ".index-journal" in one_line(err) and "link" in err, err


def test_control_a_journal_file_linked_elsewhere_is_not_written_through(ray_here, capsys, tmp_path):
    """Control (holds): `.index-journal/part-001.tar.json` a link to the user's file, from a killed run: the
    rerun refuses it in one line, or replaces the link; the file is untouched either way."""
    folder = tar_folder(tmp_path / "tars")
    (folder / ".index-journal").mkdir()
    victim = tmp_path / "secret.json"
    victim.write_text('{"token": "x"}\n')
    (folder / ".index-journal" / "part-001.tar.json").symlink_to(victim)
    code, err = run(capsys, "index", str(folder), *RAY)
    assert victim.read_text() == '{"token": "x"}\n'
    assert code == 0 or (code == 2 and one_line(err)), err
