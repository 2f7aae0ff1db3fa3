"""A real S3 endpoint and an HTTP server with range support, both on 127.0.0.1 (no other address is contacted).

moto's standalone server (``ThreadedMotoServer``) speaks the S3 protocol, as
in s3fs's own test suite; the credentials are moto's dummies, passed
explicitly, and the instance metadata service is disabled.
"""

from __future__ import annotations

import http.server
import logging
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("s3fs", reason="the s3 extra (pip install torch-dataio[s3]) is part of the test extra")
from moto.server import ThreadedMotoServer  # noqa: E402

logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request otherwise
KEY, SECRET = "testing-key", "testing-secret"


@pytest.fixture(autouse=True)
def no_ambient_aws(monkeypatch) -> None:
    """Nothing from the machine's AWS setup, and never the metadata service."""
    clear_ambient_aws(monkeypatch)


def clear_ambient_aws(monkeypatch) -> None:
    """Drop the machine's AWS variables and point the credential files and metadata service nowhere."""
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")


class S3:
    """A moto server and the storage_options that reach it."""

    def __init__(self) -> None:
        self.server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        self.server.start()
        host, port = self.server.get_host_and_port()
        self.endpoint = f"http://{host}:{port}"

    def options(self, **overrides) -> dict:
        """Explicit endpoint and dummy credentials; short timeouts so a dead server fails fast."""
        options = {"key": KEY, "secret": SECRET, "client_kwargs": {"endpoint_url": self.endpoint},
                   "config_kwargs": {"connect_timeout": 1, "read_timeout": 2, "retries": {"max_attempts": 1}},
                   "skip_instance_cache": True}
        options.update(overrides)
        return options

    def fs(self):
        import s3fs

        return s3fs.S3FileSystem(**self.options())

    def upload(self, folder: Path, bucket: str | None = None) -> str:
        """Copy ``folder``'s files to a new bucket; returns its s3:// URL."""
        bucket = bucket or f"data-{uuid.uuid4().hex[:12]}"
        fs = self.fs()
        fs.mkdir(bucket)
        for path in sorted(folder.iterdir()):
            if path.is_file():
                fs.put_file(str(path), f"{bucket}/out/{path.name}")
        return f"s3://{bucket}/out"

    def stop(self) -> None:
        self.server.stop()


@pytest.fixture(scope="session")
def s3() -> Iterator[S3]:
    server = S3()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def s3_images(s3, image_shards) -> str:
    """The image_shards fixture on the S3 endpoint."""
    return s3.upload(image_shards)


class RangeHandler(http.server.SimpleHTTPRequestHandler):
    """Static files with single ``Range: bytes=a-b`` requests (what fsspec's HTTP backend sends)."""

    requests_seen: list[str] = []

    def log_message(self, *args) -> None:  # quiet
        pass

    def send_head(self):
        path = Path(self.translate_path(self.path))
        if not path.is_file():
            self.send_error(404)
            return None
        size = path.stat().st_size
        start, end = 0, size - 1
        header = self.headers.get("Range")
        type(self).requests_seen.append(header or "whole")
        if header and header.startswith("bytes="):
            first, _, last = header[6:].partition("-")
            start, end = int(first or 0), min(int(last) if last else size - 1, size - 1)
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
        else:
            self.send_response(200)
        self.send_header("Content-Length", str(end - start + 1))
        self.send_header("Accept-Ranges", "bytes")
        self.end_headers()
        handle = open(path, "rb")
        handle.seek(start)
        self._remaining = end - start + 1
        return handle

    def copyfile(self, source, outputfile) -> None:
        outputfile.write(source.read(self._remaining))


@pytest.fixture(scope="session")
def http_root(image_shards) -> Iterator[str]:
    """image_shards served at http://127.0.0.1:PORT/out with range support."""
    handler = lambda *a, **k: RangeHandler(*a, directory=str(image_shards.parent), **k)  # noqa: E731
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/out"
    server.shutdown()
    server.server_close()
