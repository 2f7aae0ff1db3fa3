"""Issue 44 attack: OUT of a planned conversion (plan.json, part folders, a rerun) as a user meets it."""

from __future__ import annotations

import json
import shutil

import pyarrow as pa
import pytest

from tests.attack44.ray_cli import dataio, image_tree, ray_args

pytest.importorskip("ray", reason="the ray extra is part of the test extra")


def checksums(out) -> dict[str, int]:
    table = pa.ipc.open_file(str(out / "samples.arrow")).read_all()
    return dict(zip(table.column("path").to_pylist(), table.column("xxh3").to_pylist(), strict=True))


def test_a_ray_conversion_into_a_finished_one_process_out_is_refused(ray_head, tmp_path):
    """OUT holds a finished one-process conversion (manifest.json, shard-000000.tar). `--engine ray` into it
    without --overwrite. Now: exit 0, the merged manifest replaces the old one and shard-000000.tar/.idx stay
    behind as orphans (one process refuses: `output folder ... is not empty (pass --overwrite ...)`). Should:
    the same refusal, exit 2, the old data set untouched."""
    src = image_tree(tmp_path / "src")
    out = tmp_path / "out"
    first = dataio("convert", "images", str(src), str(out), "--no-progress")
    assert first.returncode == 0, first.stderr
    before = (out / "manifest.json").read_bytes()
    result = dataio("convert", "images", str(src), str(out), *ray_args(ray_head, "--items", "2", "--no-progress"))
    assert result.returncode == 2, f"exit {result.returncode}: {result.stderr[-1500:]}"
    assert "--overwrite" in result.stderr
    assert (out / "manifest.json").read_bytes() == before


def test_a_rerun_over_changed_images_with_the_same_listing_is_not_stale(ray_head, tmp_path):
    """A finished --engine ray conversion; then two images of different classes swap their bytes (every file the
    same size, so names and sizes, the plan's fingerprint, are unchanged); the same command again. Now: exit 0,
    `3 already done`, the merged set keeps the old bytes' checksums: class0/img0.jpg's sample is the old picture.
    Should: refuse a finished OUT as one process does (`manifest.json exists; pass --overwrite`), or notice the
    change; never report success over stale parts."""
    src = image_tree(tmp_path / "src", pad_to=4096)
    out = tmp_path / "out"
    args = ("convert", "images", str(src), str(out), *ray_args(ray_head, "--items", "3", "--no-progress"))
    first = dataio(*args)
    assert first.returncode == 0, first.stderr[-1500:]
    old = checksums(out)
    a, b = src / "class0" / "img0.jpg", src / "class1" / "img0.jpg"
    data_a, data_b = a.read_bytes(), b.read_bytes()
    a.write_bytes(data_b)
    b.write_bytes(data_a)
    again = dataio(*args)
    if again.returncode == 0:
        new = checksums(out)
        key = next(k for k in new if k.endswith("class0/img0.jpg"))
        assert new[key] != old[key], f"stale parts reused after the input changed: {again.stderr[-800:]}"
    else:
        assert again.returncode == 2 and "Traceback" not in again.stderr, again.stderr[-1500:]


def test_control_another_plans_record_and_a_linked_record_are_refused(ray_head, tmp_path):
    """Control (holds): OUT/plan.json of another plan (other --items) with a part folder: one line, exit 2,
    naming plan.json and --overwrite; nothing packed."""
    src = image_tree(tmp_path / "src", per_class=2)
    out = tmp_path / "out"
    out.mkdir()
    (out / "plan.json").write_text(json.dumps({"fingerprint": "0" * 64, "items": 2, "kind": "images"}) + "\n")
    (out / "rank-00000-of-00002").mkdir()
    result = dataio("convert", "images", str(src), str(out), *ray_args(ray_head, "--items", "2", "--no-progress"))
    assert result.returncode == 2 and "plan.json" in result.stderr and "--overwrite" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
    assert not any((out / "rank-00000-of-00002").iterdir())
    shutil.rmtree(out)
