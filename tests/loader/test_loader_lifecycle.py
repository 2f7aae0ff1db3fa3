"""Loader state and lifecycle (issue 25 §8): states that are not states, nested passes, closed loaders."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time

import pytest

from dataio import ImageLoader, TextLoader
from dataio.formats.errors import LoaderClosed, PassInProgress


def _image_loader(shards, **options):
    return ImageLoader(shards, batch_size=4, image_size=16, num_workers=1, **options)


def _loaders(coloured_shards, text_shards):
    return [_image_loader(coloured_shards), TextLoader(text_shards, batch_size=4, mode="fixed")]


@pytest.mark.parametrize("state, match", [(None, "must be a dict"), ({}, "empty"), ([1, 2], "must be a dict"),
                                          ({"epoch": "1", "samples_consumed": 0, "seed": 0}, "integer"),
                                          ({"epoch": 0}, "lacks")])
def test_load_state_dict_refuses_what_is_not_a_state(coloured_shards, text_shards, state, match):
    for loader in _loaders(coloured_shards, text_shards):
        with pytest.raises(ValueError, match=match):
            loader.load_state_dict(state)
        loader.close()


def test_a_nested_pass_is_refused_and_the_outer_checkpoint_resumes_exactly(coloured_shards, text_shards):
    for make in (lambda: _image_loader(coloured_shards, shuffle=True, seed=3),
                 lambda: TextLoader(text_shards, batch_size=4, mode="fixed", shuffle=True, seed=3)):
        ids = (lambda b: b.samples.tolist()) if isinstance(make(), ImageLoader) else (lambda b: b["sample_ids"].tolist())
        whole = make()
        passes = whole.batches() if isinstance(whole, ImageLoader) else iter(whole)
        expected = [ids(b) for b in passes]

        loader = make()
        outer = loader.batches() if isinstance(loader, ImageLoader) else iter(loader)
        seen = [ids(next(outer)) for _ in range(2)]
        with pytest.raises(PassInProgress, match="already running"):
            next(iter(loader))  # evaluating on the training loader mid-epoch
        with pytest.raises(PassInProgress):
            loader.load_state_dict(loader.state_dict())
        state = loader.state_dict()
        assert state["epoch"] == 0
        seen.append(ids(next(outer)))
        assert seen == expected[:3]  # the outer pass went on undisturbed

        resumed = make()
        resumed.load_state_dict(state)
        rest = [ids(b) for b in (resumed.batches() if isinstance(resumed, ImageLoader) else iter(resumed))]
        assert rest == expected[2:]  # the checkpoint taken in the outer pass resumes it exactly


def test_a_pass_left_early_lets_the_next_one_start(coloured_shards):
    loader = _image_loader(coloured_shards)
    for _ in loader:
        break
    assert len(list(loader)) == len(loader)


def test_a_closed_loader_says_so(coloured_shards, text_shards):
    for loader in _loaders(coloured_shards, text_shards):
        loader.close()
        with pytest.raises(LoaderClosed, match="closed"):
            next(iter(loader))
        with pytest.raises(LoaderClosed, match="closed"):
            loader.load_state_dict({"epoch": 0, "samples_consumed": 0, "seed": 0})


def test_closed_loader_as_a_user_meets_it(coloured_shards):
    script = textwrap.dedent(f"""
        from dataio import ImageLoader
        loader = ImageLoader({str(coloured_shards)!r}, batch_size=4, image_size=16)
        loader.close()
        for images, labels in loader:
            pass
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1] == ("dataio.formats.errors.LoaderClosed: ImageLoader is closed: "
                                                    "build a new one to read again")


@pytest.mark.parametrize("workers", [0, 2])
def test_close_during_a_pass_ends_it_in_one_line(coloured_shards, text_shards, workers):
    """``close()`` in the loop's body, or from another thread while the loop waits for a batch: the pass read on
    (the closed files: an IndexError; the shut pool: "cannot schedule new futures after shutdown"); now the pass
    ends with ``LoaderClosed`` naming the loader and its data set."""
    loaders = [ImageLoader(coloured_shards, batch_size=4, image_size=16, num_workers=workers)]
    if not workers:
        loaders.append(TextLoader(text_shards, batch_size=4, mode="fixed"))
    for loader in loaders:
        batches = iter(loader)
        next(batches)
        loader.close()
        with pytest.raises(LoaderClosed, match=rf"^{type(loader).__name__} was closed during a pass over "):
            next(batches)
    slow = ImageLoader(coloured_shards, batch_size=4, image_size=16, num_workers=workers, train=True)
    read = slow.source.start_batch

    def slowly(*args):
        begun = read(*args)
        begun.tasks = [lambda task=task: (time.sleep(0.3), task())[1] for task in begun.tasks]
        return begun

    slow.source.start_batch = slowly
    closer = threading.Timer(0.5, slow.close)
    closer.start()
    with pytest.raises(LoaderClosed, match="^ImageLoader was closed during a pass over "):
        for _ in slow:
            pass
    closer.join()


def test_close_in_the_loop_as_a_user_meets_it(coloured_shards):
    script = textwrap.dedent(f"""
        from dataio import ImageLoader
        loader = ImageLoader({str(coloured_shards)!r}, batch_size=4, image_size=16, num_workers=2)
        for images, labels in loader:
            loader.close()
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1] == (f"dataio.formats.errors.LoaderClosed: ImageLoader was closed "
                                                    f"during a pass over {coloured_shards}: build a new one to "
                                                    "read again")
