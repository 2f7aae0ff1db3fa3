"""The driver helpers: a CLI run whole, and a driver killed (its whole process group) once a condition holds."""

from __future__ import annotations

import signal

import pytest

from tests.cluster.drivers import kill_driver_when, parts_with_manifest, run_driver
from tests.cluster.ray_nodes import cluster_env


def test_run_driver_runs_the_cli_with_the_cluster_environment(tmp_path):
    done = run_driver(["--help"], cluster_env(), tmp_path, timeout=120)
    assert done.returncode == 0 and "convert" in done.stdout


def test_a_driver_is_killed_with_its_group_once_the_condition_holds(tmp_path):
    seen = []
    code, _ = kill_driver_when(["--help"], cluster_env(), tmp_path, condition=lambda: seen.append(1) or True)
    assert code == -signal.SIGKILL and seen == [1]


def test_a_driver_that_ends_before_the_condition_is_an_error_not_a_pass(tmp_path):
    with pytest.raises(AssertionError, match="exited"):
        kill_driver_when(["--help"], cluster_env(), tmp_path, condition=lambda: False, timeout=120)


def test_parts_with_manifest_counts_part_folders_that_hold_one(tmp_path):
    for name in ("rank-0", "rank-1", "rank-2"):
        (tmp_path / name).mkdir()
    (tmp_path / "rank-1" / "manifest.json").write_text("{}")
    assert parts_with_manifest(tmp_path) == 1 and parts_with_manifest(tmp_path / "absent") == 0
