"""Hostile inputs to the pair loader: tampered sample tables and .json locations, tokenizers that are not files
or are huge, tokenizer names holding credentials."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from dataio import ImageLoader
from dataio.errors import ConfigError, SampleError
from dataio.formats.dataset.manifest import ManifestError
from dataio.pairs.caption_config import CaptionConfig
from tests.pair_tamper import TAMPERED_ROW, tampered

SECRET = "s3cr3tPASSWORD42"


def test_a_pair_table_of_the_wrong_types_is_refused_when_the_loader_is_built(pair_tars, tmp_path):
    """Before: int64 ids failed at the first batch with the C collate's TypeError, a caption column of integers
    with pyarrow's 'Array chunks must all be same type', a missing json_offset with a KeyError."""
    for kind, column in (("ids_of_int64", "'input_ids'"), ("caption_of_integers", "'caption'"),
                         ("no_json_offset", "'json_offset'")):
        folder = tampered(pair_tars, tmp_path / kind, kind)
        with pytest.raises(ManifestError, match=f"{folder / 'samples.arrow'}: .*{column}"):
            ImageLoader(folder, batch_size=8, image_size=16)


@pytest.mark.parametrize("kind, reason", [("json_size_huge", "ValueError: 1,099,511,627,776 bytes, larger than"),
                                          ("json_past_the_end", "ShardError: .*short read at offset 1099511627776")])
def test_a_json_location_tampered_is_that_samples_error_under_the_policy(pair_tars, tmp_path, kind, reason):
    """Before: a json_size of 1 TiB was a MemoryError (pread asked for it all), a json_offset past the shard's end
    a ShardError that stopped the loader whatever the error policy."""
    folder = tampered(pair_tars, tmp_path / "tars", kind)
    captions = CaptionConfig(json_fields=("url",))
    with pytest.raises(SampleError, match=f"its .json: {reason}"):
        list(ImageLoader(folder, batch_size=8, image_size=16, shuffle=False, captions=captions))
    loader = ImageLoader(folder, batch_size=8, image_size=16, on_error="skip", captions=captions)
    seen = sorted(i for batch in loader for i in batch["sample_ids"][~batch["repeated"]].tolist())
    assert seen == [i for i in range(40) if i != TAMPERED_ROW] and len(loader.stats.errors) == 1


BUILD = ("import sys; from dataio import ImageLoader; from dataio.pairs.caption_config import CaptionConfig\n"
         "try:\n    ImageLoader(sys.argv[1], batch_size=8, image_size=16, captions=CaptionConfig(tokenizer=sys.argv[2]))\n"
         "except Exception as e:\n    print(type(e).__name__, e)")


def built(folder: Path, tokenizer: str | Path) -> str:
    """What building a loader over ``folder`` with ``tokenizer`` raised: ``NAME message`` (a subprocess with a
    timeout: Tokenizer.from_file holds the GIL while it blocks, so a thread could not be waited on)."""
    done = subprocess.run([sys.executable, "-c", BUILD, str(folder), str(tokenizer)], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_a_tokenizer_that_is_a_fifo_or_huge_is_refused_at_once_naming_it(pair_tars, tmp_path):
    """Before: Tokenizer.from_file blocked for ever on a FIFO, and read a 300 MB file whole before failing."""
    os.mkfifo(tmp_path / "fifo.json")
    assert built(pair_tars, tmp_path / "fifo.json") == f"ConfigError tokenizer: tokenizer {tmp_path}/fifo.json is " \
                                                       "not a regular file"
    with open(tmp_path / "huge.json", "wb") as f:
        f.truncate(300 << 20)  # sparse: nothing written
    assert "file too large: 314,572,800 bytes (limit 268,435,456)" in built(pair_tars, tmp_path / "huge.json")


def test_a_tokenizer_url_with_credentials_is_never_shown(pair_tars):
    """Before: repr(CaptionConfig) and the loader's error showed 'https://alice:PASSWORD@...'."""
    url = f"https://alice:{SECRET}@hub.example.com/tokenizer.json"
    config = CaptionConfig(tokenizer=url)
    assert SECRET not in repr(config) and "https://***@hub.example.com/tokenizer.json" in repr(config)
    with pytest.raises(ConfigError, match="does not exist") as error:
        ImageLoader(pair_tars, batch_size=8, image_size=16, captions=config)
    assert SECRET not in str(error.value)


def test_a_caption_that_gives_no_token_is_that_samples_error(pair_tars):
    """Before: a row of no token (a tokenizer knowing none of its characters) was yielded with an all-zero
    attention mask, which makes a text tower's attention softmax NaN, silently."""
    from tokenizers import Tokenizer, models

    only_q = Tokenizer(models.BPE({"q": 0}, []))  # no unk token: every other character is dropped
    captions = CaptionConfig(tokenizer=only_q, text=True)
    with pytest.raises(SampleError, match="caption gives no token ids"):
        list(ImageLoader(pair_tars, batch_size=8, image_size=16, shuffle=False, captions=captions))
    loader = ImageLoader(pair_tars, batch_size=8, image_size=16, on_error="skip", captions=captions)
    kept = [c for batch in loader for c, rep in zip(batch["caption"], batch["repeated"].tolist(), strict=True)
            if not rep]
    assert kept and all("q" in c for c in kept)
    assert len(loader.stats.errors) == 40 - len(kept)
    assert all(e["reason"] == "caption gives no token ids (none stored, or none from the tokenizer)"
               for e in loader.stats.errors)


def test_a_mixture_of_pairs_and_classes_is_refused_naming_the_kinds(pair_tars, image_shards):
    """Before: 'sources ['pairs'] have labels without class names and ['classes'] have class names', which sent
    the user to their class lists; pairs have no labels at all."""
    with pytest.raises(ValueError, match=r"sources \['pairs'\] hold image-text pairs and \['classes'\] images with "
                                         "classes: a mixture's sources must all be one kind"):
        ImageLoader({"pairs": pair_tars, "classes": image_shards}, weights={"pairs": 1, "classes": 1}, batch_size=8,
                    image_size=16)
