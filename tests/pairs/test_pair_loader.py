"""ImageLoader over image-text pair folders: dict batches of the image source's crops and each caption's text."""

from __future__ import annotations

import os
import shutil
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch
from tokenizers import Tokenizer

import dataio
from dataio import ImageLoader, ShardDataset
from dataio.errors import ConfigError, SampleError
from dataio.formats.dataset.manifest import read_manifest
from dataio.formats.dataset.sample_table import read_sample_table
from dataio.formats.pairs.synthetic_pair_writers import write_img2dataset
from dataio.formats.pairs.synthetic_pairs import SyntheticPairsConfig
from dataio.formats.text.tokenizer_setup import TokenizerConfig
from dataio.pairs.caption_batches import cut_rows
from dataio.pairs.caption_config import CaptionConfig
from tests.pair_fixtures import indexed

COUNT = 40  # pairs in the pair_tars fixture


def table(folder: Path) -> dict[str, list]:
    manifest = read_manifest(folder)[1]
    return read_sample_table(folder / manifest.sample_table, declared=manifest.table_columns()).table.to_pydict()


def real(batch: dict) -> list[int]:
    return batch["sample_ids"][~batch["repeated"]].tolist()


def check_text(batch: dict, rows: dict[str, list]) -> None:
    """Each row's ids (and mask) are its sample's stored ids, padded; its caption and key are its sample's."""
    assert batch["input_ids"].dtype == batch["attention_mask"].dtype == torch.int64
    for row, sample in enumerate(batch["sample_ids"].tolist()):
        length = int(batch["attention_mask"][row].sum())
        assert batch["input_ids"][row, :length].tolist() == rows["input_ids"][sample]
        assert batch["attention_mask"][row, :length].all() and not batch["attention_mask"][row, length:].any()
        if "caption" in batch:
            assert batch["caption"][row] == rows["caption"][sample] and batch["key"][row] == rows["key"][sample]


def test_pair_batches_are_dicts_of_the_images_crops_and_each_captions_text(pair_tars):
    rows = table(pair_tars)
    captions = CaptionConfig(text=True, keys=True, json_fields=("url", "original_width"), max_length=None)
    loader = ImageLoader(pair_tars, batch_size=8, image_size=32, train=False, num_workers=2, captions=captions)
    view = ShardDataset(pair_tars, image_size=32)
    seen = []
    assert loader.pairs and loader.classes == ()
    for batch in loader:
        assert set(batch) == {"image", "input_ids", "attention_mask", "sample_ids", "repeated", "caption", "key", "json"}
        assert batch["image"].shape[1:] == (3, 32, 32) and batch["image"].dtype == torch.uint8
        assert batch["input_ids"].shape[1] % 8 == 0  # padded to the longest row, a multiple of pad_multiple
        check_text(batch, rows)
        for row, sample in enumerate(batch["sample_ids"].tolist()):
            assert torch.equal(batch["image"][row], view[sample]["image"])  # the image loader's eval crop
            url = f"https://images.example.com/7/{int(rows['key'][sample])}.jpg"  # keys: shard * 10 + row
            assert batch["json"][row] == {"url": url, "original_width": rows["width"][sample]}
        seen += real(batch)
    assert sorted(seen) == list(range(COUNT))
    assert (view[3]["caption"], view[3]["key"]) == (rows["caption"][3], rows["key"][3])


def test_train_crops_are_the_image_sources_and_classification_keeps_its_tuples(pair_tars, image_shards):
    options = dict(batch_size=8, image_size=32, seed=4, num_workers=2)
    a, b = list(ImageLoader(pair_tars, **options)), list(ImageLoader(pair_tars, num_workers=0, **{
        k: v for k, v in options.items() if k != "num_workers"}))
    for x, y in zip(a, b, strict=True):  # seeded by the batch, not the thread: the same crops on any thread count
        assert torch.equal(x["image"], y["image"]) and torch.equal(x["input_ids"], y["input_ids"])
    images, labels = next(iter(ImageLoader(image_shards, batch_size=4, image_size=32)))
    assert images.shape == (4, 3, 32, 32) and labels.dtype == torch.int64
    with pytest.raises(ConfigError, match="captions is for image-text pair folders"):
        ImageLoader(image_shards, captions=CaptionConfig())
    with pytest.raises(ConfigError, match="mix .MixUp/CutMix. mixes class labels"):
        ImageLoader(pair_tars, mix=dataio.augment.MixConfig(num_classes=2, mixup_alpha=0.2))


def test_max_length_cuts_rows_keeping_the_eos_and_pads_to_it_on_request(pair_tars):
    rows = table(pair_tars)
    eos = read_manifest(pair_tars)[1].options["tokenizer"]["eos_id"]
    for batch in ImageLoader(pair_tars, batch_size=8, image_size=32, captions=CaptionConfig(max_length=6)):
        assert batch["input_ids"].shape[1] == 6 and bool(batch["attention_mask"].all())  # every caption is longer
        for row, sample in enumerate(batch["sample_ids"].tolist()):
            assert batch["input_ids"][row].tolist() == rows["input_ids"][sample][:5] + [eos]
    batch = next(iter(ImageLoader(pair_tars, batch_size=8, image_size=32,
                                  captions=CaptionConfig(max_length=64, pad_to_max_length=True))))
    assert batch["input_ids"].shape == (8, 64)
    check_text(batch, rows)
    ids, mask = cut_rows(np.array([[1, 5, 6, 2], [1, 7, 2, 0]]), np.array([[1, 1, 1, 1], [1, 1, 1, 0]]),
                         np.array([4, 3]), CaptionConfig(max_length=3), 0, np.array([2, 2]))
    assert ids.tolist() == [[1, 5, 2], [1, 7, 2]] and mask.tolist() == [[1, 1, 1], [1, 1, 1]]


def test_a_tokenizer_runs_on_the_decode_threads_when_no_ids_are_stored(pair_tars, pair_tars_text):
    tokenizer = Tokenizer.from_file(str(pair_tars / "tokenizer.json"))
    captions = CaptionConfig(tokenizer=pair_tars / "tokenizer.json", text=True, max_length=None)
    seen = 0
    for batch in ImageLoader(pair_tars_text, batch_size=8, image_size=32, num_workers=2, captions=captions):
        for row, caption in enumerate(batch["caption"]):
            length = int(batch["attention_mask"][row].sum())
            assert batch["input_ids"][row, :length].tolist() == tokenizer.encode(caption).ids
            seen += 1
    assert seen == COUNT
    batch = next(iter(ImageLoader(pair_tars_text, batch_size=8, image_size=32)))  # no ids, no tokenizer: the text
    assert set(batch) == {"image", "caption", "sample_ids", "repeated"} and all(isinstance(c, str) for c in batch["caption"])
    with pytest.raises(ConfigError, match="not a tokenizers JSON file"):
        ImageLoader(pair_tars_text, captions=CaptionConfig(tokenizer=pair_tars / "manifest.json"))


@pytest.fixture
def damaged_pairs(pair_tars, tmp_path) -> tuple[Path, str, str]:
    """A copy of the pair tars with one image cut short (its checksum then fails) and one .json overwritten."""
    folder = tmp_path / "tars"
    shutil.copytree(pair_tars, folder)
    rows = table(folder)
    tars = sorted(folder.glob("*.tar"))
    with open(tars[rows["shard"][5]], "r+b") as tar:
        os.pwrite(tar.fileno(), b"\0" * 64, rows["offset"][5] + 100)
    with open(tars[rows["shard"][9]], "r+b") as tar:
        os.pwrite(tar.fileno(), b"!" * rows["json_size"][9], rows["json_offset"][9])
    return folder, rows["key"][5], rows["key"][9]


def test_bad_pairs_read_are_named_under_raise_and_only_they_are_lost_under_skip(damaged_pairs):
    folder, image_key, json_key = damaged_pairs
    captions = CaptionConfig(json_fields=("url",))
    with pytest.raises(SampleError, match=f"sample '{image_key}' in shard .*: ValueError: checksum mismatch"):
        list(ImageLoader(folder, batch_size=8, image_size=32, shuffle=False, captions=captions))
    loader = ImageLoader(folder, batch_size=8, image_size=32, on_error="skip", captions=captions)
    seen = [i for batch in loader for i in real(batch)]
    rows = table(folder)
    assert sorted(rows["key"][i] for i in range(COUNT) if i not in seen) == sorted([image_key, json_key])
    reasons = {e["key"]: e["reason"] for e in loader.stats.errors}
    assert reasons[json_key].startswith("its .json: JSONDecodeError") and len(reasons) == 2
    assert len(list(ImageLoader(folder, batch_size=8, image_size=32, on_error="skip"))) == 5  # json unread: kept


@pytest.mark.parametrize("before, after", [(1, 1), (2, 2), (2, 3)])
def test_a_mid_epoch_resume_reads_the_rest_exactly_on_any_world_with_equal_batches(pair_tars, before, after):
    options = dict(batch_size=4, image_size=32, seed=5, num_workers=1)
    full = [ImageLoader(pair_tars, world_size=before, rank=r, **options) for r in range(before)]
    iterators = [iter(loader) for loader in full]
    read = Counter(i for it in iterators for _ in range(2) for i in real(next(it)))
    state = full[0].state_dict()
    rest, steps = [], set()
    for rank in range(after):
        resumed = ImageLoader(pair_tars, world_size=after, rank=rank, **options)
        resumed.load_state_dict(state)
        rest.append(list(resumed))
        steps.add(len(rest[-1]))
    assert len(steps) == 1  # equal batches per rank
    if before == after:
        for rank, it in enumerate(iterators):
            for a, b in zip(it, rest[rank], strict=True):
                assert real(a) == real(b) and torch.equal(a["image"], b["image"])
                assert torch.equal(a["input_ids"], b["input_ids"])
    remaining = Counter(i for batches in rest for batch in batches for i in real(batch))
    assert set(read) | set(remaining) == set(range(COUNT)) and not set(read) & set(remaining)


@pytest.fixture(scope="module")
def clean_pairs(pair_tars, tmp_path_factory) -> Path:
    """A small second source: 12 pairs of other pictures, indexed with the pair_tars tokenizer."""
    folder = tmp_path_factory.mktemp("clean") / "tars"
    write_img2dataset(folder, SyntheticPairsConfig(count=12, samples_per_shard=6, seed=21))
    return indexed(folder, TokenizerConfig(path=pair_tars / "tokenizer.json"))


def test_a_mixture_of_a_large_noisy_source_and_a_small_clean_one_by_weight_and_schedule(pair_tars, clean_pairs):
    sources = {"noisy": pair_tars, "clean": clean_pairs}
    rows = {"noisy": table(pair_tars), "clean": table(clean_pairs)}
    loader = ImageLoader(sources, weights={"noisy": 0.75, "clean": 0.25}, epoch_length=32, batch_size=8,
                         image_size=32, captions=CaptionConfig(text=True))
    counts = Counter()
    for batch in loader:
        for row, sample in enumerate(batch["sample_ids"].tolist()):
            name = "noisy" if sample < COUNT else "clean"
            counts[name] += 1
            index = sample if name == "noisy" else sample - COUNT
            length = int(batch["attention_mask"][row].sum())
            assert batch["input_ids"][row, :length].tolist() == rows[name]["input_ids"][index]
            assert batch["caption"][row] == rows[name]["caption"][index]
    assert counts == {"noisy": 24, "clean": 8}
    scheduled = ImageLoader(sources, weights=[(0, {"noisy": 1.0, "clean": 0.0}), (16, {"noisy": 0.0, "clean": 1.0})],
                            epoch_length=32, batch_size=8, image_size=32, shuffle=False)
    ids = [batch["sample_ids"].tolist() for batch in scheduled]  # noisy ramping down to clean over 16 samples
    assert sum(s < COUNT for s in ids[0]) >= 6 and all(s >= COUNT for s in ids[-1])


def test_sources_tokenised_with_other_tokenizers_are_refused_unless_the_loader_tokenises(pair_tars, tmp_path):
    folder = tmp_path / "other"
    write_img2dataset(folder, SyntheticPairsConfig(count=6, samples_per_shard=6, seed=3))
    indexed(folder, TokenizerConfig(train="bpe", vocab_size=290))
    sources, weights = {"a": pair_tars, "b": folder}, {"a": 1.0, "b": 1.0}
    with pytest.raises(ConfigError, match="'b' was tokenised with another tokenizer"):
        ImageLoader(sources, weights=weights)
    loader = ImageLoader(sources, weights=weights, image_size=32, captions=CaptionConfig(
        tokenizer=pair_tars / "tokenizer.json"))
    assert sum(len(batch["sample_ids"]) for batch in loader) == COUNT + 6


def test_bucketing_by_caption_length_pads_less_and_resumes_exactly(pair_tars):
    options = dict(batch_size=4, image_size=32, seed=2, num_workers=1)

    def padding(loader: ImageLoader) -> float:
        masks = [batch["attention_mask"] for batch in loader]
        return 1 - sum(int(m.sum()) for m in masks) / sum(m.numel() for m in masks)

    plain = padding(ImageLoader(pair_tars, captions=CaptionConfig(pad_multiple=1), **options))
    bucketed = ImageLoader(pair_tars, captions=CaptionConfig(pad_multiple=1, bucket=True), **options)
    assert padding(bucketed) < plain / 2, (padding(bucketed), plain)
    epoch = list(ImageLoader(pair_tars, captions=CaptionConfig(bucket=True, pad_multiple=1), **options))
    assert sorted(i for batch in epoch for i in real(batch)) == list(range(COUNT))
    cut = ImageLoader(pair_tars, captions=CaptionConfig(bucket=True, pad_multiple=1), **options)
    first = iter(cut)
    next(first), next(first)
    resumed = ImageLoader(pair_tars, captions=CaptionConfig(bucket=True, pad_multiple=1), **options)
    resumed.load_state_dict(cut.state_dict())
    assert [real(b) for b in resumed] == [real(b) for b in first] == [real(b) for b in epoch[2:]]


def test_shard_dataset_and_the_drop_in_give_dicts(pair_tars):
    rows = table(pair_tars)
    dataset = ShardDataset(pair_tars)
    sample = dataset[7]
    assert set(sample) == {"image", "caption", "key", "input_ids"} and sample["caption"] == rows["caption"][7]
    assert sample["image"].dtype == torch.uint8 and sample["image"].shape[0] == 3
    upper = ShardDataset(pair_tars, image_size=32, target_transform=str.upper)
    batch = next(iter(torch.utils.data.DataLoader(upper, batch_size=4)))  # torch's default_collate: lists of text
    assert batch["image"].shape == (4, 3, 32, 32) and batch["caption"] == [c.upper() for c in rows["caption"][:4]]
    loader = dataio.DataLoader(pair_tars, batch_size=8, shuffle=True, image_size=32)
    batch = next(iter(loader))
    assert batch["image"].dtype == torch.float32 and batch["image"].is_contiguous()  # the drop-in's torchvision output
    check_text(batch, rows)
    assert sum(len(b["sample_ids"]) for b in dataio.DataLoader(dataset, batch_size=8, image_size=32)) == COUNT


def test_the_dali_decoder_reads_pairs_too(pair_tars):
    pytest.importorskip("nvidia.dali")
    options = dict(batch_size=8, image_size=32, train=False, shuffle=False, num_workers=2)
    turbo = list(ImageLoader(pair_tars, decoder="turbo", **options))
    loader = ImageLoader(pair_tars, decoder="dali", **options)
    assert loader.decoder == "dali"
    for a, b in zip(list(loader), turbo, strict=True):
        assert torch.equal(a["input_ids"], b["input_ids"]) and a["image"].shape == b["image"].shape
        assert (a["image"].float() - b["image"].float()).abs().mean() < 3.0


def test_batch_transform_gets_the_dict(pair_tars):
    def add_length(batch: dict) -> dict:
        return {**batch, "length": batch["attention_mask"].sum(1)}

    for batch in ImageLoader(pair_tars, batch_size=8, image_size=32, batch_transform=add_length):
        assert torch.equal(batch["length"], batch["attention_mask"].sum(1))
    with pytest.raises(ConfigError, match="batch_transform returned input_ids with 7 rows for a batch of 8"):
        list(ImageLoader(pair_tars, batch_size=8, image_size=32,
                         batch_transform=lambda b: {**b, "input_ids": b["input_ids"][1:]}))


def test_imageloader_over_pairs_still_reads_them_with_a_future_warning_from_any_module(pair_tars, coco_shards):
    """The faces moved (PairLoader, DetectionLoader); a script's ImageLoader(captions=/targets=) keeps working, and
    says so in one line wherever it is called (a DeprecationWarning shows only for calls from __main__)."""
    with pytest.warns(FutureWarning, match="ImageLoader over image-text pairs is deprecated: read .* with "
                                           r"dataio.PairLoader\(\.\.\., captions=\.\.\.\)"):
        old = ImageLoader(pair_tars, batch_size=8, image_size=32, seed=1, captions=CaptionConfig(max_length=12))
    new = dataio.PairLoader(pair_tars, batch_size=8, image_size=32, seed=1, captions=CaptionConfig(max_length=12))
    for a, b in zip(old, new, strict=True):
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a if isinstance(a[k], torch.Tensor))
    with pytest.warns(FutureWarning, match=r"dataio.DetectionLoader\(\.\.\., targets=\.\.\.\)"):
        ImageLoader(coco_shards, batch_size=2, image_size=32).close()
