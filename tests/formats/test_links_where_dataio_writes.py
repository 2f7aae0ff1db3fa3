"""`dataio convert images SRC OUT --kind views` with links planted in OUT where dataio writes."""

from __future__ import annotations

import os

import pytest

from dataio.errors import DataioError
from dataio.formats.images.image_convert import ConvertImagesConfig, convert_images


def _convert(src, out) -> None:
    try:
        convert_images(ConvertImagesConfig(src=src, out=out, kind="views", num_workers=1, progress=False))
    except DataioError:  # refusing the planted link in one line is fine; writing through it is not
        pass


# Class 1 (links planted where dataio writes): OUT/.dataio.lock as a symlink to a file outside OUT. out_lock opens it
# with O_RDWR | O_CREAT (no O_NOFOLLOW) and writes its pid and host into it after ftruncate: the target file, outside
# OUT, now reads "4932 vm". The lock should be opened without following links (or the link refused).
def test_a_lock_link_planted_in_out_leaves_its_target_alone(coloured_folder, tmp_path):
    victim = tmp_path / "precious.txt"
    victim.write_text("precious\n")
    out = tmp_path / "out"
    out.mkdir()
    os.symlink(victim, out / ".dataio.lock")
    _convert(coloured_folder, out)
    assert victim.read_bytes() == b"precious\n"


# Class 1: OUT/.journal as a symlink to a folder outside OUT. The journal's files (000000.json ..., options.json)
# are written through it into that folder, and left there when the conversion ends (rmtree of a symlink fails
# silently: ignore_errors=True).
def test_a_journal_link_planted_in_out_writes_nothing_outside_out(coloured_folder, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    out = tmp_path / "out"
    out.mkdir()
    os.symlink(elsewhere, out / ".journal")
    _convert(coloured_folder, out)
    assert sorted(p.name for p in elsewhere.iterdir()) == []



_KILLED_AFTER_TWO_SHARDS = """
import os, sys
from pathlib import Path
from dataio.formats.dataset import convert_journal
from dataio.formats.images.image_convert import ConvertImagesConfig, convert_images
added = convert_journal.Journal.add
def add(self, index, record):
    added(self, index, record)
    if index == 1:
        os.kill(os.getpid(), 9)  # SIGKILL between two shards: an interrupted conversion, as after a crash
convert_journal.Journal.add = add
convert_images(ConvertImagesConfig(src=Path(sys.argv[1]), out=Path(sys.argv[2]), kind="views", num_workers=1,
                                   progress=False, max_shard_samples=8))
"""


# Class 1 + 7: the converter's temporary files are named .NAME.tmp-HOST-PID (formats/files.py: atomic_writer) and
# opened with open(tmp, "wb"), following links. A fresh OUT refuses anything planted ("not empty"), but the rerun
# that resumes an interrupted conversion (SIGKILL between two shards) keeps such a file (the resume removes only
# the _OUTPUT_PATTERNS), and the manifest's and table's bytes land in the link's target, outside OUT.
@pytest.mark.parametrize("name", ["manifest.json", "samples.arrow"])
def test_a_temp_file_link_planted_before_a_resume_leaves_its_target_alone(coloured_folder, tmp_path, name):
    import subprocess
    import sys

    from dataio.formats import files

    out = tmp_path / "out"
    killed = subprocess.run([sys.executable, "-c", _KILLED_AFTER_TWO_SHARDS, str(coloured_folder), str(out)],
                            capture_output=True, timeout=120)
    assert killed.returncode == -9 and (out / ".journal").is_dir(), killed.stderr[-2000:]
    victim = tmp_path / "precious.txt"
    victim.write_text("precious\n")
    os.symlink(victim, out / f".{name}{files.TEMP_INFIX}{files._HOST}-{os.getpid()}")
    try:
        convert_images(ConvertImagesConfig(src=coloured_folder, out=out, kind="views", num_workers=1, progress=False,
                                           max_shard_samples=8))
    except DataioError:
        pass
    assert victim.read_bytes() == b"precious\n"
