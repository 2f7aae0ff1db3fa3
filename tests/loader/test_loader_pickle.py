"""A loader pickles as what it was built with and its position (``dataio.loader.rebuilt_on_unpickle``): the copy
reads the same batches, from where the original was; a closed loader and a hook that does not pickle are refused in
one line. Before, pickling any loader failed: ``TypeError: cannot pickle '_thread.lock' object``."""

from __future__ import annotations

import pickle
import threading
from itertools import islice

import pytest
import torch

import dataio
from dataio.errors import LoaderClosed, NotPicklable
from dataio.detection.detection_config import DetectionConfig
from dataio.loader.sample_loader import SampleLoader
from tests.pipeline.array_source import ArraySource


class HoldsALock:
    """A transform holding what does not pickle (a lock, an open file, a CUDA stream)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()

    def __call__(self, image: torch.Tensor) -> torch.Tensor:
        return image


class HoldsItsLoader:
    """A DataModule in small: its loader's hook is one of its own methods, so pickling either meets the other."""

    def __init__(self, shards) -> None:
        self.loader = _text(shards, batch_transform=self.hook)

    def hook(self, batch: dict) -> dict:
        return {**batch, "seen_by": torch.full((len(batch["input_ids"]),), id(self))}


def _image(shards, **options) -> dataio.ImageLoader:
    return dataio.ImageLoader(shards, **{"batch_size": 4, "image_size": 16, "num_workers": 1, "seed": 3, **options})


def _text(shards, **options) -> dataio.TextLoader:
    return dataio.TextLoader(shards, max_tokens=512, seed=2, **options)  # budget mode: batches of varying rows


def _same(a, b) -> None:
    """Two batches, equal field by field (tuples of tensors for images; dicts for pairs, boxes, text, SampleLoader)."""
    if isinstance(a, dict):
        assert a.keys() == b.keys()
        a, b = list(a.values()), [b[k] for k in a]
    for x, y in zip(a, b, strict=True):
        assert torch.equal(x, y)


def _loaders(coloured_shards, text_shards):
    return [_image(coloured_shards), _text(text_shards), SampleLoader(ArraySource(30), batch_size=4, seed=5)]


def test_a_fresh_loader_pickles_and_its_copy_reads_the_same_epoch(coloured_shards, text_shards):
    for loader in _loaders(coloured_shards, text_shards):
        with loader, pickle.loads(pickle.dumps(loader)) as rebuilt:
            assert type(rebuilt) is type(loader) and rebuilt.config == loader.config
            for a, b in zip(loader, rebuilt, strict=True):
                _same(a, b)
            assert rebuilt.epoch == loader.epoch == 1


def test_a_loader_pickled_mid_epoch_continues_at_its_position(coloured_shards, text_shards, pair_tars, coco_shards):
    kinds = [_image(pair_tars, image_size=32),  # image-text pairs and boxes: the sources sample_kinds.py picks
             _image(coco_shards, batch_size=2, image_size=64, targets=DetectionConfig(masks=True))]
    for loader in _loaders(coloured_shards, text_shards) + kinds:  # each kind of image sample, text, SampleLoader
        with loader:
            loader.set_epoch(1)
            iterator = iter(loader)
            list(islice(iterator, 3))  # the consumer holds batch 2: the copy starts at batch 3, as a checkpoint
            state = loader.state_dict()
            with pickle.loads(pickle.dumps(loader)) as rebuilt:
                assert rebuilt.state_dict() == state and rebuilt.epoch == 1
                rest = list(iterator)
                assert rest, type(loader).__name__
                for a, b in zip(rest, rebuilt, strict=True):  # the same batches, to the epoch's end
                    _same(a, b)
    with _text(text_shards) as ended:  # pickled after a whole epoch: the copy reads the next one
        list(ended)
        with pickle.loads(pickle.dumps(ended)) as rebuilt:
            assert rebuilt.epoch == 1
            for a, b in zip(ended, rebuilt, strict=True):
                _same(a, b)


def test_a_hook_bound_to_what_holds_the_loader_pickles_with_it(text_shards):
    holder = HoldsItsLoader(text_shards)
    rebuilt = pickle.loads(pickle.dumps(holder))  # the check of the hooks meets the loader again: no endless recursion
    assert rebuilt.loader is not holder.loader and rebuilt.loader.config.batch_transform.__self__ is rebuilt
    with holder.loader, rebuilt.loader:
        for a, b in zip(holder.loader, rebuilt.loader, strict=True):
            assert torch.equal(b.pop("seen_by"), torch.full_like(a.pop("seen_by"), id(rebuilt)))
            _same(a, b)


def test_a_closed_loader_or_a_hook_that_does_not_pickle_is_refused_in_one_line(coloured_shards, text_shards):
    closed = _text(text_shards)
    closed.close()
    with pytest.raises(LoaderClosed, match=r"TextLoader\(.*\) is closed: it cannot be pickled") as raised:
        pickle.dumps(closed)
    assert "\n" not in str(raised.value)

    def local_hook(batch):
        return batch

    cases = [(lambda: _image(coloured_shards, transform=lambda image: image),
              r"its transform= does not pickle \(.*<lambda>'\)"),
             (lambda: _image(coloured_shards, transform=HoldsALock()),
              r"its transform= \(HoldsALock\) does not pickle \(cannot pickle '_thread.lock' object\)"),
             (lambda: _image(coloured_shards, config=dataio.ImageLoaderConfig(batch_transform=local_hook)),
              r"its config\.batch_transform= does not .*local_hook"),
             (lambda: _text(text_shards, batch_transform=local_hook), r"its batch_transform= does not .*local_hook")]
    for build, names in cases:
        with build() as loader, pytest.raises(NotPicklable, match=names) as raised:
            pickle.dumps(loader)
        message = str(raised.value)
        assert "\n" not in message and "does not pickle" in message and "module level" in message, message
        assert isinstance(raised.value, TypeError)  # what code probing picklability catches


def test_a_loader_unpickled_in_another_working_folder_reads_the_folder_it_opened(coloured_shards, image_shards,
                                                                                tmp_path, monkeypatch):
    # Its folder was recorded as given: "out", relative, rebuilt elsewhere read whatever "out" was there.
    monkeypatch.chdir(coloured_shards.parent)
    loader = _image("out", train=False)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "out").symlink_to(image_shards)  # another data set under the same relative name
    monkeypatch.chdir(elsewhere)
    with loader, pickle.loads(pickle.dumps(loader)) as rebuilt:
        assert len(rebuilt.dataset) == len(loader.dataset) == 45
        for a, b in zip(loader, rebuilt, strict=True):
            _same(a, b)
