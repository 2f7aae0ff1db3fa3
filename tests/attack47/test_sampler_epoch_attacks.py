"""Attack 47 on a loader that reads its `sampler=`'s epoch every pass (`ResumableLoader._follow_sampler_epoch`,
`set_epoch`, `load_state_dict`) and on such a loader pickled and rebuilt (`rebuilt_on_unpickle`).

Found: a pickled copy of a loader over a DistributedSampler read the epoch after the sampler's (its carried state
was taken as a resume), where the original and torch's DataLoader read the sampler's; a sampler that refused
`set_epoch` still moved the loader's epoch; a negative or fractional epoch on the sampler crashed deep in numpy or
was cut to an int without a word. Fixed since: set_epoch during a pass reset the
position that pass still moves (it now waits for the pass's end). Held: a loaded state, mid-pass pickles, numpy epochs, a TextLoader's sampler."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import torch
from torch.utils.data.distributed import DistributedSampler

import dataio
from tests.sampler_loops import labels_of, loader_over, sampler_labels
from dataio.errors import ConfigError


def _sampler(shards, **kw):
    return DistributedSampler(range(len(dataio.ShardDataset(shards))), num_replicas=2, rank=0, seed=0, **kw)


_loader, _labels, _sampler_labels = loader_over, labels_of, sampler_labels


def test_a_pickled_copy_after_a_pass_reads_the_samplers_epoch_as_the_original(coloured_shards):
    sampler = _sampler(coloured_shards)
    dataset, loader = _loader(coloured_shards, sampler)
    sampler.set_epoch(3)
    _labels(loader)  # the pass moved the loader's own position to epoch 4; torch reads the sampler's 3 again
    copy = pickle.loads(pickle.dumps(loader))
    original, copied = _labels(loader), _labels(copy)
    loader.close(), copy.close()
    assert original == _sampler_labels(dataset, _sampler(coloured_shards), 3)
    assert copied == original


def test_a_pickled_copy_of_a_loaded_loader_whose_sampler_moved_reads_the_new_epoch(coloured_shards):
    sampler = _sampler(coloured_shards)
    dataset, loader = _loader(coloured_shards, sampler)
    loader.set_epoch(1)
    batches = iter(loader)
    next(batches)
    state = loader.state_dict()
    batches.close()
    fresh = _sampler(coloured_shards)
    _, resumed = _loader(coloured_shards, fresh)
    resumed.load_state_dict(state)
    fresh.set_epoch(5)  # moved after the load: the user's new epoch
    copy = pickle.loads(pickle.dumps(resumed))
    expected = _sampler_labels(dataset, _sampler(coloured_shards), 5)
    assert _labels(copy) == expected
    assert _labels(resumed) == expected
    loader.close(), resumed.close(), copy.close()


def test_a_copy_pickled_mid_pass_continues_the_pass(coloured_shards):
    sampler = _sampler(coloured_shards)
    _, loader = _loader(coloured_shards, sampler)
    sampler.set_epoch(2)
    batches = iter(loader)
    next(batches)
    copy = pickle.loads(pickle.dumps(loader))
    assert _labels(copy) == _labels(batches)
    loader.close(), copy.close()


def test_a_sampler_that_refuses_set_epoch_moves_neither(coloured_shards):
    class Refusing(DistributedSampler):
        def set_epoch(self, epoch):
            if epoch > 5:
                raise ValueError("no epoch past 5")
            super().set_epoch(epoch)

    sampler = Refusing(range(len(dataio.ShardDataset(coloured_shards))), num_replicas=2, rank=0, seed=0)
    _, loader = _loader(coloured_shards, sampler)
    with pytest.raises(ValueError, match="past 5"):
        loader.set_epoch(7)
    assert (loader.epoch, sampler.epoch) == (0, 0)
    loader.close()


@pytest.mark.parametrize("epoch", [-1, 1.5, True, "2"])
def test_a_sampler_epoch_that_is_not_a_count_is_named(coloured_shards, epoch):
    sampler = _sampler(coloured_shards)
    _, loader = _loader(coloured_shards, sampler)
    sampler.epoch = epoch
    with pytest.raises(ConfigError, match=r"sampler=DistributedSampler's epoch must be an integer >= 0"):
        _labels(loader)
    with pytest.raises(ConfigError, match="epoch must be an integer >= 0"):
        loader.set_epoch(epoch)
    loader.close()


def test_a_numpy_epoch_is_an_epoch(coloured_shards):
    sampler = _sampler(coloured_shards)
    dataset, loader = _loader(coloured_shards, sampler)
    sampler.set_epoch(np.int64(2))
    assert _labels(loader) == _sampler_labels(dataset, _sampler(coloured_shards), 2)
    loader.set_epoch(np.int32(1))
    assert type(loader.state_dict()["epoch"]) is int and sampler.epoch == 1
    loader.close()


def test_load_state_dict_with_garbage_leaves_the_loader_as_it_was(coloured_shards):
    sampler = _sampler(coloured_shards)
    dataset, loader = _loader(coloured_shards, sampler)
    sampler.set_epoch(2)
    for garbage in (None, [], {"epoch": "1"}, {"epoch": 1, "samples_consumed": -4, "seed": 0},
                    {"epoch": 1.0, "samples_consumed": 0, "seed": 0}):
        with pytest.raises(ValueError):
            loader.load_state_dict(garbage)
    assert _labels(loader) == _sampler_labels(dataset, _sampler(coloured_shards), 2)
    loader.close()


def test_a_text_loader_over_a_distributed_sampler_reads_its_epoch_and_pickles_so(text_shards):
    dataset = dataio.TokenDataset(text_shards)
    sampler = DistributedSampler(dataset, num_replicas=2, rank=0, seed=2)
    loader = dataio.DataLoader(dataset, batch_size=4, sampler=sampler)

    def ids(batches):
        return [b["sample_ids"].tolist() for b in batches]

    sampler.set_epoch(1)
    first, again = ids(loader), ids(loader)  # no set_epoch between: the sampler's epoch 1 twice, as torch
    sampler.set_epoch(2)
    other = ids(loader)
    sampler.set_epoch(1)
    ids(loader)
    copy = pickle.loads(pickle.dumps(loader))
    assert first == again != other
    assert ids(copy) == ids(loader) == first
    loader.close(), copy.close()


def test_set_epoch_during_a_pass_leaves_the_state_of_the_pass(coloured_shards):
    sampler = _sampler(coloured_shards)
    _, loader = _loader(coloured_shards, sampler)
    batches = iter(loader)
    next(batches)
    loader.set_epoch(4)  # for the next pass
    next(batches)
    state = loader.state_dict()
    assert (state["epoch"], state["samples_consumed"]) == (0, 8)

    rest = _labels(batches)
    assert len(rest) + 8 == len(sampler)  # the pass ran on with its own order
    assert loader.epoch == 4 and sampler.epoch == 4
    dataset = loader.dataset
    assert _labels(loader) == _sampler_labels(dataset, sampler, 4)


def test_set_epoch_during_a_pass_left_by_break_is_taken_by_the_next_pass(coloured_shards):
    sampler = _sampler(coloured_shards)
    dataset, loader = _loader(coloured_shards, sampler)
    for _ in loader:
        loader.set_epoch(2)
        break
    assert loader.state_dict()["epoch"] == 2
    assert _labels(loader) == _sampler_labels(dataset, sampler, 2)
