"""ViewsLoader over S3 (moto on 127.0.0.1, as tests/remote) when the store goes away."""

from __future__ import annotations

import pytest

import dataio
from dataio.errors import DataioError

pytest.importorskip("s3fs", reason="the s3 extra is part of the test extra")
from tests.remote.conftest import S3  # noqa: E402

SECRET = "attack-secret-value"


# Class 4/5: under on_error="skip" a store that stops answering after the loader opened the folder makes every read
# a "bad sample": the epoch yields 0 batches, raises nothing and logs nothing (samples_ok 0), as if the data set were
# empty. A storage outage is not 45 damaged images; the pass should end with one line naming the URL (no secret).
def test_a_store_gone_under_skip_is_an_error_not_an_empty_epoch(views_shards):
    server = S3()
    try:
        url = server.upload(views_shards)
        loader = dataio.ViewsLoader(url, storage_options=server.options(secret=SECRET), on_error="skip", retries=0,
                                    batch_size=8, num_workers=1,
                                    views=dataio.ViewsConfig(global_size=32, local_size=16, local_crops=1))
    finally:
        server.stop()
    with loader:
        try:
            batches = list(loader)
        except DataioError as e:
            assert url.split("//")[1].split("/")[0] in str(e) and SECRET not in str(e)
            return
    pytest.fail(f"store unreachable under skip: {len(batches)} batches, samples_ok {loader.stats.samples_ok}, "
                "no error")
