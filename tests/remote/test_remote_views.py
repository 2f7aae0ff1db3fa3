"""Multi-crop views of a folder on S3 (moto on loopback): the same views as read locally, by ranges, each image
fetched once for all its views."""

from __future__ import annotations

import torch

from dataio import ViewsConfig, ViewsLoader

OPTIONS = dict(batch_size=8, seed=3, num_workers=2, views=ViewsConfig(global_size=32, local_size=16, local_crops=2))


def test_views_of_an_s3_folder_read_as_local(s3, coloured_shards):
    url = s3.upload(coloured_shards)
    with ViewsLoader(url, storage_options=s3.options(), **OPTIONS) as remote, \
            ViewsLoader(coloured_shards, **OPTIONS) as local:
        for a, b in zip(remote, local, strict=True):
            assert a["sample_ids"].tolist() == b["sample_ids"].tolist()
            assert torch.equal(a["collated_global_crops"], b["collated_global_crops"])
            assert torch.equal(a["collated_local_crops"], b["collated_local_crops"])
        assert remote.files.requests == len(remote.table) and remote.decodes == len(remote.table)  # a range an image
