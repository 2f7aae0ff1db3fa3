"""The blend (issue 26): within one sample of every source's share at every prefix, for fixed and scheduled
weights, tiny weights included; the C loop and the Python reference give the same sequence."""

from __future__ import annotations

import numpy as np
import pytest

from dataio.mixtures import blend as blend_module
from dataio.mixtures.blend import _blend_python, blend, slack
from dataio.mixtures.weight_schedule import Targets, WeightSchedule


def _owed(schedule: WeightSchedule, stop: int, start: int = 0) -> np.ndarray:
    targets = Targets(schedule)
    return np.array([[targets.owed(i, n) for i in range(len(schedule.names))] for n in range(start + 1, stop + 1)])


def _drift(schedule: WeightSchedule, sources: np.ndarray, start: int = 0, counts=None) -> float:
    """The largest distance of any source's count from its share, over every prefix."""
    k = len(schedule.names)
    got = np.eye(k, dtype=np.int64)[sources].cumsum(0) + (0 if counts is None else np.asarray(counts))
    return float(np.abs(got - _owed(schedule, start + len(sources), start)).max())


def _random_schedule(rng: np.random.Generator, length: int) -> WeightSchedule:
    k = int(rng.integers(2, 9))
    points = []
    for position in sorted({0, *rng.integers(1, length, size=int(rng.integers(0, 4))).tolist()}):
        weights = rng.dirichlet(np.full(k, float(rng.choice([0.2, 1.0, 5.0]))))
        if rng.random() < 0.4:
            weights[rng.integers(k)] = float(rng.choice([1e-4, 1e-3, 0.0]))  # a tiny (or zero) weight
        if weights.sum() == 0:
            weights[0] = 1.0
        points.append((position, tuple(weights)))
    return WeightSchedule(names=tuple(f"s{i}" for i in range(k)), points=tuple(points),
                          interpolation=str(rng.choice(["linear", "constant"])))


@pytest.mark.parametrize("seed", range(40))
def test_every_prefix_is_within_one_sample_of_its_share(seed):
    rng = np.random.default_rng(seed)
    length = int(rng.integers(100, 1500))
    schedule = _random_schedule(rng, length)
    sources, counts = blend(schedule, 0, length)
    assert _drift(schedule, sources) <= 1 - slack(len(schedule.names)) + 1e-9
    assert counts.sum() == length and np.array_equal(counts, np.bincount(sources, minlength=len(schedule.names)))


def test_the_most_behind_rule_drifts_past_one_sample():
    """Why not Megatron's rule (most behind its target): over these blends it drifts past one sample."""
    worst = 0.0
    for seed in range(60):
        rng = np.random.default_rng(seed)
        k = int(rng.integers(3, 8))
        weights = rng.dirichlet(np.full(k, 0.5))
        counts = np.zeros(k)
        for n in range(1, 600):
            counts[np.argmax(weights * n - counts)] += 1
            worst = max(worst, float(np.abs(weights * n - counts).max()))
    assert worst > 1.0


@pytest.mark.parametrize("seed", range(10))
def test_a_stream_continued_from_any_position_is_the_same_stream(seed):
    rng = np.random.default_rng(100 + seed)
    schedule = _random_schedule(rng, 2000)
    whole, _ = blend(schedule, 0, 2000)
    cut = int(rng.integers(1, 2000))
    first, counts = blend(schedule, 0, cut)
    rest, _ = blend(schedule, cut, 2000 - cut, counts)
    assert np.array_equal(np.concatenate([first, rest]), whole)


@pytest.mark.parametrize("seed", range(20))
def test_c_and_python_give_the_same_sequence(seed):
    assert blend_module._blend is not None, "dataio.mixtures._blend was not built (the Makefile's venv builds it)"
    rng = np.random.default_rng(200 + seed)
    schedule = _random_schedule(rng, 3000)
    start = int(rng.integers(0, 500))
    counts = np.round(_owed(schedule, start, start - 1)[-1]).astype(np.int64) if start else np.zeros(
        len(schedule.names), dtype=np.int64)
    c_sources, c_counts = blend(schedule, start, 3000, counts)
    py_sources, py_counts = _blend_python(schedule, start, 3000, counts.copy(), np.empty(3000, dtype=np.int32))
    assert np.array_equal(c_sources, py_sources) and np.array_equal(c_counts, py_counts)


def test_an_anneal_moves_the_shares_within_one_sample():
    """A pretraining blend: 70/20/10 for 9,000 samples, then linearly to 20/30/50 by 10,000."""
    schedule = WeightSchedule.of([(0, {"web": 0.7, "code": 0.2, "books": 0.1}),
                                  (9_000, {"web": 0.7, "code": 0.2, "books": 0.1}),
                                  (10_000, {"web": 0.2, "code": 0.3, "books": 0.5})])
    sources, _ = blend(schedule, 0, 11_000)
    assert _drift(schedule, sources) < 1
    tail = np.bincount(sources[10_000:], minlength=3)
    assert tail.tolist() == [200, 300, 500]
    assert np.bincount(sources[:9_000], minlength=3).tolist() == [6300, 1800, 900]


def test_a_zero_weight_source_is_never_drawn_and_all_zero_is_refused():
    schedule = WeightSchedule.constant({"a": 1.0, "b": 0.0})
    assert not blend(schedule, 0, 500)[0].any()
    with pytest.raises(ValueError, match="not all 0"):
        WeightSchedule.constant({"a": 0.0, "b": 0.0})


@pytest.mark.parametrize("points, match", [
    (((1, (0.5, 0.5)),), "position 0"),
    (((0, (0.5, 0.5)), (0, (0.2, 0.8))), "increasing"),
    (((0, (0.5,)),), "1 weights for 2"),
    (((0, (0.5, float("nan"))),), "finite"),
    (((0, (0.5, -0.1)),), ">= 0"),
])
def test_bad_schedules_name_what_is_wrong(points, match):
    with pytest.raises(ValueError, match=match):
        WeightSchedule(names=("a", "b"), points=points)
