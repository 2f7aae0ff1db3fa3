"""Issue 44 attack: two drivers of plans of one OUT at once (a user who starts the same job twice, or a second one
with other --items), a local OUT and an s3:// one. One must be refused in one line, or both end with one correct
data set (every sample once, every shard as its manifest says); never a mix of two plans."""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyarrow as pa
import pytest

from dataio.cli import main

from tests.attack44.ray_cli import dataio, ray_args
from tests.attack44b.conftest import image_tree, s3_flags

pytest.importorskip("ray", reason="the ray extra is part of the test extra")
SAFE_ENV = {"AWS_EC2_METADATA_DISABLED": "true", "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent",
            "AWS_CONFIG_FILE": "/nonexistent", "AWS_DEFAULT_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "",
            "AWS_SECRET_ACCESS_KEY": ""}


def both(*commands: tuple[str, ...]) -> list:
    with ThreadPoolExecutor(len(commands)) as pool:
        return list(pool.map(lambda args: dataio(*args, env=SAFE_ENV), commands))


def refused_or_done(result) -> bool:
    """Exit 0, or a refusal of one line (exit 1 or 2) without a traceback."""
    lines = result.stderr.strip().splitlines()
    if result.returncode == 0:
        return "Traceback" not in result.stderr
    return result.returncode in (1, 2) and len(lines) == 1 and "Traceback" not in result.stderr


def expected_paths(src: Path) -> list[str]:
    return sorted(str(p.relative_to(src)) for p in src.rglob("*.jpg"))


def test_the_same_local_plan_run_twice_at_once_ends_with_one_data_set(ray_head, tmp_path):
    """`convert images SRC OUT --engine ray --items 4` started twice at once on one local OUT."""
    src = image_tree(tmp_path / "src", classes=2, per_class=4)
    out = tmp_path / "out"
    command = ("convert", "images", str(src), str(out), *ray_args(ray_head, "--items", "4", "--no-progress"))
    results = both(command, command)
    assert all(map(refused_or_done, results)), [r.stderr[-1500:] for r in results]
    assert any(r.returncode == 0 for r in results), [r.stderr[-1500:] for r in results]
    assert main(["verify", str(out)]) == 0
    table = pa.ipc.open_file(str(out / "samples.arrow")).read_all()
    assert sorted(table.column("path").to_pylist()) == expected_paths(src)


def test_two_plans_of_one_local_out_at_once_never_mix(ray_head, tmp_path):
    """The same OUT with --items 2 and --items 3 at once: at most one succeeds, and OUT holds its plan only."""
    src = image_tree(tmp_path / "src", classes=2, per_class=4)
    out = tmp_path / "out"
    two, three = (("convert", "images", str(src), str(out), *ray_args(ray_head, "--items", n, "--no-progress"))
                  for n in ("2", "3"))
    results = both(two, three)
    assert all(map(refused_or_done, results)), [r.stderr[-1500:] for r in results]
    assert sum(r.returncode == 0 for r in results) <= 1, [r.stdout for r in results]
    if (out / "manifest.json").exists():
        assert main(["verify", str(out)]) == 0
        table = pa.ipc.open_file(str(out / "samples.arrow")).read_all()
        assert sorted(table.column("path").to_pylist()) == expected_paths(src)


def test_the_same_s3_plan_run_twice_at_once_ends_with_one_data_set(ray_head, s3, no_ambient_aws, tmp_path):
    """The same job to one s3:// OUT twice at once, each with its own --staging (two login nodes)."""
    src = image_tree(tmp_path / "src", classes=2, per_class=4)
    bucket = f"b-{uuid.uuid4().hex[:10]}"
    s3.fs().mkdir(bucket)
    url = f"s3://{bucket}/out"
    commands = [("convert", "images", str(src), url, *ray_args(ray_head, "--items", "4", "--no-progress"),
                 "--staging", str(tmp_path / f"staging{k}"), *s3_flags(s3)) for k in range(2)]
    results = both(*commands)
    assert all(map(refused_or_done, results)), [r.stderr[-1500:] for r in results]
    assert any(r.returncode == 0 for r in results), [r.stderr[-1500:] for r in results]
    assert main(["verify", url, *s3_flags(s3)]) == 0
    fs = s3.fs()
    local = tmp_path / "samples.arrow"
    fs.get_file(f"{bucket}/out/samples.arrow", str(local))
    table = pa.ipc.open_file(str(local)).read_all()
    assert sorted(table.column("path").to_pylist()) == expected_paths(src)
