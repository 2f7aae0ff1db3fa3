"""Mixture epochs (issue 26): passes without repeats, epoch rules, shares across epochs, elastic resume."""

from __future__ import annotations

import numpy as np
import pytest

from dataio.sampling import partition
from dataio.mixtures.blend import blend
from dataio.mixtures.mixture_plan import EpochRule, MixturePlan
from dataio.mixtures.weight_schedule import Targets, WeightSchedule

SIZES = {"web": 600, "code": 150, "tiny": 7}


def _plan(rule=EpochRule(samples=500), weights=None, seed=0, sizes=SIZES, schedule=None):
    schedule = schedule or WeightSchedule.constant(weights or {"web": 0.6, "code": 0.3, "tiny": 0.1})
    return MixturePlan({n: s for n, s in sizes.items()}, schedule, seed=seed, rule=rule)


def _by_source(plan: MixturePlan, ids: np.ndarray) -> list[np.ndarray]:
    source = np.searchsorted(plan.offsets, ids, side="right") - 1
    return [ids[source == i] - plan.offsets[i] for i in range(len(plan.names))]


def test_each_source_reads_whole_passes_without_repeats():
    plan = _plan()
    stream = np.concatenate([plan.order(e) for e in range(6)])  # 3000 draws: web 1800 = 3 passes, tiny ~300
    for i, items in enumerate(_by_source(plan, stream)):
        size = int(plan.sizes[i])
        passes = len(items) // size
        assert passes >= 2
        for p in range(passes):  # every full pass is a permutation of the source
            assert np.array_equal(np.sort(items[p * size:(p + 1) * size]), np.arange(size))
        rest = items[passes * size:]
        assert len(set(rest.tolist())) == len(rest)  # the pass in progress repeats nothing either
    web, _, tiny = _by_source(plan, stream)
    assert not np.array_equal(web[:600], web[600:1200])  # a new pass, a new order
    assert not np.array_equal(tiny[:7], tiny[7:14])


def test_orders_are_pure_functions_of_seed_and_epoch():
    a, b = _plan(seed=3), _plan(seed=3)
    assert np.array_equal(a.order(4), b.order(4))  # b blends epochs 0..3 on its own to find epoch 4
    assert not np.array_equal(a.order(4), _plan(seed=4).order(4))


def test_a_new_source_leaves_the_others_pass_orders_alone():
    two = _plan(weights={"web": 0.5, "code": 0.5}, sizes={"web": 600, "code": 150})
    three = _plan(weights={"web": 0.5, "code": 0.3, "tiny": 0.2})
    assert np.array_equal(two.pass_order(0, 2), three.pass_order(0, 2))


@pytest.mark.parametrize("rule, check", [
    (EpochRule(samples=333), lambda plan, e, draws: len(draws[0]) == 333),
    (EpochRule(until="code"), lambda plan, e, draws: int(np.sum(draws[0] == 1)) + plan.span(e).counts_before[1]
     == 150 * (e + 1) and draws[0][-1] == 1),
    (EpochRule(until="all"), lambda plan, e, draws: all(
        np.sum(draws[0] == i) + plan.span(e).counts_before[i] >= plan.sizes[i] * (e + 1) for i in range(3))),
])
def test_epoch_rules(rule, check):
    plan = _plan(rule)
    for epoch in range(4):
        assert check(plan, epoch, plan.draws(epoch))
        assert plan.span(epoch + 1).start == plan.span(epoch).stop


def test_until_all_ends_with_the_last_source_finishing_its_pass():
    plan = _plan(EpochRule(until="all"))
    sources, _ = plan.draws(0)
    counts = np.bincount(sources, minlength=3)
    assert (counts >= plan.sizes).all()
    last = sources[-1]
    assert counts[last] == plan.sizes[last]  # the epoch ends on the draw that completes the last pass


def test_until_a_source_that_weighs_nothing_is_refused_in_one_line():
    plan = _plan(EpochRule(until="tiny"), weights={"web": 0.5, "code": 0.5, "tiny": 0.0})
    with pytest.raises(ValueError, match="'tiny' weighs"):
        plan.span(0)
    with pytest.raises(ValueError, match="not a source"):
        _plan(EpochRule(until="books"))


def test_shares_stay_within_one_sample_across_epochs_and_a_schedule_change():
    schedule = WeightSchedule.of([(0, {"web": 0.8, "code": 0.15, "tiny": 0.05}), (700, {"web": 0.8, "code": 0.15,
                                  "tiny": 0.05}), (1100, {"web": 0.2, "code": 0.3, "tiny": 0.5})])
    plan = _plan(EpochRule(samples=400), schedule=schedule)
    sources = np.concatenate([plan.draws(e)[0] for e in range(4)])
    got = np.eye(3, dtype=np.int64)[sources].cumsum(0)
    targets = Targets(schedule)
    owed = np.array([[targets.owed(i, n) for i in range(3)] for n in range(1, len(sources) + 1)])
    assert np.abs(got - owed).max() < 1


@pytest.mark.parametrize("old_world, new_world", [(1, 3), (4, 2), (3, 5), (2, 2)])
def test_resume_on_another_world_size_reads_each_remaining_draw_once(old_world, new_world):
    """The mixture's order goes through the same dealing as one source: the consumed set is a prefix."""
    plan = _plan()
    order = plan.order(2)
    per_rank = 37
    consumed = partition.consumed_after(len(order), world_size=old_world, consumed=0, per_rank_done=per_rank)
    rest = []
    for rank in range(new_world):
        positions, repeated = partition.rank_share(len(order), world_size=new_world, rank=rank, consumed=consumed,
                                                   drop_last=False)
        rest += order[positions[~repeated]].tolist()
    assert sorted(rest) == sorted(order[consumed:].tolist())
    assert consumed == old_world * per_rank


def test_counts_report_draws_and_passes():
    plan = _plan()
    counts = plan.counts(3, 200)
    sources, _ = plan.draws(3)
    assert counts["web"]["drawn"] == int(np.sum(sources[:200] == 0))
    assert counts["tiny"]["passes"] == (plan.span(3).counts_before[2] + counts["tiny"]["drawn"]) // 7


def test_rule_and_plan_validation():
    with pytest.raises(ValueError, match="one of samples"):
        EpochRule()
    with pytest.raises(ValueError, match="samples must be"):
        EpochRule(samples=0)
    with pytest.raises(ValueError, match="differ"):
        MixturePlan({"a": 3}, WeightSchedule.constant({"b": 1.0}), seed=0, rule=EpochRule(samples=3))


def test_units_of_passes_of_varying_length_are_drawn_in_order_once():
    """Batches as units (text bucket/budget): each pass of a source has its own number of units."""
    lengths = {(0, p): 5 + p % 3 for p in range(100)} | {(1, p): 2 + p % 2 for p in range(400)}
    plan = MixturePlan({"a": 10, "b": 4}, WeightSchedule.constant({"a": 0.7, "b": 0.3}), seed=0,
                       rule=EpochRule(until="all"), pass_length=lambda s, p: lengths[(s, p)])
    sequences: dict[int, list[tuple[int, int]]] = {0: [], 1: []}
    for epoch in range(5):
        sources, passes, within = plan.units(epoch)
        for s, p, w in zip(sources.tolist(), passes.tolist(), within.tolist(), strict=True):
            assert 0 <= w < lengths[(s, p)]
            sequences[s].append((p, w))
        done = [plan.units_before(i, epoch + 1) for i in range(2)]
        assert [len(sequences[i]) >= done[i] for i in range(2)] == [True, True]
    for s, seq in sequences.items():
        expected = [(p, w) for p in range(100) for w in range(lengths[(s, p)])][:len(seq)]
        assert seq == expected  # every unit of every pass, in order, once


@pytest.mark.parametrize("world", [1, 2, 3, 4, 5, 8, 13, 64])
def test_balanced_rounds_give_every_rank_its_share_of_each_source(world):
    """Mixture batches of one source each, dealt strided after ``balanced_rounds``: a permutation inside each
    round of ``world`` units, and every rank's count of each source within two of its share at every step."""
    from dataio.sampling.partition import balanced_rounds
    for weights in ({"a": 0.5, "b": 0.3, "c": 0.2}, {"a": 0.97, "b": 0.02, "c": 0.01}, {"a": 0.5, "b": 0.5}):
        sources, _ = blend(WeightSchedule.of(weights), 0, 64 * world + world // 2)  # a last, shorter round
        perm = balanced_rounds(sources, world)
        for start in range(0, len(sources), world):
            assert sorted(perm[start:start + world].tolist()) == list(range(start, min(start + world, len(sources))))
        share = np.array(list(weights.values()))
        for rank in range(world):
            mine = sources[perm[rank::world]]
            drift = np.eye(len(share))[mine].cumsum(0) - np.arange(1, len(mine) + 1)[:, None] * share
            assert np.abs(drift).max() <= 2.0, (weights, world, rank)
