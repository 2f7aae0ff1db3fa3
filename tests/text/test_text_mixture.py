"""Text mixtures (issue 26): exact shares at every prefix in each mode, schedules, resume on any world size,
equal batches per rank, per-source counts."""

from __future__ import annotations

import numpy as np
import pytest

from dataio import TextLoader
from dataio.formats.text.synthetic_text import synthetic_documents
from dataio.formats.text.tokenizer_setup import TokenizerConfig
from dataio.mixtures.blend import slack
from dataio.mixtures.weight_schedule import Targets, WeightSchedule
from dataio.train.mixture_counts import PlanTally, ReadTally
from tests.text_fixtures import convert


@pytest.fixture(scope="module")
def sources(text_shards, tmp_path_factory):
    """Three sources with one tokenizer: the fixture corpus, a corpus of short and one of long documents."""
    root = tmp_path_factory.mktemp("mixture")
    tokenizer = TokenizerConfig(path=text_shards / "tokenizer.json")
    out = {"web": text_shards}
    for name, count, words in (("code", 120, 15), ("books", 40, 70)):
        corpus = root / f"{name}.txt"
        corpus.write_text("\n".join(synthetic_documents(count, seed=len(name), mean_words=words)) + "\n")
        out[name] = convert([corpus], root / name, tokenizer=tokenizer, shard_tokens=3000)
    return out


WEIGHTS = {"web": 0.6, "code": 0.3, "books": 0.1}


def _source_of(loader: TextLoader, samples: np.ndarray) -> np.ndarray:
    return loader.mixture.source_of(samples)


@pytest.mark.parametrize("mode", ["fixed", "bucket", "budget"])
def test_shares_are_exact_at_every_prefix(sources, mode):
    loader = TextLoader(sources, mode=mode, weights=WEIGHTS, batch_size=8, max_tokens=800, seed=4)
    schedule = loader.config.weights
    targets = Targets(schedule)
    got = np.zeros(3)
    units = 0
    bound = 1 - slack(3) + 1e-9
    for batch in loader:
        src = _source_of(loader, batch["sample_ids"])
        if mode == "fixed":  # samples are the unit: every sample is a step of the blend
            for s in src.tolist():
                got[s] += 1
                units += 1
                owed = np.array([targets.owed(i, units) for i in range(3)])
                assert np.abs(got - owed).max() <= bound
        else:  # batches are the unit, each from one source
            assert len(set(src.tolist())) == 1
            got[src[0]] += 1
            units += 1
            owed = np.array([targets.owed(i, units) for i in range(3)])
            assert np.abs(got - owed).max() <= bound
    assert units > 20


def test_packed_rows_mix_sources_with_every_boundary_marked(sources):
    loader = TextLoader(sources, mode="pack", weights=WEIGHTS, batch_size=4, block_size=128, seed=1)
    batch = next(iter(loader))
    cu = batch["cu_seqlens"].numpy()
    positions = batch["position_ids"].numpy().reshape(-1)
    starts = set(np.flatnonzero(positions == 0).tolist())
    assert starts <= set(cu[:-1].tolist())  # every document piece starts a cu_seqlens segment
    assert sum(entry["tokens"] for entry in loader.stats.sources.values()) == int(batch["attention_mask"].sum())
    assert len(loader.stats.sources) >= 2  # rows hold documents of several sources


def test_a_schedule_anneals_the_blend(sources):
    schedule = WeightSchedule.of([(0, {"web": 0.9, "code": 0.05, "books": 0.05}), (300, {"web": 0.9, "code": 0.05,
                                  "books": 0.05}), (400, {"web": 0.1, "code": 0.1, "books": 0.8})])
    loader = TextLoader(sources, mode="fixed", weights=schedule, batch_size=10, epoch_length=600, seed=2)
    src = np.concatenate([_source_of(loader, b["sample_ids"]) for b in loader])
    assert len(src) == 600
    head, tail = np.bincount(src[:300], minlength=3), np.bincount(src[400:], minlength=3)
    assert head.tolist() == [270, 15, 15] and tail.tolist() == [20, 20, 160]


@pytest.mark.parametrize("mode", ["fixed", "budget", "pack"])
@pytest.mark.parametrize("old_world, new_world", [(1, 1), (2, 3), (3, 2)])
def test_resume_mid_epoch_on_any_world_size_after_a_schedule_change(sources, mode, old_world, new_world):
    schedule = [(0, {"web": 0.8, "code": 0.1, "books": 0.1}), (20, {"web": 0.2, "code": 0.4, "books": 0.4})]
    options = dict(mode=mode, weights=schedule, batch_size=6, max_tokens=700, block_size=96, seed=9,
                   epoch_length=120, drop_last=True)

    def run(world, rank):
        return TextLoader(sources, world_size=world, rank=rank, **options)

    def ids(batch):
        return batch["input_ids"].numpy().tolist()

    whole = [[ids(b) for b in run(1, 0)]]
    old = [run(old_world, r) for r in range(old_world)]
    passes = [iter(loader) for loader in old]
    steps = 3 if mode != "budget" else 2
    for _ in range(steps):  # every rank takes `steps` batches, past the schedule's change at unit 20
        for p in passes:
            next(p)
    state = old[0].state_dict()
    counts = [len(list(p)) + steps for p in passes]
    assert len(set(counts)) == 1  # equal batches per rank
    new = [run(new_world, r) for r in range(new_world)]
    for loader in new:
        loader.load_state_dict(state)
    rest = [[ids(b) for b in loader] for loader in new]
    assert len({len(r) for r in rest}) == 1
    # the rest, dealt round-robin over the new ranks, is the uninterrupted run's tail; in budget mode (a
    # batch per source) each round of batches is reordered among the ranks (partition.balanced_rounds)
    tail = whole[0][steps * old_world:]
    for k, group in enumerate(zip(*rest, strict=True)):
        expected = tail[k * new_world:(k + 1) * new_world]
        assert (sorted(group) == sorted(expected)) if mode == "budget" else (list(group) == expected)


@pytest.mark.parametrize("world", [2, 3, 4])
def test_every_rank_reads_each_sources_share_of_batches(sources, world):
    """Budget batches are each one source's: dealt strided, a rank could read one source only (0.5/0.3/0.2
    on two ranks gave one rank [473, 0, 0] samples); reordered within rounds, every rank holds the shares
    to within two batches at every prefix."""
    weights = {"web": 0.5, "code": 0.3, "books": 0.2}
    share = np.array(list(weights.values()))
    counts = []
    for rank in range(world):
        loader = TextLoader(sources, mode="budget", max_tokens=300, weights=weights, seed=1, epoch_length=300,
                            world_size=world, rank=rank)
        got = np.zeros(3)
        for step, batch in enumerate(loader, start=1):
            got[_source_of(loader, batch["sample_ids"])[0]] += 1
            assert np.abs(got - step * share).max() <= 2.0, (rank, step, got)
        counts.append(step)
    assert len(set(counts)) == 1 and counts[0] >= 300 // world


def test_sources_with_other_tokenizers_are_refused(sources, text_corpus, tmp_path):
    other = convert([text_corpus], tmp_path / "other", tokenizer=TokenizerConfig(train="bpe", vocab_size=300))
    with pytest.raises(ValueError, match="another tokenizer"):
        TextLoader({"web": sources["web"], "other": other}, weights={"web": 0.5, "other": 0.5})


def test_bad_mixture_options_name_the_problem(sources):
    with pytest.raises(ValueError, match="weights name"):
        TextLoader(sources, weights={"web": 1.0})
    with pytest.raises(ValueError, match="needs a mixture"):
        TextLoader(sources["web"], weights={"web": 1.0})
    with pytest.raises(ValueError, match="give .*weights"):
        TextLoader(sources)
    with pytest.raises(ValueError, match="one of epoch_length"):
        TextLoader(sources, weights=WEIGHTS, epoch_length=10, epoch_until="all")


def test_until_a_source_finishes_and_passes_are_reported(sources):
    loader = TextLoader(sources, mode="fixed", weights=WEIGHTS, batch_size=5, epoch_until="books", seed=0)
    total = sum(len(b["sample_ids"]) for b in loader)
    books = loader.stats.sources["books"]["samples"]
    assert books == len(TextLoader(sources["books"], mode="fixed").shards)  # the epoch ended with its pass
    assert total >= books
    assert loader.mixture_passes()["books"] == 1
    assert repr(loader.stats.sources) == repr({name: loader.stats.sources[name] for name in WEIGHTS})  # a dict's


@pytest.mark.parametrize("mode", ["fixed", "budget", "pack"])
def test_set_weights_is_the_constructor_s_blend(sources, mode):
    schedule = [(0, {"web": 0.2, "code": 0.2, "books": 0.6}), (30, {"web": 0.8, "code": 0.1, "books": 0.1})]
    options = dict(mode=mode, batch_size=6, max_tokens=700, block_size=96, seed=5, epoch_length=90)
    direct = TextLoader(sources, weights=schedule, **options)
    later = TextLoader(sources, weights={"web": 1, "code": 1, "books": 1}, **options)
    before = later.state_dict()["dataset"]
    later.set_weights(schedule)
    assert later.state_dict()["dataset"] == direct.state_dict()["dataset"] != before  # the fingerprint follows
    for epoch in (0, 1):
        direct.set_epoch(epoch)
        later.set_epoch(epoch)
        assert [b["input_ids"].tolist() for b in later] == [b["input_ids"].tolist() for b in direct]
    with pytest.raises(ValueError, match="fresh loader"):
        later.set_weights(schedule)
    with pytest.raises(ValueError, match="needs a mixture"):
        TextLoader(sources["web"]).set_weights({"web": 1})


@pytest.mark.parametrize("mode", ["fixed", "budget", "pack"])
def test_source_counts_are_what_the_pass_reads(sources, mode):
    loader = TextLoader(sources, mode=mode, weights=WEIGHTS, batch_size=5, max_tokens=600, block_size=80, seed=3,
                        epoch_length=150)
    steps = [loader.source_counts(i, i + 1) for i in range(len(loader.global_plan(0)[1]))]
    read = []
    for _ in loader:
        read.append(loader.stats.sources.counts.copy())
    per_batch = np.diff(np.stack([np.zeros_like(read[0]), *read]), axis=0)
    assert np.array_equal(np.stack(steps), per_batch)
    assert np.array_equal(loader.source_counts(0, 10**9, epoch=0), loader.stats.sources.counts)
    assert loader.source_counts(7, 3, epoch=0).sum() == 0  # an empty range


def test_plan_and_read_tallies_agree_on_one_rank(sources):
    """dataio train's per-source counts: from the plan (text), or as read (a loader with only stats.sources)."""
    loader = TextLoader(sources, mode="budget", weights=WEIGHTS, max_tokens=600, seed=1, epoch_until="books")
    plan, read = PlanTally(loader, batches_per_step=1), ReadTally(loader, loader.mixture.names)
    for epoch in range(2):
        plan.begin_pass()
        read.begin_pass()
        for _ in loader:
            assert np.array_equal(plan.step(), read.step())
        assert plan.epoch_summary() == read.epoch_summary()
        assert plan.epoch_summary()["books"]["passes"] == epoch + 1  # each epoch ends with a pass of books
