"""Progressive resizing and dynamic batch size: pure functions of the epoch."""

from __future__ import annotations

import pytest

from dataio.augment import ResolutionSchedule


def schedule(**overrides) -> ResolutionSchedule:
    options = dict(epochs=20, start_size=128, end_size=224, ramp_start=2, ramp_end=14, final_size=256,
                   final_epochs=2, batch_size=256, dynamic_batch=True)
    return ResolutionSchedule(**{**options, **overrides})


def test_ramp_is_monotone_in_multiples_of_32() -> None:
    s = schedule()
    sizes = [s.image_size(e) for e in range(20)]
    assert sizes[:3] == [128, 128, 128] and sizes[14:18] == [224] * 4 and sizes[18:] == [256, 256]
    assert all(size % 32 == 0 for size in sizes)
    assert sizes[:18] == sorted(sizes[:18]) and len(set(sizes[2:15])) >= 3


def test_dynamic_batch_keeps_pixels_under_the_largest_setting() -> None:
    s = schedule()
    budget = s.batch_size * s.largest_size ** 2
    for epoch in range(20):
        size, batch = s.image_size(epoch), s.batch_size_at(epoch)
        assert batch % 8 == 0 and batch * size ** 2 <= budget
        assert batch * size ** 2 > 0.85 * budget  # and not much below it
        assert s.lr_scale(epoch) == batch / 256
    assert s.batch_size_at(0) > s.batch_size_at(19) == 256


def test_every_rank_computes_the_same_plan() -> None:
    plans = [[(schedule().image_size(e), schedule().batch_size_at(e)) for e in range(20)] for _rank in range(8)]
    assert all(plan == plans[0] for plan in plans)


def test_fixed_batch_without_dynamic() -> None:
    s = schedule(dynamic_batch=False)
    assert {s.batch_size_at(e) for e in range(20)} == {256} and s.lr_scale(5) == 1.0


@pytest.mark.parametrize("bad", [{"start_size": 150}, {"final_epochs": 25}, {"ramp_start": 15, "ramp_end": 10},
                                 {"final_size": None}, {"epochs": 0}])
def test_invalid_schedules_are_refused(bad: dict) -> None:
    with pytest.raises(ValueError):
        schedule(**bad)
