"""Image mixtures (issue 26): exact shares at every prefix, passes without repeats, one combined class map, resume
on any world size after a schedule change, equal batches per rank, augmentation and progressive resizing."""

from __future__ import annotations

import json
import pickle
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

import dataio
from dataio import ImageLoader
from dataio.augment import MixConfig, RandAugmentConfig, ResolutionSchedule
from dataio.formats.dataset.manifest import MANIFEST_NAME
from dataio.formats.errors import ConfigError, DataioError, UsageError
from dataio.formats.images.image_convert import ConvertImagesConfig, convert_images
from dataio.images.contract import check_batch
from dataio.mixtures.blend import slack
from dataio.mixtures.weight_schedule import Targets

OPTIONS = dict(batch_size=8, image_size=16, num_workers=2)
COMBINED = ("c0", "c1", "c2", "x", "c3")  # big's classes, then mid's new one, then small's: first-seen order


def _convert(root: Path, name: str, counts: dict[str, int], shard_samples: int) -> Path:
    """A folder of ``counts[class]`` small JPEGs per class, converted; each image a colour of its own."""
    src = root / f"{name}-src"
    for c, (label, count) in enumerate(counts.items()):
        (src / label).mkdir(parents=True)
        for i in range(count):
            Image.new("RGB", (40 + 8 * (i % 3), 30), (30 * c, 12 * i, 200 - 9 * i)).save(src / label / f"{name}{i}.jpg")
    out = root / name
    convert_images(ConvertImagesConfig(src=src, out=out, max_shard_samples=shard_samples, num_workers=1,
                                       progress=False))
    return out


@pytest.fixture(scope="module")
def sources(coloured_shards, tmp_path_factory) -> dict[str, Path]:
    """big: the 45 coloured images (c0, c1, c2); mid: 18 images (c1, x); small: 5 images (c2, c3)."""
    root = tmp_path_factory.mktemp("image_mixture")
    return {"big": coloured_shards, "mid": _convert(root, "mid", {"c1": 9, "x": 9}, 4),
            "small": _convert(root, "small", {"c2": 2, "c3": 3}, 2)}


def _check_labels(loader: ImageLoader, samples: np.ndarray, labels: torch.Tensor) -> None:
    """Each sample's label names the class folder its image came from (the combined map, checked per sample)."""
    for sample, label in zip(samples.tolist(), labels.tolist(), strict=True):
        assert loader.classes[label] == loader.table.path(sample).split("/")[0], sample


@pytest.mark.parametrize("seed, weights", [(0, {"big": 0.5, "mid": 0.3, "small": 0.2}),
                                           (1, {"big": 0.98, "mid": 0.01, "small": 0.01}),
                                           (2, {"big": 0.1, "mid": 0.1, "small": 0.8}),
                                           (5, {"big": 1, "mid": 2, "small": 3})])
def test_shares_are_exact_at_every_prefix(sources, seed, weights):
    loader = ImageLoader(sources, weights=weights, seed=seed, epoch_length=120, **OPTIONS)
    targets = Targets(loader.config.weights)
    bound = 1 - slack(3) + 1e-9
    got, n = np.zeros(3), 0
    for batch in loader.batches():
        for source in loader.mixture.source_of(batch.samples).tolist():
            got[source] += 1
            n += 1
            owed = np.array([targets.owed(i, n) for i in range(3)])
            assert np.abs(got - owed).max() <= bound, (n, got, owed)
        _check_labels(loader, batch.samples, batch.labels)
    assert n == 120
    assert [loader.stats.sources[name]["samples"] for name in sources] == got.tolist()


def test_each_source_is_read_in_passes_without_repeats(sources):
    loader = ImageLoader(sources, weights={"big": 0.2, "mid": 0.3, "small": 0.5}, epoch_length=50, seed=3, **OPTIONS)
    draws: dict[str, list[int]] = {name: [] for name in sources}
    for _ in range(2):  # the passes run on across the epoch boundary
        for batch in loader.batches():
            for sample, source in zip(batch.samples.tolist(), loader.mixture.source_of(batch.samples).tolist(),
                                      strict=True):
                draws[loader.mixture.names[source]].append(sample - int(loader.mixture.offsets[source]))
    for name, drawn in draws.items():
        size = len(loader.mixture.sources[name].table)
        passes = [drawn[start:start + size] for start in range(0, len(drawn), size)]
        for one in passes:
            assert len(set(one)) == len(one), (name, one)  # no repeat inside a pass
        full = [tuple(one) for one in passes if len(one) == size]
        assert all(sorted(one) == list(range(size)) for one in full)
    small = [tuple(draws["small"][s:s + 5]) for s in range(0, len(draws["small"]) - 4, 5)]
    assert len(small) >= 9 and len(set(small)) > 1  # the small source ran many passes, each reshuffled
    assert loader.mixture_passes()["small"] == len(draws["small"]) // 5


@pytest.mark.parametrize("old_world, new_world", [(1, 1), (2, 2), (2, 3), (3, 2)])
def test_resume_mid_epoch_after_a_schedule_change(sources, old_world, new_world):
    schedule = [(0, {"big": 0.8, "mid": 0.1, "small": 0.1}), (6, {"big": 0.8, "mid": 0.1, "small": 0.1}),
                (14, {"big": 0.2, "mid": 0.3, "small": 0.5})]
    options = dict(OPTIONS, batch_size=4, weights=schedule, epoch_length=70, seed=9)

    def run(world: int, rank: int) -> ImageLoader:
        return ImageLoader(sources, world_size=world, rank=rank, **options)

    whole = np.concatenate([b.samples for b in run(1, 0).batches()])
    steps = 3  # batches each rank takes before the checkpoint: past the schedule's change at 14 samples
    old = [run(old_world, r) for r in range(old_world)]
    passes = [old_loader.batches() for old_loader in old]
    for _ in range(steps):
        for p in passes:
            next(p)
    state = old[0].state_dict()
    assert json.loads(json.dumps(state)) == state and len(json.dumps(state)) < 600
    assert state["samples_consumed"] == steps * 4 * old_world
    counts = [len(list(p)) + steps for p in passes]
    assert len(set(counts)) == 1 and counts[0] == len(old[0])  # equal batches per rank
    new = [run(new_world, r) for r in range(new_world)]
    for loader in new:
        loader.load_state_dict(state)
    rest = [list(loader.batches()) for loader in new]
    assert len({len(r) for r in rest}) == 1 and len({len(loader) for loader in new}) == 1
    consumed = state["samples_consumed"]
    for loader, batches in zip(new, rest, strict=True):
        for batch in batches:
            _check_labels(loader, batch.samples, batch.labels)
    # each batch is a span of the blend, dealt round-robin: the rest, rank by rank per round, is the run's tail
    merged = np.concatenate([b.samples[~b.repeated] for group in zip(*rest, strict=True) for b in group])
    assert merged.tolist() == whole[consumed:].tolist()
    if new_world == old_world:  # the same ranks: the very same batches, crops and all
        again = [list(run(old_world, r).batches())[steps:] for r in range(old_world)]
        for got, expected in zip(rest, again, strict=True):
            assert len(got) == len(expected)
            for a, b in zip(got, expected, strict=True):
                assert torch.equal(a.images, b.images) and torch.equal(a.labels, b.labels)


@pytest.mark.parametrize("world_size", [2, 3])
def test_every_ranks_batches_hold_the_shares(sources, world_size):
    """A batch is a span of the blend on every rank (sample by sample, ranks would alias with its period)."""
    weights = {"big": 0.5, "mid": 0.3, "small": 0.2}
    for rank in range(world_size):
        loader = ImageLoader(sources, weights=weights, world_size=world_size, rank=rank, seed=2, epoch_length=120,
                             **{**OPTIONS, "batch_size": 10})
        for batch in loader.batches():
            if len(batch.labels) == 10:
                counts = np.bincount(loader.mixture.source_of(batch.samples), minlength=3)
                assert np.abs(counts - 10 * np.array([0.5, 0.3, 0.2])).max() <= 2, (rank, counts)


def test_drop_last_gives_every_rank_full_batches_of_distinct_samples(sources):
    options = dict(OPTIONS, weights={"big": 0.5, "mid": 0.3, "small": 0.2}, epoch_length=70, drop_last=True)
    ranks = [list(ImageLoader(sources, world_size=2, rank=r, **options).batches()) for r in range(2)]
    assert [[len(b.labels) for b in batches] for batches in ranks] == [[8] * 4, [8] * 4]
    samples = [b.samples.tolist() for batches in zip(*ranks, strict=True) for b in batches]  # round by round: the order
    whole = np.concatenate([b.samples for b in ImageLoader(sources, **options).batches()]).tolist()
    assert [s for batch in samples for s in batch] == whole[:64]


def test_one_class_map_for_sources_with_different_class_lists(sources):
    loader = ImageLoader(sources, weights={"big": 1, "mid": 1, "small": 1}, epoch_until="all", train=False,
                         **OPTIONS)
    assert loader.classes == COMBINED
    assert loader.class_map == {"big": (0, 1, 2), "mid": (1, 3), "small": (2, 4)}
    by_path = {}
    for batch in loader.batches():
        _check_labels(loader, batch.samples, batch.labels)
        for sample, label in zip(batch.samples.tolist(), batch.labels.tolist(), strict=True):
            by_path[(loader.mixture.names[int(loader.mixture.source_of(np.array([sample]))[0])],
                     loader.table.path(sample))] = label
    # specific samples: small's c3 images are the new class 4, its c2 ones share big's index 2, mid's x is 3
    assert {by_path[("small", f"c3/small{i}.jpg")] for i in range(3)} == {4}
    assert {by_path[("small", f"c2/small{i}.jpg")] for i in range(2)} == {2}
    assert by_path[("mid", "x/mid0.jpg")] == 3 and by_path[("mid", "c1/mid4.jpg")] == 1
    assert by_path[("big", "c1/img001.jpg")] == 1
    assert len({key for key in by_path}) == 45 + 18 + 5  # epoch_until="all": every sample of every source


def test_a_state_from_other_sources_or_weights_is_refused(sources):
    weights = {"big": 0.5, "mid": 0.3, "small": 0.2}
    loader = ImageLoader(sources, weights=weights, **OPTIONS)
    next(iter(loader))
    state = loader.state_dict()
    swapped = {"big": sources["big"], "mid": sources["small"], "small": sources["mid"]}
    for other in (ImageLoader(swapped, weights=weights, **OPTIONS),
                  ImageLoader(sources, weights={"big": 0.4, "mid": 0.4, "small": 0.2}, **OPTIONS),
                  ImageLoader({"big": sources["big"], "mid": sources["mid"]}, weights={"big": 1, "mid": 1}, **OPTIONS),
                  ImageLoader(sources["big"], **OPTIONS)):
        with pytest.raises(ValueError, match="another data set"):
            other.load_state_dict(state)
    same = ImageLoader(sources, weights=weights, **OPTIONS)
    same.load_state_dict(state)  # the same mixture resumes
    assert same.state_dict()["samples_consumed"] == 8


def _without_class_names(folder: Path, out: Path) -> Path:
    """A copy of ``folder`` whose manifest's class list was emptied (labels only)."""
    shutil.copytree(folder, out)
    manifest = json.loads((out / MANIFEST_NAME).read_text())
    manifest["classes"] = []
    (out / MANIFEST_NAME).write_text(json.dumps(manifest))
    return out


def test_a_source_whose_class_list_was_emptied_is_refused_at_open(sources, tmp_path):
    """No converter writes an image manifest without classes; one emptied by hand was read as "labels only" and
    training on it ended in an IndexError (issue 33). Each source is now checked at open (``class_list``)."""
    plain_mid = _without_class_names(sources["mid"], tmp_path / "mid")
    plain_small = _without_class_names(sources["small"], tmp_path / "small")
    for mixture in ({"mid": plain_mid, "small": plain_small}, {"big": sources["big"], "small": plain_small}):
        with pytest.raises(DataioError, match="lists no classes.*the class list was emptied"):
            ImageLoader(mixture, weights={name: 1 for name in mixture}, **OPTIONS)


def test_train_augmentation_with_the_combined_classes(sources):
    options = dict(OPTIONS, image_size=32, weights={"big": 0.5, "mid": 0.3, "small": 0.2}, epoch_length=40,
                   randaugment=RandAugmentConfig(), mix=MixConfig(num_classes=len(COMBINED)), normalize=True, seed=4)
    first = [(i.clone(), t.clone()) for i, t in ImageLoader(sources, **options)]
    loader = ImageLoader(sources, **options)
    for images, targets in loader:
        check_batch(images, targets, loader.config)
    assert sum(len(t) for _, t in first) == 40
    interrupted = ImageLoader(sources, **options)
    iterator = iter(interrupted)
    next(iterator), next(iterator)
    resumed = ImageLoader(sources, **options)
    resumed.load_state_dict(interrupted.state_dict())
    rest = list(resumed)
    assert len(rest) == len(first) - 2
    assert all(torch.equal(a[0], b[0]) and torch.equal(a[1], b[1]) for a, b in zip(first[2:], rest, strict=True))
    with pytest.raises(ConfigError, match="mix.num_classes is 3, fewer than the 5 classes"):
        ImageLoader(sources, **{**options, "mix": MixConfig(num_classes=3)})


def test_progressive_resizing_and_dynamic_batch(sources):
    schedule = ResolutionSchedule(epochs=2, start_size=32, end_size=64, ramp_start=0, ramp_end=1, batch_size=8,
                                  dynamic_batch=True)
    loader = ImageLoader(sources, weights={"big": 0.5, "mid": 0.3, "small": 0.2}, epoch_length=60, schedule=schedule,
                         num_workers=2)
    plan = []
    for epoch in range(2):
        batches = list(loader.batches())
        for batch in batches:
            check_batch(batch.images, batch.labels, loader.config, epoch=epoch)
            _check_labels(loader, batch.samples, batch.labels)
        plan.append((batches[0].images.shape[-1], len(batches[0].labels), len(batches)))
        assert sum(len(b.labels) for b in batches) == 60
    assert plan == [(32, 32, 2), (64, 8, 8)]


def test_eval_mode_reads_each_source_in_order(sources):
    options = dict(OPTIONS, weights={"big": 45, "mid": 18, "small": 5}, epoch_until="all", train=False)
    loader = ImageLoader(sources, **options)
    batches = list(loader.batches())
    samples = np.concatenate([b.samples for b in batches])
    source = loader.mixture.source_of(samples)
    assert sorted(samples.tolist()) == list(range(45 + 18 + 5))  # weights as the sizes, until all: each once
    for i, name in enumerate(loader.mixture.names):  # unshuffled passes: each source's samples in table order
        drawn = samples[source == i] - loader.mixture.offsets[i]
        assert drawn.tolist() == list(range(len(loader.mixture.sources[name].table)))
    again = list(ImageLoader(sources, **options).batches())
    assert all(torch.equal(a.images, b.images) for a, b in zip(batches, again, strict=True))


def test_until_a_source_finishes_a_pass_and_per_source_counts(sources):
    loader = ImageLoader(sources, weights={"big": 0.5, "mid": 0.3, "small": 0.2}, epoch_until="small", seed=1,
                         **OPTIONS)
    total = sum(len(b.labels) for b in loader.batches())
    counts = loader.stats.as_dict()["sources"]
    assert counts["small"] == {"samples": 5}  # the epoch ended with small's pass: images count samples only
    assert sum(entry["samples"] for entry in counts.values()) == total == loader.mixture.epoch_size(0)
    assert loader.mixture_passes()["small"] == 1


def test_dataloader_factory_and_dataset_view(sources, text_shards):
    weights = {"big": 0.5, "mid": 0.3, "small": 0.2}
    loader = dataio.DataLoader(sources, batch_size=8, shuffle=True, weights=weights, epoch_length=24, image_size=16,
                               num_workers=2)
    assert isinstance(loader, ImageLoader) and loader.mixture is not None and loader.config.train
    images, labels = next(iter(loader))
    assert images.dtype == torch.float32 and labels.max() < len(COMBINED)
    with pytest.raises(UsageError, match="one kind of shards"):
        dataio.DataLoader({"images": sources["big"], "text": text_shards}, weights={"images": 1, "text": 1})
    dataset = loader.dataset  # the sources end to end, labels in the combined map
    assert len(dataset) == 45 + 18 + 5 and dataset.classes == COMBINED
    assert dataset.targets == loader.table.label.tolist()
    c3 = next(i for i in range(len(dataset)) if loader.table.path(i).startswith("c3/"))
    assert dataset[c3][1] == 4
    copy = pickle.loads(pickle.dumps(dataset))  # as a DataLoader worker gets it: reopens the sources itself
    image, label = copy[c3]
    assert label == 4 and torch.equal(image, dataset[c3][0])
    copy.close()


def test_bad_mixture_options_name_the_problem(sources):
    with pytest.raises(ValueError, match="weights name"):
        ImageLoader(sources, weights={"big": 1.0})
    with pytest.raises(ValueError, match="same order"):
        ImageLoader(sources, weights={"small": 1, "mid": 1, "big": 1})
    with pytest.raises(ConfigError, match="needs a mixture"):
        ImageLoader(sources["big"], weights={"big": 1.0})
    with pytest.raises(ConfigError, match="give weights"):
        ImageLoader(sources)
    with pytest.raises(ValueError, match="one of epoch_length"):
        ImageLoader(sources, weights={"big": 1, "mid": 1, "small": 1}, epoch_length=10, epoch_until="all")
    with pytest.raises(ValueError, match="'nope' is not a source"):
        ImageLoader(sources, weights={"big": 1, "mid": 1, "small": 1}, epoch_until="nope")
    with pytest.raises(ValueError, match="epoch_length and epoch_until apply to mixtures"):
        ImageLoader(sources["big"], epoch_length=10)
