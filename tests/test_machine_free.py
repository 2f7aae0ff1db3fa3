"""The clone is machine-free: no tracked link leaves it, no tracked file names a path of one machine.

A fresh clone on another machine must build and pass (``make test``): a tracked symlink to an absolute path
or out of the clone (a ``.venv-main`` pointing at a virtual environment elsewhere) dangles there, and a
tracked home folder, workspace or pytest temporary folder names a machine that is not the reader's. The check
reads what git tracks (``git ls-files``), so it is skipped, with the reason, where there is no git or the tree
is not a git checkout (an sdist).
"""

from __future__ import annotations

import os
import posixpath
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SYMLINK_MODE = "120000"

# A path of one machine, where a path starts (not inside a longer one: ``/tmp/bench/work/src`` is a benchmark's
# record of its own scratch folder, ``s3://bucket/root/x`` a bucket's key). The first letter of each name is a
# class so that this file does not match itself.
MACHINE_PATH = re.compile(
    r"(?<![\w.~/-])(?:/[w]ork/|/[r]oot/|/[h]ome/[A-Za-z_][\w.-]*/|/[U]sers/[A-Za-z_][\w.-]*/|/[t]mp/pytest-of-)")


def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True, text=True).stdout


def checkout_or_skip(root: Path) -> None:
    """Skip, saying why, unless git runs and ``root`` is the top of a git checkout."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed: the tracked files cannot be listed")
    try:
        top = _git(root, "rev-parse", "--show-toplevel").strip()
    except subprocess.CalledProcessError:
        pytest.skip(f"{root} is not a git checkout (an sdist?): no tracked files to check")
    if Path(top).resolve() != root.resolve():
        pytest.skip(f"{root} is not the top of a git checkout (it lies in {top}): no tracked files of its own")


def links_leaving(root: Path) -> list[str]:
    """Tracked symlinks whose target is absolute or climbs out of the clone, as ``PATH -> TARGET``."""
    found = []
    for line in _git(root, "ls-files", "-s", "-z").split("\0"):
        if not line.startswith(SYMLINK_MODE + " "):
            continue
        meta, path = line.split("\t", 1)
        target = _git(root, "cat-file", "blob", meta.split()[1])  # a link's blob is its target
        inside = posixpath.normpath(posixpath.join(posixpath.dirname(path), target))
        if target.startswith("/") or re.match(r"[A-Za-z]:[\\/]", target) or inside.split("/")[0] == "..":
            found.append(f"{path} -> {target}")
    return found


def machine_paths(root: Path) -> list[str]:
    """``FILE:LINE: PATH`` for each tracked text file's line that names a path of one machine."""
    found = []
    for name in _git(root, "ls-files", "-z").split("\0"):
        path = root / name
        if not name or path.is_symlink() or not path.is_file():
            continue
        data = path.read_bytes()
        if b"\0" in data[:8192]:  # binary: an image, an Arrow file
            continue
        for number, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
            hit = MACHINE_PATH.search(line)
            if hit:
                found.append(f"{name}:{number}: {line[hit.start():hit.start() + 60].split()[0]}")
    return found


def test_the_clone_tracks_no_link_leaving_it_and_no_machine_path():
    checkout_or_skip(ROOT)
    assert links_leaving(ROOT) == [], "tracked links that dangle on another machine (git rm --cached them)"
    assert machine_paths(ROOT) == [], "tracked files naming a path of this machine"


def test_virtual_environments_beside_the_clone_are_ignored():
    checkout_or_skip(ROOT)
    ignored = subprocess.run(["git", "-C", str(ROOT), "check-ignore", ".venv-main", ".venv-cuda12"],
                             capture_output=True, text=True).stdout.split()
    assert ignored == [".venv-main", ".venv-cuda12"], ".venv-* is not in .gitignore"


def test_the_check_finds_links_and_paths_and_leaves_legitimate_strings(tmp_path):
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    repo = tmp_path / "clone"
    (repo / "docs").mkdir(parents=True)
    _git(repo, "init", "-q")
    os.symlink("/" + "opt/venvs/main", repo / ".venv-main")
    os.symlink("../../elsewhere/data", repo / "docs" / "data")
    os.symlink("index.md", repo / "docs" / "home.md")  # inside the clone: fine
    os.symlink("../README.md", repo / "docs" / "readme.md")
    home, pytest_tmp = "/" + "home/alice/data/x.json", "/" + "tmp/pytest-of-alice/pytest-3/t0/out"
    (repo / "README.md").write_text(f"see {home}\n")
    (repo / "docs" / "index.md").write_text(
        "results of a run in /tmp/bench/work/src (a record), s3://bucket/root/key, https://example.com/work/x,\n"
        f"a home directory (/home), ~/work/x, $HOME/work/shards\n\n\n{pytest_tmp}\n")
    (repo / "docs" / "plot.png").write_bytes(b"\x89PNG\0\0/" + b"root/x")  # binary: not read
    _git(repo, "add", "-A")
    assert sorted(links_leaving(repo)) == [".venv-main -> /opt/venvs/main", "docs/data -> ../../elsewhere/data"]
    assert machine_paths(repo) == [f"README.md:1: {home}", f"docs/index.md:5: {pytest_tmp}"]


def test_a_tree_that_is_not_a_checkout_is_skipped_with_the_reason(tmp_path):
    with pytest.raises(pytest.skip.Exception, match="not a git checkout|not the top of a git checkout|git is not installed"):
        checkout_or_skip(tmp_path)
