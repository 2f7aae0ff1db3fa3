"""``dataio.TokenDataset``: token rows as a map-style torch Dataset (the text side of ``ShardDataset``)."""

from __future__ import annotations

import json
import pickle
import shutil

import pytest
import torch
from torch.utils.data import DistributedSampler

import dataio
from dataio import TextLoader, TokenDataset
from dataio.formats.errors import ConfigError, SampleError
from dataio.formats.dataset.manifest import read_manifest


class PadCollate:
    """Pads a batch of rows to its longest with ``pad_id`` (module level: picklable for workers)."""

    def __init__(self, pad_id: int) -> None:
        self.pad_id = pad_id

    def __call__(self, rows: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        return (torch.nn.utils.rnn.pad_sequence(rows, batch_first=True, padding_value=self.pad_id),
                torch.tensor([len(r) for r in rows]))


def test_rows_are_the_loaders_token_ids(text_shards):
    dataset = TokenDataset(text_shards)
    reference = TextLoader(text_shards).dataset
    assert len(dataset) == len(reference) == read_manifest(text_shards)[1].num_samples
    for i in (0, 5, len(dataset) - 1, -1):
        row = dataset[i]
        assert row.dtype == torch.int64 and row.ndim == 1 and torch.equal(row, reference[i])
    assert dataset.lengths.tolist() == [len(reference[i]) for i in range(len(dataset))]
    with pytest.raises(IndexError):
        dataset[len(dataset)]
    with pytest.raises(ConfigError, match="unknown keyword mode"):
        TokenDataset(text_shards, mode="fixed")


def test_pickles_small_and_pads_in_worker_processes(text_shards):
    dataset = TokenDataset(text_shards)
    blob = pickle.dumps(dataset)
    assert len(blob) < 1024 and pickle.loads(blob)._opened is None
    sampler = DistributedSampler(dataset, num_replicas=2, rank=1, shuffle=False)
    loader = torch.utils.data.DataLoader(dataset, batch_size=8, sampler=sampler, num_workers=2,
                                         collate_fn=PadCollate(dataset.pad_id), multiprocessing_context="fork")
    rows = []
    for padded, lengths in loader:
        assert padded.shape == (len(lengths), int(lengths.max()))
        rows += [padded[i, :n] for i, n in enumerate(lengths.tolist())]
        assert all((padded[i, n:] == dataset.pad_id).all() for i, n in enumerate(lengths.tolist()))
    assert len(rows) == len(sampler) == -(-len(dataset) // 2)
    assert all(torch.equal(row, dataset[i]) for row, i in zip(rows, sampler, strict=True))


def test_distributed_sampler_idiom_runs_the_text_loader(text_shards):
    dataset = TokenDataset(text_shards)
    seen = []
    for rank in range(3):
        sampler = DistributedSampler(dataset, num_replicas=3, rank=rank, seed=2)
        loader = dataio.DataLoader(dataset, batch_size=10, sampler=sampler)
        assert isinstance(loader, TextLoader) and loader.config.mode == "fixed"
        assert (loader.world_size, loader.rank, loader.config.seed) == (3, rank, 2)
        for batch in loader:
            for row, sample in zip(batch["input_ids"], batch["sample_ids"].tolist(), strict=True):
                assert torch.equal(row[:len(dataset[sample])], dataset[sample])
                seen.append(sample)
    assert sorted(set(seen)) == list(range(len(dataset)))


def test_rows_past_the_vocabulary_are_named_or_stood_in_for(text_shards, tmp_path):
    full = TokenDataset(text_shards)
    highest = [int(full[i].max()) for i in range(len(full))]
    vocab = sorted(highest)[len(highest) // 2]  # about half the rows now hold an id past the vocabulary
    folder = tmp_path / "small_vocab"
    shutil.copytree(text_shards, folder)
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["options"]["tokenizer"]["vocab_size"] = vocab
    (folder / "manifest.json").write_text(json.dumps(manifest))
    bad = next(i for i in range(len(full)) if highest[i] >= vocab)
    good = next(i for i in range(bad, len(full)) if highest[i] < vocab)
    with pytest.raises(SampleError, match=rf"in shard text-.*token id \d+ is not below the vocabulary size {vocab}"):
        TokenDataset(folder)[bad]
    skipping = TokenDataset(folder, on_error="skip")
    assert torch.equal(skipping[bad], full[good]) and len(skipping.errors.errors) == good - bad
