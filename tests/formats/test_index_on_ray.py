"""``dataio index --engine ray``: the tars' groups as Ray items (on the worker's Ray head, ``ray_head``), merged by
the index itself; the result is byte for byte the one-process index of a copy of the same tars."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import webdataset as wds
from PIL import Image

from dataio.cli import main
from dataio.formats.errors import UsageError
from dataio.formats.images.wds_index import JOURNAL_DIR, IndexConfig
from dataio.formats.plan.index_plan import index_item_done, index_record, plan_index, start_index_plan
from dataio.formats.plan.plan_item import run_item
from dataio.formats.plan.plan_kinds import PlanRequest
from dataio.formats.plan.plan_merge import start_plan
from dataio.formats.plan.ray_engine import ItemFailure, item_task
from tests.cluster.ray_head import driver_env

TARS = 5


def _jpeg(label: int, index: int) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (24 + 8 * index, 16 + label), (label * 20 % 256, index * 50 % 256, 90)).save(out, "jpeg")
    return out.getvalue()


def write_class_tars(folder: Path) -> None:
    """``TARS`` tars of different sizes, tar t holding labels 3t and 3t+1 only (no tar alone sees the classes),
    each with a key lacking its label and a key whose JPEG is broken."""
    folder.mkdir(parents=True)
    for t in range(TARS):
        with wds.TarWriter(str(folder / f"train-{t:04d}.tar")) as sink:
            for index in range(2 + t % 3):
                label = 3 * t + index % 2
                sink.write({"__key__": f"t{t}_{index:02d}", "jpg": _jpeg(label, index), "cls": str(label).encode()})
            sink.write({"__key__": f"t{t}_nolabel", "jpg": _jpeg(0, 0)})
            sink.write({"__key__": f"t{t}_broken", "jpg": b"\xff\xd8not a jpeg", "cls": b"1"})


def copy_tars(source: Path, folder: Path) -> Path:
    folder.mkdir(parents=True)
    for tar in sorted(source.glob("*.tar")):
        shutil.copy(tar, folder / tar.name)
    return folder


def dataio(*args: str, ray_tmp: str | None = None) -> subprocess.CompletedProcess:
    """The CLI as a user runs it; Ray's session files under ``ray_tmp`` (a short path: Ray's sockets live there)."""
    env = driver_env()
    if ray_tmp:
        env["RAY_TMPDIR"] = ray_tmp
    return subprocess.run([sys.executable, "-m", "dataio", *args], capture_output=True, text=True, env=env,
                          timeout=600)


def on_ray(head, folder: Path, *flags: str) -> subprocess.CompletedProcess:
    """``dataio index FOLDER --engine ray`` on ``head`` (the ``ray_head`` fixture)."""
    ray_tmp = tempfile.mkdtemp(prefix="dxr")
    try:
        return dataio("index", str(folder), "--engine", "ray", "--ray-address", head.address, *flags, ray_tmp=ray_tmp)
    finally:
        shutil.rmtree(ray_tmp, ignore_errors=True)


def files_of(folder: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(folder.iterdir())}


@pytest.fixture(scope="module")
def class_runs(ray_head, tmp_path_factory) -> dict:
    """One Ray index of classification tars, two of whose items' tars were journaled by a driver that died (item 0
    whole; item 1 but one tar); and the one-process index of a copy."""
    root = tmp_path_factory.mktemp("index_ray")
    write_class_tars(root / "ray")
    one = copy_tars(root / "ray", root / "one")
    assert main(["index", str(one), "--no-progress"]) == 0
    planned = plan_index(IndexConfig(shards=(root / "ray",), progress=False), PlanRequest(out="", items=2))
    start_plan(planned.plan, overwrite=False)
    for item in range(2):
        run_item(planned.plan, planned.shared, planned.pieces[item], item)
    redone = Path(planned.pieces[1][0])
    (root / "ray" / JOURNAL_DIR / f"{redone.name}.json").unlink()
    done = on_ray(ray_head, root / "ray", "--items", "2")
    return {"ray": root / "ray", "one": one, "done": done, "pieces": planned.pieces}


def test_the_index_on_ray_is_the_one_process_index(class_runs):
    done = class_runs["done"]
    assert done.returncode == 0, done.stderr
    assert files_of(class_runs["ray"]) == files_of(class_runs["one"])  # .idx, samples.arrow, rejected.jsonl, manifest
    manifest = json.loads((class_runs["ray"] / "manifest.json").read_text())
    assert manifest["classes"] == [str(label) for label in range(3 * TARS - 1)]  # numbered over all the tars
    assert not (class_runs["ray"] / JOURNAL_DIR).exists()  # the plan's record went with the journal
    assert "from 2 items on Ray (1 already done)" in done.stdout


def test_a_journaled_item_is_skipped_and_each_rejected_key_listed_once(class_runs):
    err = class_runs["done"].stderr
    assert "item 0 already done" in err and "item 1 done" in err
    lines = (class_runs["ray"] / "rejected.jsonl").read_text().splitlines()
    paths = [json.loads(line)["path"] for line in lines]
    assert sorted(paths) == sorted(f"train-{t:04d}.tar/t{t}_{what}" for t in range(TARS)
                                   for what in ("nolabel", "broken"))


def test_an_index_finished_on_ray_refuses_a_rerun_as_one_process_does(ray_head, class_runs):
    again = dataio("index", str(class_runs["ray"]), "--engine", "ray", "--ray-address", ray_head.address)
    alone = dataio("index", str(class_runs["one"]))
    assert again.returncode == alone.returncode == 2
    assert again.stderr.replace(str(class_runs["ray"]), "FOLDER") == alone.stderr.replace(str(class_runs["one"]),
                                                                                        "FOLDER")
    assert len(again.stderr.strip().splitlines()) == 1 and "--overwrite" in again.stderr


def test_pairs_indexed_on_ray_with_a_trained_tokenizer_are_the_one_process_index(ray_head, pair_tars, tmp_path):
    flags = ("--train-tokenizer", "bpe", "--vocab-size", "320", "--no-progress")
    ray, one = copy_tars(pair_tars, tmp_path / "ray"), copy_tars(pair_tars, tmp_path / "one")
    assert main(["index", str(one), *flags]) == 0
    done = on_ray(ray_head, ray, "--items", "3", *flags)
    assert done.returncode == 0, done.stderr
    assert files_of(ray) == files_of(one)
    assert "image-text pairs" in done.stdout and "from 3 items on Ray" in done.stdout


def test_items_are_contiguous_tars_balanced_by_bytes(tmp_path):
    write_class_tars(tmp_path / "tars")
    tars = sorted((tmp_path / "tars").glob("*.tar"))
    planned = plan_index(IndexConfig(shards=(tmp_path / "tars",), progress=False), PlanRequest(out="", items=3))
    assert [Path(tar) for piece in planned.pieces for tar in piece] == [t.resolve() for t in tars]
    assert all(len(piece) >= 1 for piece in planned.pieces) and planned.units == [len(p) for p in planned.pieces]
    assert planned.shared == "classification" and planned.plan.out == str((tmp_path / "tars").resolve())
    many = plan_index(IndexConfig(shards=(tmp_path / "tars",), progress=False), PlanRequest(out="", items=50))
    assert many.plan.items == TARS  # never more items than tars


def test_an_item_is_done_while_its_tars_are_journaled_and_unchanged(tmp_path):
    write_class_tars(tmp_path / "tars")
    planned = plan_index(IndexConfig(shards=(tmp_path / "tars",), progress=False), PlanRequest(out="", items=2))
    config, piece = planned.plan.config, planned.pieces[0]
    assert not index_item_done(config, planned.shared, piece)
    first = run_item(planned.plan, planned.shared, piece, 0)
    assert not first.skipped and index_item_done(config, planned.shared, piece)
    assert run_item(planned.plan, planned.shared, piece, 0).skipped
    os.utime(piece[0], ns=(1, 1))  # the tar changed since: its journal no longer counts
    assert not index_item_done(config, planned.shared, piece)


def test_another_plan_of_the_same_tars_is_refused_unless_overwrite(tmp_path):
    write_class_tars(tmp_path / "tars")
    config = IndexConfig(shards=(tmp_path / "tars",), progress=False)
    two = plan_index(config, PlanRequest(out="", items=2)).plan
    three = plan_index(config, PlanRequest(out="", items=3)).plan
    start_plan(two, overwrite=False)
    start_plan(two, overwrite=False)  # the same plan again: resumed
    with pytest.raises(UsageError, match="another plan"):
        start_index_plan(three, overwrite=False)
    start_plan(three, overwrite=True)
    assert index_record(three).read_bytes() == three.record()


def test_a_damaged_tar_fails_its_item_in_one_line_naming_it(tmp_path):
    write_class_tars(tmp_path / "tars")
    planned = plan_index(IndexConfig(shards=(tmp_path / "tars",), progress=False), PlanRequest(out="", items=2))
    damaged = Path(planned.pieces[1][-1])
    damaged.write_bytes(b"\x00garbage" * 100)
    outcome = item_task(planned.plan, planned.shared, planned.pieces[1], 1)
    assert isinstance(outcome, ItemFailure) and not outcome.usage
    assert damaged.name in outcome.message and "not a readable tar" in outcome.message
    assert "\n" not in outcome.message


def test_engine_flags_without_the_ray_engine_are_refused_in_one_line(tmp_path, capsys):
    write_class_tars(tmp_path / "tars")
    assert main(["index", str(tmp_path / "tars"), "--items", "2", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "--items is for --engine ray" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "tars" / "manifest.json").exists()
