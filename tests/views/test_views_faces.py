"""How scripts reach multi-crop views: DINO's loop over ``dataio.DataLoader``, configs from argparse or OmegaConf,
a hook adding DINOv2's fields, ``views=`` on a classification folder, and a views folder evaluated as images
(a new user's report, issue 41; each of these failed before)."""

from __future__ import annotations

import pytest
import torch

import dataio
from dataio.augment.view_params import ViewRecipe
from dataio.errors import ConfigError

SMALL = dict(global_size=32, local_size=16, local_crops=3)


def test_dino_unpacks_views_and_labels_from_the_dataloader_face(views_shards, coloured_shards):
    """main_dino.py: ``for it, (images, _) in enumerate(data_loader)``, ``teacher(images[:2])``."""
    for folder, options in ((views_shards, {}), (coloured_shards, {"views": dataio.ViewsConfig(**SMALL)})):
        loader = dataio.DataLoader(folder, batch_size=8, shuffle=True, **{"views": dataio.ViewsConfig(**SMALL),
                                                                           **options})
        assert isinstance(loader, dataio.ViewsLoader)
        for images, labels in loader:
            assert len(images) == 5 and images[0].shape == (len(labels), 3, 32, 32)
            assert images[0].dtype == torch.float32 and images[0].is_contiguous()  # as torchvision's pipeline
            assert ((labels == -1).all() if folder == views_shards else (labels >= 0).all())
        assert sorted(i for b in loader.batches() for i in b["sample_ids"].tolist()) == list(range(45))


def test_configs_from_argparse_or_omegaconf_lists_are_taken():
    views = dataio.ViewsConfig(global_scale=[0.4, 1.0], local_scale=[0.05, 0.4], ratio=[0.75, 1.25],
                               global_recipes=[ViewRecipe()])
    assert views.global_scale == (0.4, 1.0) and isinstance(views.global_recipes, tuple)
    assert ViewRecipe(blur_sigma=[0.1, 2.0]).blur_sigma == (0.1, 2.0)
    with pytest.raises(ConfigError, match="global_scale must be two finite numbers"):
        dataio.ViewsConfig(global_scale=[0.4, 1.0, 2.0])


def test_a_hook_adds_fields_of_their_own_size_to_a_dict_batch(coloured_shards):
    def masks(batch: dict) -> dict:  # DINOv2's collate's masks, made by the user: 2N rows
        return {**batch, "collated_masks": torch.zeros(2 * len(batch["sample_ids"]), 4, dtype=torch.bool)}

    loader = dataio.ViewsLoader(coloured_shards, views=dataio.ViewsConfig(**SMALL), batch_size=8, batch_transform=masks)
    assert all(b["collated_masks"].shape[0] == 2 * len(b["sample_ids"]) for b in loader)
    cut = dataio.ViewsLoader(coloured_shards, views=dataio.ViewsConfig(**SMALL), batch_size=8,
                             batch_transform=lambda b: {**b, "label": b["label"][1:]})
    with pytest.raises(ConfigError, match="batch_transform returned label with 7 rows"):  # the loader's own fields
        list(cut)


@pytest.mark.parametrize("option, instead", [("image_size", "global_size"), ("crop_scale", "global_scale"),
                                             ("hflip", "hflip"), ("val_crop_ratio", "global_scale")])
def test_image_options_views_would_ignore_are_refused_naming_the_views_field(coloured_shards, option, instead):
    value = {"image_size": 128, "crop_scale": (0.4, 1.0), "hflip": 0.0, "val_crop_ratio": 1.0}[option]
    with pytest.raises(ConfigError, match=f"^{option} is not for multi-crop views, .*{instead}"):
        dataio.ViewsLoader(coloured_shards, **{option: value})


def test_a_views_folder_is_evaluated_as_images_without_classes(views_shards):
    """kNN monitors and feature extraction: the data set's eval view, as ImageLoader reads it, labels -1."""
    dataset = dataio.ShardDataset(views_shards, image_size=48, normalize=True)
    loader = dataio.DataLoader(dataset, batch_size=8)  # not shuffled: the eval view, in the data set's order
    assert isinstance(loader, dataio.ImageLoader)
    images, labels = next(iter(loader))
    assert images.shape == (8, 3, 48, 48) and (labels == -1).all()
    assert torch.allclose(images[0], dataset[0][0], atol=1e-5)
    assert dataset[0][1] == -1 and dataset.targets == [-1] * 45
