"""Multi-crop views (``dataio.ViewsLoader``): each image decoded once per epoch into DINO's global and local views,
laid out as DINOv2's collate lays them, each view with its own crop, flip and colour, as seeded as any batch."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

import dataio
from dataio.augment.ibot_masks import IbotMasks
from dataio.augment.view_ops import apply_views
from dataio.augment.view_params import ViewRecipe
from dataio.errors import ConfigError, SampleError
from dataio.formats.dataset.manifest import read_manifest
from dataio.formats.dataset.sample_table import read_sample_table
from dataio.views import view_decode, view_finish
from tests.conftest import index_of

PLAIN = ViewRecipe(jitter=0.0, grayscale=0.0, blur=0.0, solarize=0.0)  # no photometric op: colours stay
SMALL = dict(global_size=32, local_size=16, local_crops=3)


def _views(shards: Path, **options) -> dataio.ViewsLoader:
    views = options.pop("views", dataio.ViewsConfig(**SMALL))
    return dataio.ViewsLoader(shards, views=views, **{"batch_size": 8, "seed": 3, "num_workers": 2, **options})


@pytest.mark.parametrize("normalize, channels_last", [(False, True), (True, True), (True, False)])
def test_the_batch_is_dinov2s_collate_view_major_with_a_view_list_in_dinos_order(coloured_shards, normalize,
                                                                                  channels_last):
    config = dataio.ViewsConfig(global_recipes=(PLAIN,), local_recipe=PLAIN, **SMALL)
    with _views(coloured_shards, views=config, normalize=normalize, channels_last=channels_last) as loader:
        batches = list(loader)
        colour = {i: int(loader.table.path(i).rsplit("img", 1)[1][:3]) for i in range(45)}  # the file's index
    assert sum(len(b["sample_ids"]) for b in batches) == 45 and loader.decodes == 45
    for batch in batches:
        n = len(batch["sample_ids"])
        g, l = batch["collated_global_crops"], batch["collated_local_crops"]
        assert g.shape == (2 * n, 3, 32, 32) and l.shape == (3 * n, 3, 16, 16)
        assert g.dtype == l.dtype == (torch.float32 if normalize else torch.uint8)
        assert g.is_contiguous(memory_format=torch.channels_last if channels_last else torch.contiguous_format)
        assert len(batch["views"]) == 5 and all(v.shape[0] == n for v in batch["views"])
        assert torch.equal(batch["views"][1], g[n:2 * n]) and torch.equal(batch["views"][4], l[2 * n:])
        if normalize:
            continue
        for view, images in enumerate(batch["views"]):  # each view of sample i holds sample i's colour
            found = [index_of(image.numpy()) for image in images]
            assert found == [colour[i] for i in batch["sample_ids"].tolist()], view
        assert batch["label"].tolist() == [colour[i] % 3 for i in batch["sample_ids"].tolist()]  # labels come along


def test_each_image_is_decoded_once_per_epoch_for_all_its_views(real_photo_shards, monkeypatch):
    calls = []
    real = view_decode._jpeg_codec

    class Counting:
        def __getattr__(self, name):
            return getattr(real, name)

        def decode_region(self, *args):
            calls.append(args[0][:64])
            return real.decode_region(*args)

    monkeypatch.setattr(view_decode, "_jpeg_codec", Counting())
    with _views(real_photo_shards, batch_size=16) as loader:
        seen = sum(len(batch["sample_ids"]) for batch in loader)
    assert len(calls) == seen == len(loader.table) == loader.decodes  # one JPEG decode per image, 10 views or not


def test_views_are_the_same_on_any_thread_count_and_change_with_the_epoch(real_photo_shards):
    with _views(real_photo_shards, num_workers=0) as one, _views(real_photo_shards, num_workers=2) as two:
        first = list(one)
        for a, b in zip(first, list(two), strict=True):
            assert torch.equal(a["collated_global_crops"], b["collated_global_crops"])
            assert torch.equal(a["collated_local_crops"], b["collated_local_crops"])
        again = list(one)  # epoch 1: other crops and colours
    assert not torch.equal(first[0]["collated_global_crops"], again[0]["collated_global_crops"])


def test_each_view_takes_its_recipe(real_photo_shards):
    """Global view 1 always blurred, global view 2 solarized sometimes, local views never (DINOv2's recipe)."""
    with _views(real_photo_shards, batch_size=32, views=dataio.ViewsConfig()) as loader:
        source, plan = loader.source, loader.pass_plan()
        blur, solarized, local_solarized = [], [], []
        for index in range(len(plan)):
            begun = source.start_batch(index, plan.batch(index)[0], loader._key(index * 32))
            g = begun.fields["collated_global_crops"].params
            n = len(g) // 2
            blur.append(g.blur[:n].float().mean().item())
            solarized.append(g.solarize[n:].float().mean().item())
            local_solarized.append(begun.fields["collated_local_crops"].params.solarize.float().mean().item())
    assert min(blur) == 1.0 and 0 < np.mean(solarized) < 0.5 and max(local_solarized) == 0.0


def test_the_threads_colours_equal_the_device_finishs_and_the_torch_reference(real_photo_shards):
    """On the CPU the decode threads colour each view with the C kernel; a GPU (or DALI) finish colours the batch
    after the copy: the same draws, the same values (the torch reference within the kernel's 1e-5)."""
    with _views(real_photo_shards, normalize=True) as threads:
        expected = next(iter(threads))
    with _views(real_photo_shards, normalize=True) as device:
        device.source.on_host = False  # what a CUDA device does: uint8 views, coloured after the copy
        got = next(iter(device))
    for name in (view_finish.GLOBAL, view_finish.LOCAL):
        assert torch.equal(expected[name], got[name])
    with _views(real_photo_shards, normalize=True) as reference:
        reference.source.on_host = False
        original = view_finish.apply_views_cpu
        try:
            view_finish.apply_views_cpu = apply_views  # the torch path every device runs
            ref = next(iter(reference))
        finally:
            view_finish.apply_views_cpu = original
    for name in (view_finish.GLOBAL, view_finish.LOCAL):  # augment.views_kernel's stated tolerance
        diff = (expected[name] - ref[name]).abs()
        beyond = diff > 1e-5 * expected[name].abs().clamp(min=1)
        assert beyond.float().mean() < 1e-3  # only values that sit at the solarize threshold, a level apart
        assert float(diff[beyond].max(initial=0.0) if beyond.any() else 0.0) <= 1 / 255 / 0.224 + 1e-4


def test_a_damaged_image_is_named_or_skipped_with_all_its_views(coloured_shards, tmp_path):
    out = tmp_path / "shards"
    shutil.copytree(coloured_shards, out)
    folder, manifest = read_manifest(out)
    table = read_sample_table(folder / manifest.sample_table)
    shard = out / manifest.shards[int(table.shard[5])].file
    data = bytearray(shard.read_bytes())
    data[int(table.offset[5]) + int(table.size[5]) // 2] ^= 0xFF
    shard.write_bytes(bytes(data))
    with pytest.raises(SampleError, match=f"sample '{table.key(5)}' in shard .*checksum mismatch"):
        list(_views(out))
    with _views(out, on_error="skip", shuffle=False) as loader:
        batches = list(loader)
    ids = [i for b in batches for i in b["sample_ids"].tolist()]
    assert ids == [i for i in range(45) if i != 5] and loader.stats.samples_ok == 44
    short = next(b for b in batches if 5 not in b["sample_ids"].tolist() and len(b["sample_ids"]) == 7)
    assert short["collated_global_crops"].shape[0] == 14 and short["collated_local_crops"].shape[0] == 21
    assert all(len(images) == 7 for images in short["views"])


@pytest.mark.parametrize("option", [dict(randaugment=dataio.augment.RandAugmentConfig()),
                                    dict(mix=dataio.augment.MixConfig(num_classes=3, mixup_alpha=0.2)),
                                    dict(crop_on_device=True), dict(transform=lambda x: x)])
def test_the_image_loaders_own_augmentations_are_refused_in_one_line(coloured_shards, option):
    with pytest.raises(ConfigError, match=f"{next(iter(option))} is not for multi-crop views"):
        _views(coloured_shards, **option)


def test_a_seeded_batch_transform_gets_the_views_dict(coloured_shards):
    def hook(batch: dict, generator: torch.Generator) -> dict:
        return {**batch, "noise": torch.rand(len(batch["sample_ids"]), generator=generator)}

    noise = [[b["noise"] for b in _views(coloured_shards, batch_transform=hook)] for _ in range(2)]
    for a, b in zip(*noise, strict=True):
        assert torch.equal(a, b)  # seeded by the batch's key: the same draws on every run
    with pytest.raises(ConfigError, match="batch_transform returned sample_ids with 7 rows"):
        list(_views(coloured_shards, batch_transform=lambda b: {**b, "sample_ids": b["sample_ids"][1:]}))


def test_a_mixture_of_folders_gives_views_of_each(coloured_shards, real_photo_shards):
    with _views({"a": coloured_shards, "b": real_photo_shards}, weights={"a": 1, "b": 1}) as loader:
        batches = list(loader)
        assert set(loader.stats.sources) or True
    assert sum(len(b["sample_ids"]) for b in batches) == len(loader.table)


def test_the_dali_decoder_decodes_each_image_once_into_its_views(real_photo_shards):
    pytest.importorskip("nvidia.dali")
    with _views(real_photo_shards, decoder="dali") as dali, _views(real_photo_shards) as turbo:
        a, b = next(iter(dali)), next(iter(turbo))
        assert dali.decodes == len(a["sample_ids"])
    for name in (view_finish.GLOBAL, view_finish.LOCAL):  # other decoders and resizers: close, not equal
        assert a[name].shape == b[name].shape and (a[name].float() - b[name].float()).abs().mean() < 12


def test_ibot_masks_come_with_the_global_views_and_follow_a_skipped_sample(coloured_shards):
    config = dataio.ViewsConfig(masks=IbotMasks(patch_size=4), **SMALL)
    with _views(coloured_shards, views=config) as loader:
        batch = next(iter(loader))
    n = len(batch["sample_ids"])
    masks = batch["collated_masks"]
    assert masks.shape == (2 * n, (32 // 4) ** 2) and int((masks.sum(1) > 0).sum()) == n  # half the global crops
    assert batch["n_masked_patches"].tolist() == [int(masks.sum())] and batch["upperbound"] > 0
    assert torch.equal(batch["mask_indices_list"], masks.flatten().nonzero().flatten())
