"""The loaders follow a process group started after them; shares without padding; the last round Accelerate
truncates; ranks that disagree on their settings. Pure functions and one process: no launcher."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest
import torch.distributed as dist

import dataio
from dataio.sampling import rank_agreement
from dataio.loader import source_loader
from dataio.loader.accelerate_pass import last_round_rows
from dataio.sampling import epoch_position, partition


@pytest.mark.parametrize("world_size", range(1, 9))
@pytest.mark.parametrize("block", [1, 3, 8])
def test_unpadded_shares_read_each_position_once(world_size, block):
    for total, consumed in itertools.product(range(0, 40), (0, 5)):
        if consumed > total:
            continue
        shares = [partition.rank_share(total, world_size=world_size, rank=r, consumed=consumed, drop_last=False,
                                       block=block, pad=False) for r in range(world_size)]
        positions = np.concatenate([p for p, _ in shares])
        assert sorted(positions.tolist()) == list(range(consumed, total))
        assert not any(repeated.any() for _, repeated in shares)
        counts = [len(p) for p, _ in shares]
        assert max(counts) - min(counts) <= block


@pytest.mark.parametrize("world_size", range(2, 7))
@pytest.mark.parametrize("batch", [1, 4, 8])
def test_whole_batches_put_the_repeats_last_in_the_final_round(world_size, batch):
    """What Accelerate's gather_for_metrics needs: equal shapes on every rank, and the ranks' last batches end to
    end holding the order's last positions first, then the repeats, as many real rows as ``last_round_rows``."""
    for total in range(1, 60):
        shares = [partition.rank_share(total, world_size=world_size, rank=r, drop_last=False, block=batch)
                  for r in range(world_size)]
        bounds = [partition.batch_bounds(len(p), batch) for p, _ in shares]
        assert len({tuple(b) for b in bounds}) == 1  # the same batch shapes on every rank
        start, stop = bounds[0][-1]
        last = np.concatenate([p[start:stop] for p, _ in shares])
        repeated = np.concatenate([r[start:stop] for _, r in shares])
        real = last_round_rows(total, world_size=world_size, batch_size=batch, padded=True) or len(last)
        assert not repeated[:real].any() and repeated[real:].all()
        assert last[:real].tolist() == list(range(total - real, total))


def _as_if_the_group_started(monkeypatch, world: tuple[int, int]) -> None:
    """As if init_process_group ran now: both places that ask for the process group's world."""
    for module in (epoch_position, source_loader):
        monkeypatch.setattr(module, "resolve_world", lambda *_: world)


def test_a_loader_built_before_the_process_group_follows_it(coloured_shards, monkeypatch):
    loader = dataio.ImageLoader(coloured_shards, batch_size=4, image_size=16, num_workers=1, train=False)
    fixed = dataio.ImageLoader(coloured_shards, batch_size=4, image_size=16, num_workers=1, train=False,
                               world_size=1, rank=0)
    assert (loader.world_size, len(loader)) == (1, 12)
    _as_if_the_group_started(monkeypatch, (2, 1))
    assert (len(loader), loader.world_size, loader.rank) == (6, 2, 1)
    assert loader.sample_ids().tolist() == list(range(1, 45, 2)) + [0]  # rank 1's share, the repeat last
    assert [b.samples.tolist() for b in loader.batches()][0] == [1, 3, 5, 7]
    assert (len(fixed), fixed.world_size) == (12, 1)  # world_size=/rank= given: kept


def test_a_text_loader_follows_the_process_group_too(text_shards, monkeypatch):
    loader = dataio.TextLoader(text_shards, mode="fixed", batch_size=8, shuffle=False)
    whole = len(loader)
    _as_if_the_group_started(monkeypatch, (2, 0))
    assert len(loader) == -(-whole // 2) and loader.world_size == 2
    assert next(iter(loader))["sample_ids"].tolist() == list(range(8))


def test_even_batches_false_reads_each_sample_once_across_ranks(coloured_shards):
    ids = []
    for rank in range(4):
        loader = dataio.ImageLoader(coloured_shards, batch_size=4, image_size=16, num_workers=1, train=False,
                                    world_size=4, rank=rank, even_batches=False)
        ids += [i for batch in loader.batches() for i in batch.samples.tolist()]
    assert sorted(ids) == list(range(45))


class _Store:
    """A dict with the c10d store calls the check makes (set, check, get)."""

    def __init__(self) -> None:
        self.data: dict[str, bytes] = {}

    def set(self, key: str, value: str) -> None:
        self.data[key] = value.encode()

    def check(self, keys: list[str]) -> bool:
        return all(k in self.data for k in keys)

    def get(self, key: str) -> bytes:
        return self.data[key]


@pytest.mark.parametrize("world_size", [2, 3, 5])
def test_any_rank_that_differs_is_caught_by_every_rank_whatever_the_order_ranks_arrive_in(world_size, monkeypatch):
    # Before, a rank compared only its two neighbours' entries already there: the first to publish read on.
    for odd, order in itertools.product(range(world_size), itertools.permutations(range(world_size))):
        store = _Store()
        monkeypatch.setattr(rank_agreement, "_store", lambda *_: store)
        agreements, raised = {}, set()
        for rank in order:  # each rank its own process: publishes, finds only the earlier ranks' entries
            settings = {"dataset": "abc", "seed": 1 if rank == odd else 0, "batch_size": 4}
            agreements[rank] = rank_agreement.RankAgreement("site")
            try:
                agreements[rank].check("ImageLoader/train", settings, world_size=world_size, rank=rank, wait=0)
            except rank_agreement.RanksDisagree as e:
                assert "seed is" in str(e)
                raised.add(rank)
        for rank, agreement in agreements.items():  # the later ranks' entries, at the next batches
            agreement._seen = 0.0
            try:
                agreement.poll()
            except rank_agreement.RanksDisagree as e:
                assert "seed is" in str(e)
                raised.add(rank)
        assert raised == set(range(world_size))


def test_the_data_and_the_weights_are_compared_not_matched_on(monkeypatch):
    store = _Store()
    monkeypatch.setattr(rank_agreement, "_store", lambda *_: store)
    rank_agreement.RankAgreement("site").check("ImageLoader/train", {"dataset": "abc", "size": 45, "weights": "a"},
                                               world_size=2, rank=0, wait=0)
    with pytest.raises(rank_agreement.RanksDisagree) as caught:
        rank_agreement.RankAgreement("site").check("ImageLoader/train", {"dataset": "abd", "size": 44, "weights": "b"},
                                                   world_size=2, rank=1, wait=0)
    assert ("dataset is 'abd' on rank 1 and 'abc' on rank 0; size is 44 on rank 1 and 45 on rank 0; weights is 'b' "
            "on rank 1 and 'a' on rank 0") in str(caught.value)


def test_ranks_that_agree_pass_and_nothing_is_checked_without_a_process_group(monkeypatch):
    store = _Store()
    monkeypatch.setattr(rank_agreement, "_store", lambda *_: store)
    for rank in range(3):
        rank_agreement.RankAgreement("site").check("TextLoader/fixed", {"seed": 1}, world_size=3, rank=rank, wait=0)
    assert len(store.data) == 3
    monkeypatch.undo()
    assert not dist.is_initialized()
    rank_agreement.RankAgreement("site").check("TextLoader/fixed", {"seed": 1}, world_size=2, rank=1)  # no store


def test_a_loader_is_known_by_where_it_was_built_not_by_the_order_of_first_passes(coloured_shards):
    def build(**options):
        return dataio.ImageLoader(coloured_shards, batch_size=4, image_size=16, num_workers=1, **options)

    first, second = build(), build()  # one line, two loaders: the ordinal tells them apart
    elsewhere = dataio.ImageLoader(coloured_shards, batch_size=4, image_size=16, num_workers=1)
    sites = [loader._agreement.site for loader in (first, second, elsewhere)]
    assert len(set(sites)) == 3 and sites[0].rsplit("#", 1)[0] == sites[1].rsplit("#", 1)[0]
    # its own line, by file name and function (not the path: other nodes may hold the script elsewhere)
    innermost = sites[2].split("@", 1)[1].split("<")[0]
    assert innermost.startswith(f"{Path(__file__).name}:test_a_loader_is_known_by") and "/" not in innermost
