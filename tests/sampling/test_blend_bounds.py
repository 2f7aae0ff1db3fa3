"""The blend with extreme but valid weights (issue 33): a weight of 1e-30 hung the C loop at 100% CPU (an int64
overflow in the galloping search) and was an OverflowError in Python; weights near the float maximum summed to
inf (a numpy warning, then "every source has weight 0"); a breakpoint past the int64 range was a traceback."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from dataio.mixtures import blend as blend_module
from dataio.mixtures.blend import _blend_python, blend
from dataio.mixtures.weight_schedule import MAX_POSITION, NEVER, Targets, WeightSchedule

ROOT = Path(__file__).resolve().parents[2]
COUNT = 20_000

# (points, interpolation) of schedules with weights far apart; each reads as the blend its ratio says
EXTREME = {
    "1e-30": (((0, (1.0, 1e-30)),), "constant"),
    "smallest subnormal": (((0, (1.0, 5e-324)),), "constant"),
    "three, two tiny": (((0, (1.0, 1e-15, 1e-300)),), "constant"),
    "near the float maximum": (((0, (1.7e308, 1.7e308, 1e308)),), "constant"),
    "one huge, one small": (((0, (1e308, 1.0)),), "constant"),
    "annealed to 1e-30": (((0, (1.0, 1.0)), (500, (1.0, 1e-30))), "linear"),
}


def schedule_of(name: str) -> WeightSchedule:
    points, interpolation = EXTREME[name]
    return WeightSchedule(names=tuple("abc"[:len(points[0][1])]), points=points, interpolation=interpolation)


def python_blend(schedule: WeightSchedule, start: int, count: int) -> tuple[np.ndarray, np.ndarray]:
    out = np.empty(count, dtype=np.int32)
    return _blend_python(schedule, start, count, np.zeros(len(schedule.names), dtype=np.int64), out)


@pytest.mark.parametrize("name", list(EXTREME))
def test_the_python_blend_of_extreme_weights_is_their_ratio(name):
    schedule = schedule_of(name)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no numpy overflow warning either
        sources, counts = python_blend(schedule, 0, COUNT)
    if schedule.interpolation == "constant":  # each source within one sample of its share
        weights = np.array(schedule.points[0][1]) / max(schedule.points[0][1])
        assert np.abs(counts - COUNT * weights / weights.sum()).max() < 1, counts
    else:  # the anneal: b is drawn while its weight is large, then no more
        assert 0 < counts[1] < 500 and counts.sum() == COUNT
        assert not sources[1000:].any()


def test_the_c_blend_of_extreme_weights_ends_and_matches_python(tmp_path):
    """In a subprocess with a timeout: the old C loop never returned (and held the GIL-free thread for ever)."""
    if blend_module._blend is None:
        pytest.skip("dataio.mixtures._blend is not built: the Python case above covers the fallback")
    script = ("import json, sys, numpy as np\n"
              "from tests.sampling.test_blend_bounds import EXTREME, schedule_of\n"
              "from dataio.mixtures.blend import blend\n"
              "out = {}\n"
              "for name in EXTREME:\n"
              "    sources, counts = blend(schedule_of(name), 0, %d)\n"
              "    later, _ = blend(schedule_of(name), 5_000, 1_000, np.bincount(sources[:5_000], minlength=len(counts)))\n"
              "    out[name] = [sources.tolist(), later.tolist()]\n"
              "print(json.dumps(out))\n" % COUNT)
    done = subprocess.run(["timeout", "-s", "KILL", "60", sys.executable, "-W", "error", "-c", script],
                          capture_output=True, text=True, timeout=90, cwd=ROOT)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    for name, (sources, later) in json.loads(done.stdout).items():
        expected, _ = python_blend(schedule_of(name), 0, COUNT)
        assert sources == expected.tolist(), name
        assert later == expected[5_000:6_000].tolist(), name  # a stream continued mid-way is the same stream


def test_the_search_stops_at_never_without_overflowing():
    targets = Targets(schedule_of("1e-30"))
    assert targets.first_reaching(1, 0.5, 1) == NEVER  # owed 0.5 only after 5e29 positions: never
    assert targets.first_reaching(0, 0.5, 1) == 1
    late = Targets(WeightSchedule(names=("a", "b"), points=((0, (1.0, 1e-9)),)))
    assert late.first_reaching(1, 0.5, MAX_POSITION - 10) == MAX_POSITION - 10  # owed 4.6e9 by then


def test_weights_near_the_float_maximum_blend_as_their_ratio():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        huge = WeightSchedule.constant({"a": 1e308, "b": 1e308, "c": 1e308})
        sources, counts = blend(huge, 0, 3_000)
    plain, _ = blend(WeightSchedule.constant({"a": 1.0, "b": 1.0, "c": 1.0}), 0, 3_000)
    assert counts.tolist() == [1000, 1000, 1000] and sources.tolist() == plain.tolist()
    assert WeightSchedule.constant({"a": 0.7, "b": 0.3}).points == ((0, (0.7, 0.3)),)  # normal weights: as given


@pytest.mark.parametrize("position", [9 * 10**18, 9e18, 2 * 10**19, float("inf"), float("nan"), "far", None])
def test_a_breakpoint_past_the_int64_range_is_refused_naming_it(position):
    with pytest.raises(ValueError, match=r"a breakpoint's position must be an integer in 0\.\.4,611,686,018,427,387,903"):
        WeightSchedule(names=("a", "b"), points=((0, (1.0, 1.0)), (position, (1.0, 0.0))))
    last = WeightSchedule(names=("a", "b"), points=((0, (1.0, 1.0)), (MAX_POSITION, (1.0, 0.0))))
    assert last.points[-1][0] == MAX_POSITION
    with pytest.raises(ValueError, match="not within"):
        blend(last, MAX_POSITION, 2)
