"""dataio train's mixture schedule: breakpoints in fractions of training or steps, placed in the loader's units."""

from __future__ import annotations

import pytest

from dataio.mixtures.weight_schedule import WeightSchedule
from dataio.train.checkpoint import mixture_mismatch
from dataio.train.config import TrainConfig
from dataio.train.mixture_schedule import At, RunSchedule, RunUnits

NAMES = ("web", "code", "books")
START = {"web": 0.5, "code": 0.3, "books": 0.2}
END = {"web": 0.2, "code": 0.3, "books": 0.5}


def test_breakpoints_parse_as_fractions_or_steps():
    assert At.parse("90%") == At(fraction=0.9) and At.parse(" 12.5 % ") == At(fraction=0.125)
    assert At.parse(0.9) == At(fraction=0.9) and At.parse(1.0) == At(fraction=1.0)
    assert At.parse(4500) == At(step=4500) and At.parse(0) == At(step=0)
    for bad, words in (("ninety", "'N%'"), (True, "'N%'"), (1.5, "a step is an integer"), (-3, ">= 0"),
                       ("150%", "[0, 1]"), (float("nan"), "[0, 1]")):
        with pytest.raises(ValueError, match=words.replace("[", r"\[").replace("(", r"\(")):
            At.parse(bad)


def test_fractions_fall_at_their_share_of_the_planned_units():
    # budget mode: 3 epochs of 1,000 batches, 2 ranks: a step takes 2 batches
    run = RunUnits(epochs=3, epoch_units=1000, per_step=2, unit="batches")
    schedule = RunSchedule.of([("90%", START), ("100%", END)], NAMES).resolve(run)
    assert isinstance(schedule, WeightSchedule)
    assert [p for p, _ in schedule.points] == [0, 2700, 3000]  # the first blend held from 0 to 90%
    assert schedule.points[0][1] == schedule.points[1][1] == (0.5, 0.3, 0.2)
    assert schedule.points[2][1] == (0.2, 0.3, 0.5)
    assert RunSchedule.of([(0.0, START), (0.25, END)], NAMES).resolve(run).points[1][0] == 750


def test_steps_walk_the_epochs_each_ending_with_a_shorter_step():
    # fixed mode: epochs of 1,000 samples, 3 ranks x 64 rows = 192 samples a step: 6 steps an epoch, the last 40
    run = RunUnits(epochs=4, epoch_units=1000, per_step=192)
    assert run.steps_per_epoch == 6
    assert run.position(At(step=5)) == 960
    assert run.position(At(step=6)) == 1000  # the second epoch's first sample, not 1,152
    assert run.position(At(step=8)) == 1000 + 384
    # epochs that end with a source's pass: no fractions, steps at step x units
    open_ended = RunUnits(epochs=2, epoch_units=None, per_step=192)
    assert open_ended.position(At(step=8)) == 8 * 192
    with pytest.raises(ValueError, match="epoch_until"):
        open_ended.position(At(fraction=0.5))


def test_packed_steps_are_placed_by_the_mean_document_length():
    # 2 ranks x 8 rows of 1,024 tokens, documents of 256 tokens on average: 64 documents a step
    run = RunUnits(epochs=1, epoch_units=6400, per_step=2 * 8 * 1024 / 256, unit="documents")
    schedule = RunSchedule.of([(0, START), (50, START), (100, END)], NAMES).resolve(run)
    assert [p for p, _ in schedule.points] == [0, 3200, 6400]


def test_breakpoints_that_meet_after_placing_are_refused():
    run = RunUnits(epochs=1, epoch_units=100, per_step=10)
    with pytest.raises(ValueError, match="90% and step 9 fall at units 90 and 90"):
        RunSchedule.of([(0, START), ("90%", START), (9, END)], NAMES).resolve(run)


def test_a_bad_schedule_names_what_is_wrong():
    cases = [
        ({"web": 0.5, "boks": 0.5}, "'boks' is not a source"),
        ({"web": -0.5, "code": 1.0}, "web=-0.5"),
        ({"web": 0.0, "code": 0.0}, "every weight is 0"),
        ({"web": "a lot"}, "must be a number"),
        ([("90%", START), ("50%", END)], "fractions must increase"),
        ([(100, START), (10, END)], "steps must increase"),
        ([("90%",)], "a breakpoint is \\(at, "),
        ({"web": 1.0, "code": 1.0}, "books weigh 0 at every breakpoint"),
        ("web", "must be"),
    ]
    for weights, words in cases:
        with pytest.raises(ValueError, match=words):
            RunSchedule.of(weights, NAMES)


def test_train_config_holds_a_mixture_and_refuses_half_of_one(tmp_path):
    config = TrainConfig(train={"web": tmp_path, "code": "s3://bucket/code"}, weights={"web": 3, "code": 1},
                         epoch_until="code")
    assert config.mixture and config.train == {"web": tmp_path, "code": "s3://bucket/code"}
    assert config.weights.constant and config.weights.first_blend() == {"web": 3.0, "code": 1.0}
    assert not TrainConfig(train=tmp_path).mixture
    for fields, words in (
            (dict(train=tmp_path, weights={"a": 1}), "weights applies to a mixture"),
            (dict(train=tmp_path, epoch_length=10), "epoch_length applies to a mixture"),
            (dict(train={"web": tmp_path}), "needs weights"),
            (dict(train={}, weights={}), "at least one source"),
            (dict(train={"we b": tmp_path}, weights={"we b": 1}), "source name 'we b'"),
            (dict(train={"web": tmp_path}, weights={"web": 1}, epoch_until="code"), "'code' is not a source"),
            (dict(train={"web": tmp_path}, weights={"web": 1}, epoch_length=0), "epoch_length must be >= 1"),
            (dict(train={"web": tmp_path}, weights={"web": 1}, epoch_length=5, epoch_until="all"), "one of"),
            (dict(train={"web": tmp_path, "code": tmp_path}, weights=[("90%", {"web": 1}), ("100%", {"code": 1})],
                  epoch_until="all"), "fractions of training need epochs of a known length")):
        with pytest.raises(ValueError, match=words):
            TrainConfig(**fields)


def test_a_changed_mixture_is_described():
    record = {"sources": ["web", "code"], "points": [[0, [0.9, 0.1]], [200, [0.9, 0.1]], [400, [0.1, 0.9]]],
              "interpolation": "linear", "unit": "documents", "epoch_length": 200, "epoch_until": None}
    assert mixture_mismatch(record, dict(record)) is None and mixture_mismatch(None, None) is None
    longer = {**record, "points": [[0, [0.9, 0.1]], [300, [0.9, 0.1]], [600, [0.1, 0.9]]]}
    assert "breakpoints at documents [0, 200, 400] then, [0, 300, 600] now (fractions of training move" in \
        mixture_mismatch(record, longer)
    assert "the sources (web, code then, web, books now)" in mixture_mismatch(record, {**record, "sources": ["web",
                                                                                                      "books"]})
    assert "the epoch rule" in mixture_mismatch(record, {**record, "epoch_length": None, "epoch_until": "all"})
    assert "written by a run on one folder" in mixture_mismatch(None, record)
    reweighted = {**record, "points": [[0, [0.9, 0.1]], [200, [0.9, 0.1]], [400, [0.2, 0.8]]]}
    assert ("the weights (at 0: web=0.9 code=0.1, at 200: web=0.9 code=0.1, at 400: web=0.1 code=0.9 linear then; "
            "at 0: web=0.9 code=0.1, at 200: web=0.9 code=0.1, at 400: web=0.2 code=0.8 linear now)") in \
        mixture_mismatch(record, reweighted)
    constant = {**record, "points": [[0, [0.5, 0.5]]], "interpolation": "constant"}
    assert "the weights (web=0.5 code=0.5 then; web=0.7 code=0.3 now)" in \
        mixture_mismatch(constant, {**constant, "points": [[0, [0.7, 0.3]]]})
