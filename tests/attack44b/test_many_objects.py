"""Issue 44 attack, many tiny objects under one s3:// prefix: what the driver's listing costs. Measured by hand
(20,000 objects in moto, under `prlimit --as`): one listing took 9 s and ~8 KB of driver memory per object (s3fs
keeps every object's info dict, in its result and its listings cache), and a plan of `convert images` lists the
prefix three times (Parquet check, walk, sizes): 25 s. Here, with a few objects, the number of listings."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from dataio.formats.images.image_convert import ConvertImagesConfig
from dataio.formats.images.image_inputs import image_listing
from dataio.formats.remote.source_files import RemoteRoot

from tests.attack44b.conftest import jpeg

pytest.importorskip("s3fs", reason="the s3 extra is part of the test extra")


@pytest.mark.xfail(strict=True, reason="image_listing lists a URL source three times (remote_parquet_files, "
                   "walk_remote_tree, remote_sizes): one LIST pass per 1,000 objects each; a plan of 1M objects "
                   "pays it thrice (~25 s for 20,000 objects in moto)")
def test_a_plan_lists_an_s3_source_once(s3, no_ambient_aws, monkeypatch, tmp_path):
    bucket = f"many-{uuid.uuid4().hex[:10]}"
    fs = s3.fs()
    fs.mkdir(bucket)
    for i in range(6):
        fs.pipe_file(f"{bucket}/src/c{i % 2}/img{i}.jpg", jpeg((i * 30, 60, 90)))
    calls: list[str] = []
    real = RemoteRoot.listing

    def counted(self):
        calls.append(self.url)
        return real(self)

    monkeypatch.setattr(RemoteRoot, "listing", counted)
    config = ConvertImagesConfig(src=f"s3://{bucket}/src", out=Path(tmp_path / "out"),
                                 storage_options=s3.options(), progress=False)
    inputs, sizes = image_listing(config)
    assert len(inputs.files) == 6 and int(sizes.min()) > 0
    assert len(calls) == 1, calls
