"""Box and mask targets of a COCO folder on S3 (moto on loopback): the batches of a local read (issue 36)."""

from __future__ import annotations

import torch

from dataio import ImageLoader
from dataio.augment import RandAugmentConfig
from dataio.detection.detection_config import DetectionConfig

OPTIONS = dict(batch_size=4, image_size=64, train=True, seed=4, num_workers=2,
               randaugment=RandAugmentConfig(num_ops=2, magnitude=9), targets=DetectionConfig(masks=True))


def test_s3_coco_batches_match_local(s3, coco_shards, tmp_path) -> None:
    url = s3.upload(coco_shards)
    with ImageLoader(coco_shards, **OPTIONS) as local:
        expected = list(local)
    with ImageLoader(url, storage_options=s3.options(), cache_dir=tmp_path / "cache", **OPTIONS) as remote:
        got = list(remote)
        assert remote.files.requests == 12  # one range per sample: the targets come with the table
    assert len(got) == len(expected) == 3
    for a, b in zip(got, expected, strict=True):
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
