"""TextLoader has ImageLoader's shape: close and a context manager, the error policy with stats, the device copy."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from dataio import ImageLoader, TextLoader
from dataio.errors import SampleError, ShardError, TooManyErrors
from dataio.formats.text.tokenizer_setup import TokenizerConfig
from tests.text_fixtures import convert


@pytest.fixture(scope="module")
def eosless_shards(text_corpus, tmp_path_factory):
    """``text_shards`` without an EOS a document: a trained BPE's EOS is its largest id (CLIP-style pooling finds
    it), in every row, so a pretended smaller vocabulary would reject every row; without it only the rows holding
    large ids are out of range, as these tests need."""
    tokenizer = TokenizerConfig(train="bpe", vocab_size=600, eos=None)
    return convert([text_corpus], tmp_path_factory.mktemp("eosless") / "out", shard_tokens=4000, tokenizer=tokenizer)


def _with_vocab(loader: TextLoader, vocab_size: int) -> TextLoader:
    """Pretend the tokenizer is smaller, so the samples holding larger ids are out of range."""
    loader.shards.vocab_size = vocab_size
    return loader


def _bad_samples(loader: TextLoader, vocab_size: int) -> set[int]:
    return {i for i in range(len(loader.shards)) if int(loader.shards.tokens(i).max()) >= vocab_size}


def test_close_and_context_manager(text_shards):
    with TextLoader(text_shards, mode="fixed", batch_size=8) as loader:
        first = next(iter(loader))
        assert first["input_ids"].shape[0] == 8
    with pytest.raises(ValueError, match="closed"):
        next(iter(loader))


def test_an_id_past_the_vocabulary_is_named_under_raise(text_shards):
    loader = _with_vocab(TextLoader(text_shards, mode="fixed", batch_size=8), 300)
    with pytest.raises(SampleError, match=r"shard .*\.arrow: token id \d+ is not below the vocabulary size 300"):
        list(loader)


@pytest.mark.parametrize("mode", ["fixed", "bucket", "budget"])
def test_skip_drops_only_the_bad_rows_and_counts_them(eosless_shards, mode):
    options = dict(mode=mode, batch_size=8, max_tokens=512, window=64)
    vocab = 420
    loader = _with_vocab(TextLoader(eosless_shards, on_error="skip", **options), vocab)
    bad = _bad_samples(loader, vocab)
    assert 0 < len(bad) < len(loader.shards)
    seen = [int(s) for batch in loader for s in batch["sample_ids"]]
    assert sorted(seen) == sorted(set(range(len(loader.shards))) - bad)
    assert loader.stats.samples_ok == len(seen) and len(loader.stats.errors) == len(bad)
    assert all(e["shard"].endswith(".arrow") and e["key"].isdigit() for e in loader.stats.errors)


def test_skip_in_pack_mode_masks_the_bad_pieces(eosless_shards):
    vocab = 420
    clean = list(TextLoader(eosless_shards, mode="pack", block_size=64, batch_size=4))
    loader = _with_vocab(TextLoader(eosless_shards, mode="pack", block_size=64, batch_size=4, on_error="skip"), vocab)
    skipped = list(loader)
    assert len(skipped) == len(clean) and loader.stats.errors
    for a, b in zip(clean, skipped, strict=True):
        assert a["input_ids"].shape == b["input_ids"].shape
        assert torch.equal(a["cu_seqlens"], b["cu_seqlens"])  # document boundaries kept
        kept = b["attention_mask"].bool()
        assert torch.equal(a["input_ids"][kept], b["input_ids"][kept])
        assert (b["input_ids"][kept] < vocab).all()
        assert (b["labels"][~kept] == -100).all()


def test_max_errors_stops_mostly_broken_data(text_shards):
    loader = _with_vocab(TextLoader(text_shards, mode="fixed", batch_size=8, on_error="warn", max_errors=2), 300)
    with pytest.raises(TooManyErrors, match="max_errors=2"):
        list(loader)


def test_bad_policy_options_name_the_parameter(text_shards):
    with pytest.raises(ValueError, match="max_errors"):
        TextLoader(text_shards, max_errors=-1)
    with pytest.raises(ValueError, match="'ignore'"):
        TextLoader(text_shards, on_error="ignore")


def test_both_loaders_refuse_a_folder_of_the_other_kind_with_one_error_type(text_shards, image_shards):
    with pytest.raises(ShardError, match="not images"):
        ImageLoader(text_shards)
    with pytest.raises(ShardError, match="not Arrow token shards"):
        TextLoader(image_shards)


def test_cpu_batches_are_zero_copy_views(text_shards):
    loader = TextLoader(text_shards, mode="fixed", batch_size=4)
    batch = next(iter(loader))
    assert batch["input_ids"].dtype == torch.int64 and batch["repeated"].dtype == torch.bool
    assert np.shares_memory(batch["input_ids"].numpy(), batch["input_ids"].numpy())


def test_skip_in_pack_mode_drops_every_piece_of_a_bad_document(text_shards):
    """A document with an id past the vocabulary is dropped whole, as in the padded modes: its pieces in other
    rows (clean tokens of the same document) are masked too, not trained on."""
    vocab = 560
    loader = _with_vocab(TextLoader(text_shards, mode="pack", block_size=16, batch_size=4, on_error="skip"), vocab)
    bad = _bad_samples(loader, vocab)
    lengths = loader.shards.lengths
    assert bad and any(lengths[s] > 16 for s in bad)  # bad documents spanning rows
    stream, plan = loader.global_plan()
    pieces = stream.pieces(plan.samples)
    kept = sum(int(b["attention_mask"].sum()) for b in loader)
    assert kept == int(lengths.sum()) - sum(int(lengths[s]) for s in bad)
    assert len(loader.stats.errors) == int(np.isin(pieces.sample, list(bad)).sum())  # one per piece, as before


def test_the_vocabulary_check_of_a_bad_batch_ignores_padding(text_shards):
    """The per-row check of a batch holding a bad row looks at each row's tokens only, as the batch's first
    check does: with a pad id at or past the vocabulary (a pad token the shards' vocabulary does not count),
    a clean row shorter than the batch's longest is not dropped nor reported."""
    vocab = 560
    loader = _with_vocab(TextLoader(text_shards, mode="fixed", batch_size=8, on_error="skip"), vocab)
    loader.shards.pad_id = 999_999
    bad = _bad_samples(loader, vocab)
    seen = [int(s) for batch in loader for s in batch["sample_ids"]]
    assert sorted(seen) == sorted(set(range(len(loader.shards))) - bad)
    assert len(loader.stats.errors) == len(bad)
    assert not any("token id 999999 " in e["reason"] for e in loader.stats.errors)
