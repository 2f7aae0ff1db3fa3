"""A user's own train and validation pair loaders over folders of two tokenizers: one warning line naming both
(``dataio train`` refuses the same setup), and ``dataio.check_same_tokenizer`` refusing it.

Before: a validation folder indexed with its own tokenizer (other ids for the same words) ran silently and
reported recall over noise."""

from __future__ import annotations

import gc
import shutil
import warnings

import pytest

import dataio
from dataio import CaptionConfig, PairLoader
from dataio.formats.errors import ConfigError
from tests.pair_fixtures import indexed
from dataio.formats.text.tokenizer_setup import TokenizerConfig
from tests.pairs.tokenizer_makers import word_tokenizer


@pytest.fixture(scope="module")
def shifted_folder(pair_tars_text, tmp_path_factory):
    """The pair tars indexed with a tokenizer of the same words at other ids (a validation set's own)."""
    folder = tmp_path_factory.mktemp("shifted") / "tars"
    folder.mkdir()
    for tar in sorted(pair_tars_text.glob("*.tar")):
        shutil.copy(tar, folder / tar.name)
    word_tokenizer(folder.parent / "shifted.json", shift=5)
    return indexed(folder, TokenizerConfig(path=folder.parent / "shifted.json"))


def loader(folder, **captions):
    return PairLoader(folder, batch_size=8, image_size=16, captions=CaptionConfig(**captions))


def test_a_second_pair_loader_of_another_tokenizer_warns_naming_both_folders(pair_tars, shifted_folder):
    gc.collect()  # loaders of other tests, gone
    train = loader(pair_tars)
    with pytest.warns(UserWarning, match="give ids of two tokenizers") as caught:
        val = loader(shifted_folder)
    message = str(caught[0].message)
    assert str(pair_tars) in message and str(shifted_folder) in message and "tokenizer.json" in message
    assert len(message.splitlines()) == 1
    with pytest.raises(ConfigError, match="give ids of two tokenizers"):
        dataio.check_same_tokenizer(train, val)
    del train, val


def test_loaders_of_one_tokenizer_are_quiet_stored_or_tokenised_as_read(pair_tars_text, shifted_folder, tmp_path):
    gc.collect()
    path = word_tokenizer(tmp_path / "words.json")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        first = loader(pair_tars_text, tokenizer=path)  # the same words file, tokenised on the decode threads
        second = loader(shifted_folder, tokenizer=path)
        dataio.check_same_tokenizer(first, second)
        del first, second
        gc.collect()
        stored = loader(shifted_folder)  # stored ids and the file they were stored with: one vocabulary
        read = loader(pair_tars_text, tokenizer=shifted_folder.parent / "shifted.json")
        dataio.check_same_tokenizer(stored, read)
