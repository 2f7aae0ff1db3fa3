"""Fixtures of the cluster tests: a real two-node Ray cluster, an S3 store both nodes share, in-process Ray.

``ray_cluster`` is one per pytest worker (session scope: starting it costs seconds); its one test kills the second
node last (``restart_second_node`` would bring a fresh one for a test after it).
"""

from __future__ import annotations

import shutil
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

ray = pytest.importorskip("ray", reason="the ray extra (pip install torch-dataio[ray]) is part of the test extra")

from tests.cluster.ray_nodes import AWS_NAMES, LocalRayCluster, cluster_env  # noqa: E402
from tests.remote.conftest import KEY, S3, SECRET  # noqa: E402


def short_temp_dir(prefix: str) -> Path:
    """A fresh folder directly in the system's temp folder: Ray's Unix sockets live under it, and a socket path
    must stay under 107 bytes (pytest's tmp_path is too deep)."""
    return Path(tempfile.mkdtemp(prefix=prefix))


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[LocalRayCluster]:
    """Two nodes of one CPU each (head and second), started as separate ``ray start`` processes."""
    root = short_temp_dir("r44")
    cluster = LocalRayCluster(root)
    try:
        yield cluster
    finally:
        closing = time.monotonic()
        left = cluster.close()
        shutil.rmtree(root, ignore_errors=True)
        print(f"\nray_cluster: started in {cluster.start_seconds:.1f} s, torn down in {time.monotonic() - closing:.1f} s")
        assert left == [], f"Ray processes left after teardown: {left}"


class ClusterS3:
    """The moto server as the store of both nodes: a folder in, a prefix listed or fetched back."""

    def __init__(self, server: S3) -> None:
        self.server = server
        self.endpoint = server.endpoint

    def options(self) -> dict:
        """fsspec options for s3fs in a test or a Ray task (explicit endpoint and moto's dummy credentials)."""
        return self.server.options()

    def cli_options(self) -> list[str]:
        """The same as ``--storage-option`` flags of the CLI."""
        pairs = (f"key={KEY}", f"secret={SECRET}", f"client_kwargs.endpoint_url={self.endpoint}")
        return [part for pair in pairs for part in ("--storage-option", pair)]

    def new_prefix(self, name: str = "data") -> str:
        """``s3://BUCKET/name`` in a new bucket."""
        bucket = f"c44-{uuid.uuid4().hex[:12]}"
        self.server.fs().mkdir(bucket)
        return f"s3://{bucket}/{name}"

    def put_folder(self, folder: Path, name: str = "data") -> str:
        """Every file under ``folder`` (subfolders kept) into a new bucket prefix; returns its s3:// URL."""
        url = self.new_prefix(name)
        fs = self.server.fs()
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                fs.put_file(str(path), f"{url[5:]}/{path.relative_to(folder).as_posix()}")
        return url

    def list(self, url: str) -> list[str]:
        """The keys under ``url``, relative to it, sorted."""
        fs = self.server.fs()
        fs.invalidate_cache()
        base = url[5:].rstrip("/")
        return sorted(key[len(base) + 1:] for key in fs.find(base))

    def download(self, url: str, folder: Path) -> Path:
        """Every key under ``url`` into ``folder`` (subfolders kept); returns ``folder``."""
        fs = self.server.fs()
        for key in self.list(url):
            target = folder / key
            target.parent.mkdir(parents=True, exist_ok=True)
            fs.get_file(f"{url[5:].rstrip('/')}/{key}", str(target))
        return folder

    def parts_with_manifest(self, url: str, name: str = "manifest.json") -> int:
        """How many part folders directly under ``url`` hold a manifest (a driver-kill condition)."""
        return sum(1 for key in self.list(url) if key.count("/") == 1 and key.endswith("/" + name))


@pytest.fixture(scope="session")
def cluster_s3() -> Iterator[ClusterS3]:
    """A moto S3 server on 127.0.0.1 of its own (the remote tests' server class), shared by both nodes."""
    server = S3()
    try:
        yield ClusterS3(server)
    finally:
        server.stop()


@pytest.fixture(scope="module")
def ray_local() -> Iterator[object]:
    """Ray in this process (two CPUs, no dashboard, a temp dir of its own); ``ray.shutdown()`` after."""
    root = short_temp_dir("r44l")
    with pytest.MonkeyPatch.context() as patch:
        for name, value in cluster_env().items():
            patch.setenv(name, value)
        for name in (*AWS_NAMES, "RAY_ADDRESS", "RAY_AUTH_TOKEN"):  # never someone else's cluster or AWS setup
            patch.delenv(name, raising=False)
        # This process's Ray read its auth mode when it was imported (no token then): its children agree with it.
        patch.setenv("RAY_AUTH_MODE", "disabled")
        ray.init(num_cpus=2, include_dashboard=False, _temp_dir=str(root), object_store_memory=80 * 2**20,
                 log_to_driver=False, logging_level="ERROR")
        try:
            yield ray
        finally:
            ray.shutdown()
            shutil.rmtree(root, ignore_errors=True)
