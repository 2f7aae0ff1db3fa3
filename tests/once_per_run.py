"""A session fixture's result built once per ``pytest -n 2`` run, not once per worker: the first worker to ask
builds it under a file lock into the run's shared temporary folder, the other reads it back (pytest-xdist's own
recipe; ``--dist loadgroup`` would keep a group on one worker, but pytest 9.2's structured node ids drop its group
suffix, pytest-xdist issue 1386). For results that cost a subprocess launch of a framework (~10 s of imports each).
Not a test module."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from filelock import FileLock


def once_per_run(tmp_path_factory: pytest.TempPathFactory, worker_id: str, name: str,
                 build: Callable[[Path], dict]) -> dict:
    """``build(folder)``'s JSON result, built once for the whole run in ``folder`` (the same for every worker)."""
    if worker_id == "master":  # no xdist: the session's own folder
        return build(tmp_path_factory.mktemp(name))
    shared = tmp_path_factory.getbasetemp().parent  # the run's folder, parent of each worker's
    result = shared / f"{name}.json"
    with FileLock(str(shared / f"{name}.lock")):
        if not result.is_file():
            folder = shared / name
            folder.mkdir(exist_ok=True)
            result.write_text(json.dumps(build(folder)))
        return json.loads(result.read_text())
