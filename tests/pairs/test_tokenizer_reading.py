"""A user's tokenizer at read time (``captions=CaptionConfig(tokenizer=...)``): its failures are samples' errors
under the policy, its ids are bounded by its largest id, and a cut keeps the first tokens.

Before: a regex pre-tokenizer's panic (``PanicException``, a ``BaseException``) escaped ``on_error="skip"``;
a tokenizer that appends no EOS had a cut row's last kept token replaced by the caption's last word; the text
tower was sized by the vocabulary's count, below a pruned vocabulary's ids."""

from __future__ import annotations

import pytest
from tokenizers import Tokenizer, models, pre_tokenizers
from tokenizers.processors import TemplateProcessing

from dataio import PairLoader
from dataio.errors import SampleError
from dataio.pairs.caption_config import CaptionConfig
from tests.pairs.tokenizer_makers import PANIC_ON_SQUARE, PRUNED_TOP, panics, pruned_tokenizer, word_tokenizer


def captions_of(folder) -> list[str]:
    import pyarrow as pa

    return pa.ipc.open_file(folder / "samples.arrow").read_all().column("caption").to_pylist()


def test_a_tokenizer_panicking_on_a_caption_is_that_samples_error_under_the_policy(pair_tars_text):
    tokenizer = word_tokenizer(pattern=PANIC_ON_SQUARE)
    failing = [c for c in captions_of(pair_tars_text) if panics(tokenizer, c)]
    assert 0 < len(failing) < len(captions_of(pair_tars_text))
    captions = CaptionConfig(tokenizer=tokenizer, text=True)
    with pytest.raises(SampleError, match=r"the tokenizer failed on it \(PanicException: "):
        list(PairLoader(pair_tars_text, batch_size=8, image_size=16, shuffle=False, captions=captions))
    loader = PairLoader(pair_tars_text, batch_size=8, image_size=16, on_error="skip", captions=captions)
    kept = [c for batch in loader for c, rep in zip(batch["caption"], batch["repeated"].tolist(), strict=True)
            if not rep]
    assert len(kept) == len(captions_of(pair_tars_text)) - len(failing) and not set(kept) & set(failing)
    assert len(loader.stats.errors) == len(failing)
    assert all("PanicException" in e["reason"] for e in loader.stats.errors)


def test_a_cut_without_eos_keeps_the_first_tokens_and_with_one_ends_with_it(pair_tars_text):
    plain, ended = word_tokenizer(), word_tokenizer(end=True)
    eos = plain.token_to_id("</s>")
    for tokenizer, tail in ((plain, None), (ended, eos)):
        captions = CaptionConfig(tokenizer=tokenizer, text=True, max_length=3)
        for batch in PairLoader(pair_tars_text, batch_size=8, image_size=16, shuffle=False, captions=captions):
            for row, caption in enumerate(batch["caption"]):
                first = plain.encode(caption).ids[:3]
                want = first if tail is None else first[:2] + [tail]
                assert batch["input_ids"][row].tolist() == want, (caption, batch["input_ids"][row].tolist())


def test_a_pruned_vocabulary_sizes_the_text_tower_by_its_largest_id(pair_tars_text, tmp_path):
    path = pruned_tokenizer(tmp_path / "pruned.json")
    loader = PairLoader(pair_tars_text, batch_size=8, image_size=16, captions=CaptionConfig(tokenizer=path))
    assert loader.vocab_size == PRUNED_TOP + 1  # was 300, the entries' count, below ids up to 70001
    batch = next(iter(loader))
    assert int(batch["input_ids"].max()) < loader.vocab_size


def test_an_id_past_the_tokenizers_vocabulary_is_that_samples_error(pair_tars_text):
    """A template's special id outside the vocabulary: every row holds it, each is named under the policy."""
    tokenizer = Tokenizer(models.WordLevel({"a": 0, "[UNK]": 1}, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.post_processor = TemplateProcessing(single="$A <end>", special_tokens=[("<end>", 5000)])
    captions = CaptionConfig(tokenizer=tokenizer)
    with pytest.raises(SampleError, match="caption token id 5000 >= vocabulary size 2"):
        list(PairLoader(pair_tars_text, batch_size=8, image_size=16, shuffle=False, captions=captions))
