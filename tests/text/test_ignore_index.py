"""``TextLoader(ignore_index=...)`` (nanoGPT's -1) in the C collation and its numpy fallback; ``vocab_size``."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from dataio import TextLoader, TokenDataset
from dataio.formats.errors import ConfigError
from dataio.text import collate


def nanogpt_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """nanoGPT's model.py, as written there."""
    return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)


@pytest.mark.parametrize("compiled", [True, False], ids=["C", "numpy"])
@pytest.mark.parametrize("mode", ["bucket", "pack"])
def test_nanogpts_ignore_index_labels_what_has_no_next_token(text_shards, mode, compiled, monkeypatch):
    if not compiled:
        monkeypatch.setattr(collate, "_collate", None)
    elif collate._collate is None:
        pytest.fail("dataio.text._collate is not built")
    options = dict(mode=mode, batch_size=4, block_size=64, shuffle=False)
    ours = list(TextLoader(text_shards, ignore_index=-1, **options))
    torchs = list(TextLoader(text_shards, **options))
    embed = torch.nn.Embedding(TextLoader(text_shards).vocab_size, 16)
    head = torch.nn.Linear(16, embed.num_embeddings)
    for batch, default in zip(ours, torchs, strict=True):
        labels = batch["labels"]
        assert not (labels == -100).any() and (labels == -1).any()
        assert torch.equal(labels, default["labels"].masked_fill(default["labels"] == -100, -1))
        loss = nanogpt_loss(head(embed(batch["input_ids"])), labels)  # -100 here: "Target -100 is out of bounds"
        expected = F.cross_entropy(head(embed(default["input_ids"])).flatten(0, 1), default["labels"].flatten())
        assert torch.isclose(loss, expected)


def test_a_blanked_piece_takes_the_ignore_index(text_shards):
    loader = TextLoader(text_shards, mode="pack", batch_size=4, block_size=64, shuffle=False, ignore_index=-7,
                        on_error="skip")
    lengths = loader.shards.lengths
    loader.shards.vocab_size = int(max(int(loader.shards.tokens(i).max()) for i in range(len(lengths)))) - 5
    labels = torch.cat([batch["labels"].flatten() for batch in loader])
    assert loader.stats.errors  # pieces blanked: masked, labelled -7
    assert set(np.unique(labels[labels < 0].numpy())) == {-7}


@pytest.mark.parametrize("value", [0, 5, True, 1.5, "-1"])
def test_an_ignore_index_that_is_not_a_negative_int_is_one_line(text_shards, value):
    with pytest.raises(ConfigError, match="^ignore_index must be a negative int"):
        TextLoader(text_shards, ignore_index=value)


def test_the_vocabulary_size_is_on_the_loader_and_the_data_set(text_shards):
    loader, dataset = TextLoader(text_shards), TokenDataset(text_shards)
    recorded = loader.shards.manifest.options["tokenizer"]["vocab_size"]
    assert loader.vocab_size == dataset.vocab_size == recorded == 600
    assert max(int(dataset[i].max()) for i in range(len(dataset))) < dataset.vocab_size
    loader.close()
