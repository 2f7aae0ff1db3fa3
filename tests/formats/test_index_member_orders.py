"""``dataio index`` on tars written by ``tar`` itself, in the member orders tar tools produce (issue 25 §7),
and labels too large to be class indices (§6)."""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile

import numpy as np
import pytest
from PIL import Image

from dataio.formats.dataset.manifest import read_manifest
from dataio.formats.dataset.sample_table import read_sample_table
from dataio.formats.dataset.verify import verify
from dataio.formats.images.wds_index import IndexConfig, index_shards
from dataio.formats.limits import MAX_CLASSES

NUM = 6


def _write_members(folder, num=NUM):
    """KEY.jpg and KEY.cls files, each image a distinct colour (label = index % 3)."""
    names = []
    for i in range(num):
        Image.new("RGB", (48, 40), (30 * i, 200 - 20 * i, 90)).save(folder / f"k{i}.jpg", quality=95)
        (folder / f"k{i}.cls").write_text(str(i % 3))
        names.append(f"k{i}")
    return names


def _tar(members_dir, tar_path, order):
    """``tar cf`` with the members in ``order`` (as the shell expands ``*.jpg *.cls`` and the like)."""
    subprocess.run(["tar", "cf", str(tar_path), *order], cwd=members_dir, check=True)


ORDERS = {
    "grouped": lambda keys: [f"{k}.{e}" for k in keys for e in ("jpg", "cls")],
    "images_then_labels": lambda keys: [f"{k}.jpg" for k in keys] + [f"{k}.cls" for k in keys],
    "labels_then_images": lambda keys: [f"{k}.cls" for k in keys] + [f"{k}.jpg" for k in keys],
    "interleaved_reversed": lambda keys: [f"{k}.jpg" for k in keys] + [f"{k}.cls" for k in reversed(keys)],
}


@pytest.mark.parametrize("order", sorted(ORDERS))
def test_index_groups_members_by_key_in_any_order(tmp_path, order):
    members = tmp_path / "members"
    members.mkdir()
    keys = _write_members(members)
    tars = tmp_path / "tars"
    tars.mkdir()
    _tar(members, tars / "part-0.tar", ORDERS[order](keys))
    summary = index_shards(IndexConfig(shards=(tars,), progress=False))
    assert (summary.num_samples, summary.num_rejected) == (NUM, 0)
    table = read_sample_table(tars / "samples.arrow")
    by_key = {table.key(i): int(table.label[i]) for i in range(len(table))}
    assert by_key == {k: i % 3 for i, k in enumerate(keys)}
    report = verify(tars, deep=True)
    assert report.ok, report.problems


def test_index_names_duplicate_keys_and_keeps_the_first(tmp_path):
    members = tmp_path / "members"
    (members / "again").mkdir(parents=True)
    keys = _write_members(members)
    Image.new("RGB", (64, 64), (255, 0, 0)).save(members / "again" / "k1.jpg")
    tars = tmp_path / "tars"
    tars.mkdir()
    tar_path = tars / "part-0.tar"
    _tar(members, tar_path, ORDERS["grouped"](keys))
    # append a second k1.jpg under the same member name: tar --append, as a re-run of a packing script does
    subprocess.run(["tar", "rf", str(tar_path), "-C", str(members / "again"), "k1.jpg"], check=True)
    summary = index_shards(IndexConfig(shards=(tars,), progress=False))
    assert summary.num_samples == NUM
    rejected = [json.loads(line) for line in (tars / "rejected.jsonl").read_text().splitlines()]
    assert [r["path"] for r in rejected] == ["part-0.tar/k1.jpg"]
    assert "first one" in rejected[0]["reason"] and "kept" in rejected[0]["reason"]
    table = read_sample_table(tars / "samples.arrow")
    row = [i for i in range(len(table)) if table.key(i) == "k1"][0]
    with tarfile.open(tar_path) as tar:
        first = next(m for m in tar if m.name == "k1.jpg")
    assert int(table.offset[row]) == first.offset_data  # the first member, not the appended one
    assert verify(tars, deep=True).ok


@pytest.mark.parametrize("label", [999_999_999, MAX_CLASSES])
def test_absurd_label_in_a_tar_is_one_rejected_row(tmp_path, label):
    members = tmp_path / "members"
    members.mkdir()
    keys = _write_members(members)
    (members / "k2.cls").write_text(str(label))
    tars = tmp_path / "tars"
    tars.mkdir()
    _tar(members, tars / "part-0.tar", ORDERS["grouped"](keys))
    summary = index_shards(IndexConfig(shards=(tars,), progress=False))
    assert (summary.num_samples, summary.num_rejected) == (NUM - 1, 1)
    _, manifest = read_manifest(tars)
    assert manifest.classes == ("0", "1", "2")
    (rejected,) = [json.loads(line) for line in (tars / "rejected.jsonl").read_text().splitlines()]
    assert rejected["path"] == "part-0.tar/k2" and str(label) in rejected["reason"]
    assert verify(tars, deep=True).ok


def test_absurd_label_cli_is_quick_and_clean(tmp_path):
    """As a user meets it: the CLI, in a subprocess, within memory and time, exit 0 and a summary line."""
    members = tmp_path / "members"
    members.mkdir()
    keys = _write_members(members)
    (members / "k0.cls").write_text("999999999")
    tars = tmp_path / "tars"
    tars.mkdir()
    _tar(members, tars / "part-0.tar", ORDERS["images_then_labels"](keys))
    done = subprocess.run([sys.executable, "-c",
                           "import resource, sys; resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30)); "
                           "from dataio.cli import main; sys.exit(main(['index', sys.argv[1], '--no-progress']))",
                           str(tars)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert f"indexed {NUM - 1} images" in done.stdout and "1 rejected" in done.stdout
