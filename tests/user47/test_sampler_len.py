"""user47: `len(loader)` between the loop's `sampler.set_epoch(e)` and its pass (pytorch/examples' ImageNet
`ProgressMeter(len(train_loader))`, tqdm, Lightning's batch count) read the loader's own epoch from the user's
DistributedSampler by calling its `set_epoch`, which moved the sampler back: the pass then read the loader's epoch,
not the one the loop set (a `set_epoch(0)` evaluation's second pass read epoch 1; `--resume` at epoch 3 read epoch
0; after a load, `set_epoch(3)` then `len` read the saved epoch's rest). docs/dataloader.md: "Each pass reads the
epoch the sampler is at, as torch's DataLoader does". The loader now puts the sampler's epoch back after it reads an
order (`given_order.sampler_indices`), so it never moves the user's sampler, as torch's DataLoader never does.
Expectations are read from the sampler before dataio touches it, as torch's loader would read them."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch.utils.data import DistributedSampler

import dataio

HERE = Path(__file__).resolve().parent


def _make(shards, num_workers=0, seed=0):
    dataset = dataio.ShardDataset(shards)
    sampler = DistributedSampler(range(len(dataset)), num_replicas=2, rank=0, seed=seed)
    extra = {"persistent_workers": True} if num_workers else {}
    loader = dataio.DataLoader(dataset, batch_size=4, sampler=sampler, num_workers=num_workers, normalize=False,
                               **extra)
    return dataset, sampler, loader


def _torch(dataset, sampler) -> list[int]:
    """What torch's DataLoader over ``sampler`` yields now (the sampler's epoch as it stands)."""
    return [dataset.targets[i] for i in sampler]


def _labels(loader) -> list[int]:
    return torch.cat([labels for _, labels in loader]).tolist()


def test_len_before_each_set_epoch_0_pass_keeps_epoch_0(coloured_shards):
    dataset, sampler, loader = _make(coloured_shards)
    sampler.set_epoch(1)
    other = _torch(dataset, sampler)
    passes, wants = [], []
    for _ in range(3):
        sampler.set_epoch(0)
        wants.append(_torch(dataset, sampler))
        len(loader)  # tqdm(loader) / ProgressMeter(len(loader))
        passes.append(_labels(loader))
    loader.close()
    assert passes == wants
    assert wants[0] != other  # the epochs' orders differ: the test can fail


def test_examples_resume_at_start_epoch_reads_that_epoch_with_len_before_the_pass(coloured_shards):
    dataset, sampler, loader = _make(coloured_shards)
    for epoch in (3, 4):  # args.start_epoch = checkpoint["epoch"]: a new loader, no loader state
        sampler.set_epoch(epoch)
        want = _torch(dataset, sampler)
        len(loader)
        assert _labels(loader) == want, epoch
        assert sampler.epoch == epoch  # len() and the pass leave the user's sampler where the loop put it
    loader.close()


@pytest.mark.parametrize("num_workers", [0, 2])
def test_resume_then_len_reads_what_the_docs_promise(coloured_shards, num_workers):
    dataset, sampler, loader = _make(coloured_shards, num_workers, seed=4)
    sampler.set_epoch(2)
    batches = iter(loader)
    first = next(batches)[1].tolist() + next(batches)[1].tolist()
    state = loader.state_dict()
    rest = torch.cat([labels for _, labels in batches]).tolist()
    loader.close()
    for move, want_epoch in (("a", 2), ("b", None), ("c", 3)):
        dataset, fresh, resumed = _make(coloured_shards, num_workers, seed=4)
        resumed.load_state_dict(state)
        if want_epoch is not None:
            fresh.set_epoch(want_epoch)
        want = _torch(dataset, fresh) if move == "c" else rest
        len(resumed)
        assert _labels(resumed) == want, move
        assert fresh.epoch == (want_epoch or 0), move  # the resumed pass did not move the user's sampler
        if move == "b":  # a loop that never calls set_epoch: the next pass reads the sampler's epoch, as torch's
            assert _labels(resumed) == _torch(dataset, fresh)
        resumed.close()
    assert first + rest != rest  # the state is mid-epoch


@pytest.fixture(scope="module")
def one_per_class(tmp_path_factory) -> Path:
    """40 classes of one image each (``dataio synth`` + ``dataio convert images``): a label names its sample."""
    root = tmp_path_factory.mktemp("one_per_class")
    cli = [sys.executable, "-m", "dataio"]
    for args in (["synth", "--classes", "40", "--per-class", "1", str(root / "raw")],
                 ["convert", "images", str(root / "raw"), str(root / "shards"), "--max-shard-samples", "7",
                  "--no-progress"]):
        done = subprocess.run(cli + args, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr[-2000:]
    return root / "shards"


def test_imagenet_loop_on_two_gloo_ranks_matches_torchs_loader_each_epoch(one_per_class):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    done = subprocess.run([sys.executable, str(HERE / "imagenet_two_ranks.py"), str(one_per_class), "2",
                           str(port)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]


class EpochUnderscore(torch.utils.data.Sampler):
    """A user's shuffling sampler with ``set_epoch`` that keeps the epoch as ``_epoch`` (no ``epoch`` attribute)."""

    def __init__(self, n: int) -> None:
        self.n, self._epoch = n, 0

    def set_epoch(self, epoch: int) -> None:
        self._epoch = epoch

    def __iter__(self):
        return iter(torch.randperm(self.n, generator=torch.Generator().manual_seed(self._epoch)).tolist())

    def __len__(self) -> int:
        return self.n


def test_a_sampler_without_an_epoch_attribute_reads_what_the_user_set(coloured_shards):
    dataset = dataio.ShardDataset(coloured_shards)
    sampler = EpochUnderscore(len(dataset))
    loader = dataio.DataLoader(dataset, batch_size=4, sampler=sampler, num_workers=0, normalize=False)
    passes, wants = [], []
    for _ in range(2):
        sampler.set_epoch(0)
        wants.append(_torch(dataset, sampler))
        passes.append(_labels(loader))
    loader.close()
    assert passes == wants


def test_loader_set_epoch_0_twice_reads_one_order_for_a_sampler_without_an_epoch_attribute(coloured_shards):
    dataset = dataio.ShardDataset(coloured_shards)
    sampler = EpochUnderscore(len(dataset))
    loader = dataio.DataLoader(dataset, batch_size=4, sampler=sampler, num_workers=0, normalize=False)
    passes = []
    for _ in range(2):
        loader.set_epoch(0)  # the docs' way for such a sampler
        passes.append(_labels(loader))
    sampler.set_epoch(0)
    loader.close()
    assert passes == [_torch(dataset, sampler)] * 2


def test_loader_epoch_names_the_epoch_the_next_pass_reads(coloured_shards):
    """After a `set_epoch(0)` pass the loader (and `loader.sampler`, which Lightning and open_clip read) said epoch 1
    while the user's sampler, and so the next pass, says 0."""
    dataset, sampler, loader = _make(coloured_shards)
    sampler.set_epoch(0)
    _labels(loader)
    assert (loader.epoch, loader.sampler.epoch) == (0, 0)
    sampler.set_epoch(4)
    assert (loader.epoch, loader.sampler.epoch) == (4, 4)
    loader.close()
