"""The loaders list their parameters (issue 24 §2): the constructor's keywords are the config's fields plus
DataLoader's, with the config's defaults, so editors and type checkers show them; unknown ones name the closest."""

from __future__ import annotations

import dataclasses
import inspect

import pytest

from dataio import ImageLoader, ImageLoaderConfig, TextLoader, TextLoaderConfig
from dataio.formats.errors import ConfigError
from dataio.loader.dataloader_args import DATALOADER_KEYWORDS


@pytest.mark.parametrize("loader, config", [(ImageLoader, ImageLoaderConfig), (TextLoader, TextLoaderConfig)])
def test_constructor_keywords_are_the_config_fields_and_dataloaders(loader, config):
    parameters = inspect.signature(loader.__init__).parameters
    keywords = {name: p for name, p in parameters.items() if p.kind is inspect.Parameter.KEYWORD_ONLY}
    fields = {f.name: f for f in dataclasses.fields(config)}
    assert set(keywords) == set(fields) | set(DATALOADER_KEYWORDS)
    for name, field in fields.items():
        assert keywords[name].default == field.default, name  # no drift between the signature and the config
    assert not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())


def test_a_keyword_replaces_a_config_field_and_its_default_leaves_it(coloured_shards):
    config = ImageLoaderConfig(batch_size=5, image_size=24, seed=3)
    loader = ImageLoader(coloured_shards, config, image_size=16, seed=0)
    assert (loader.config.batch_size, loader.config.image_size, loader.config.seed) == (5, 16, 3)
    loader.close()


@pytest.mark.parametrize("loader, typo, closest", [(ImageLoader, "imagesize", "image_size"),
                                                   (ImageLoader, "num_worker", "num_workers"),
                                                   (TextLoader, "max_token", "max_tokens")])
def test_an_unknown_keyword_names_the_closest(coloured_shards, text_shards, loader, typo, closest):
    source = coloured_shards if loader is ImageLoader else text_shards
    with pytest.raises(ConfigError, match=f"unknown keyword {typo}; did you mean '{closest}'"):
        loader(source, **{typo: 1})
