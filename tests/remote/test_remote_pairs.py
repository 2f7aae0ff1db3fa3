"""Image-text pair folders on S3 (moto on loopback) and HTTP: the same dict batches as local, by ranges."""

from __future__ import annotations

import http.server
import threading

import torch

from dataio import ImageLoader
from dataio.pairs.caption_config import CaptionConfig
from tests.remote.conftest import RangeHandler

OPTIONS = dict(batch_size=8, image_size=32, seed=3, num_workers=2,
               captions=CaptionConfig(text=True, keys=True, json_fields=("url",)))


def _same(remote: ImageLoader, local: ImageLoader) -> None:
    for a, b in zip(remote, local, strict=True):
        assert a["sample_ids"].tolist() == b["sample_ids"].tolist() and torch.equal(a["image"], b["image"])
        assert torch.equal(a["input_ids"], b["input_ids"]) and a["caption"] == b["caption"] and a["json"] == b["json"]


def test_pairs_on_s3_and_https_read_as_local(s3, pair_tars):
    url = s3.upload(pair_tars)
    with ImageLoader(url, storage_options=s3.options(), **OPTIONS) as remote, ImageLoader(pair_tars, **OPTIONS) as local:
        _same(remote, local)
        assert remote.files.requests >= 40  # a range per image, and one per .json asked for
    handler = lambda *a, **k: RangeHandler(*a, directory=str(pair_tars.parent), **k)  # noqa: E731
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        http_url = f"http://127.0.0.1:{server.server_address[1]}/{pair_tars.name}"
        with ImageLoader(http_url, **OPTIONS) as remote, ImageLoader(pair_tars, **OPTIONS) as local:
            _same(remote, local)
    finally:
        server.shutdown()
        server.server_close()
