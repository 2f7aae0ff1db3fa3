"""One batch size: a ``ResolutionSchedule`` without its own takes the loader's; two that differ are one error line."""

from __future__ import annotations

import pytest

from dataio import ImageLoader, ImageLoaderConfig
from dataio.augment import ResolutionSchedule
from dataio.formats.errors import ConfigError
from tests.conftest import NUM_COLOURED


def _sizes(loader: ImageLoader) -> list[tuple[int, int]]:
    """(side, rows) of each batch of one epoch."""
    return [(images.shape[-1], len(labels)) for images, labels in loader]


def test_a_schedule_without_a_batch_size_takes_the_loaders(coloured_shards):
    schedule = ResolutionSchedule(epochs=2, start_size=32, end_size=64)
    loader = ImageLoader(coloured_shards, batch_size=16, schedule=schedule, num_workers=1, shuffle=False)
    assert loader.batch_size == 16 and loader.config.schedule.batch_size == 16
    first = _sizes(loader)
    assert first == [(32, 16), (32, 16), (32, NUM_COLOURED - 32)]  # not one batch of the schedule's old 256
    assert _sizes(loader)[0] == (64, 16)


def test_a_dynamic_batch_scales_the_loaders_batch_size(coloured_shards):
    schedule = ResolutionSchedule(epochs=2, start_size=32, end_size=64, ramp_end=1, dynamic_batch=True)
    loader = ImageLoader(coloured_shards, batch_size=8, schedule=schedule, num_workers=1)
    assert [loader.config.batch_size_at(e) for e in (0, 1)] == [32, 8]  # 8 at 64 px: 4x the rows at 32 px
    assert schedule.batch_size is None and loader.config.schedule.lr_scale(0) == 4.0


def test_a_schedules_own_batch_size_is_the_loaders_when_the_loader_has_none(coloured_shards):
    loader = ImageLoader(coloured_shards, schedule=ResolutionSchedule(epochs=2, start_size=32, end_size=64,
                                                                      batch_size=8), num_workers=1)
    assert loader.config.batch_size == 8 and loader.batch_size == 8
    assert max(rows for _, rows in _sizes(loader)) == 8


def test_two_batch_sizes_that_differ_are_one_line(coloured_shards):
    schedule = ResolutionSchedule(epochs=2, start_size=32, end_size=64, batch_size=256)
    with pytest.raises(ConfigError) as raised:
        ImageLoader(coloured_shards, batch_size=16, schedule=schedule)
    message = str(raised.value)
    assert "\n" not in message and message.startswith("schedule.batch_size is 256 and the loader's batch_size 16")
    with pytest.raises(ConfigError, match="^batch_size 4 does not fit the schedule: batch_size must be >= 8"):
        ImageLoaderConfig(batch_size=4, schedule=ResolutionSchedule(epochs=2, dynamic_batch=True))


def test_a_batch_size_over_a_config_carries_its_schedule(coloured_shards):
    config = ImageLoaderConfig(batch_size=16, schedule=ResolutionSchedule(epochs=2, start_size=32, end_size=64))
    loader = ImageLoader(coloured_shards, config=config, batch_size=8, num_workers=1)
    assert loader.batch_size == 8 and loader.config.schedule.batch_size == 8


def test_a_schedule_alone_needs_its_batch_size():
    schedule = ResolutionSchedule(epochs=2, start_size=32, end_size=64, dynamic_batch=True)
    assert schedule.image_size(0) == 32
    with pytest.raises(ValueError, match="takes its batch_size from the loader"):
        schedule.batch_size_at(0)
