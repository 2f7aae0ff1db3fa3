"""The resume harness (``resume_harness``) over every kind of sample: the test-only array kind, classification,
image-text pairs, boxes, multi-crop views and text. Each resumes mid-epoch exactly on the same world and reads every
sample once on another."""

from __future__ import annotations

import pytest

import dataio
from dataio.augment.ibot_masks import IbotMasks
from dataio.loader.sample_loader import SampleLoader
from tests.pipeline.array_source import ArraySource
from tests.pipeline.resume_harness import check_elastic_resume, check_exact_resume


def _ids(batch) -> list[int]:
    """A dict batch's sample ids, padding repeats left out (classification's ``ImageBatch``: its own fields)."""
    if isinstance(batch, dict):
        return batch["sample_ids"][~batch["repeated"]].tolist()
    return batch.samples[~batch.repeated].tolist()


def _kinds(coloured_shards, pair_tars, coco_shards, text_shards) -> dict:
    """``{kind: (make(world_size, rank), samples or None for its table's)}``: a loader of each kind, small."""
    image = dict(num_workers=2, seed=7)
    return {
        "array": (lambda w, r: SampleLoader(ArraySource(30), batch_size=4, seed=5, world_size=w, rank=r), 30),
        "classification": (lambda w, r: dataio.ImageLoader(coloured_shards, batch_size=8, image_size=16, world_size=w,
                                                           rank=r, **image).with_ids(), None),
        "pairs": (lambda w, r: dataio.PairLoader(pair_tars, batch_size=8, image_size=32, world_size=w, rank=r,
                                                 **image), None),
        "detection": (lambda w, r: dataio.DetectionLoader(coco_shards, targets=dataio.DetectionConfig(masks=True),
                                                          batch_size=2, image_size=64, world_size=w, rank=r, **image),
                      None),
        "views": (lambda w, r: dataio.ViewsLoader(coloured_shards, views=dataio.ViewsConfig(
            global_size=24, local_size=16, local_crops=3, masks=IbotMasks(patch_size=4)), batch_size=8, world_size=w,
            rank=r, **image), None),
        "tokens": (lambda w, r: dataio.TextLoader(text_shards, mode="fixed", batch_size=8, seed=2, world_size=w,
                                                  rank=r), None),
    }


KINDS = ["array", "classification", "pairs", "detection", "views", "tokens"]


@pytest.mark.parametrize("kind", KINDS)
def test_a_mid_epoch_resume_reads_exactly_the_uninterrupted_batches(kind, coloured_shards, pair_tars, coco_shards,
                                                                     text_shards):
    make, _ = _kinds(coloured_shards, pair_tars, coco_shards, text_shards)[kind]
    check_exact_resume(make)


@pytest.mark.parametrize("kind", ["array", "classification", "pairs", "detection", "views"])
def test_an_elastic_resume_reads_every_sample_once(kind, coloured_shards, pair_tars, coco_shards, text_shards):
    make, count = _kinds(coloured_shards, pair_tars, coco_shards, text_shards)[kind]
    loader = make(1, 0)
    count = count or len(loader.table)
    loader.close()
    check_elastic_resume(make, _ids, count, before_world=2, after_world=3, before=1)
