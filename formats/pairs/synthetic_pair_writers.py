"""The three layouts caption data comes in, written from ``synthetic_pairs``' generated pairs.

- ``write_img2dataset``: what img2dataset's webdataset output holds: ``00000.tar`` ... with
  ``KEY.jpg`` (or ``.png``/``.webp``), ``KEY.txt`` and ``KEY.json`` per sample (members in the order
  webdataset's ``TarWriter`` writes them), a ``00000.parquet`` of every row's metadata beside each tar
  (failed downloads included: in the Parquet file only) and ``00000_stats.json``. Keys, columns and
  types are img2dataset's (``downloader.py``: ``compute_key``, the schema; ``writer.py``).
- ``write_hub_parquet``: a Hub dataset's ``data/train-00000-of-0000N.parquet``: an image column of
  ``{"bytes", "path"}`` structs and a caption column, with the ``huggingface`` schema metadata that
  ``datasets`` writes (``Image`` and ``Value("string")`` features), 100-row row groups as ``datasets``
  writes image data.
- ``write_caption_folder``: a fine-tuning folder: ``NAME.jpg`` beside ``NAME.txt``.

Tars and Parquet files appear whole or not at all (``atomic_writer``). Each writer returns what it wrote:
the good samples' keys and captions, and the bad pairs asked for (``SyntheticPairsConfig.bad_pairs``).
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import webdataset as wds

from dataio.formats.errors import ConfigError, UsageError
from dataio.formats.files import atomic_writer, write_atomic
from dataio.formats.file_gate import write_new
from dataio.formats.pairs.synthetic_pairs import Pair, SyntheticPairsConfig, huge_caption, make_pair, not_utf8

OOM_SHARD_COUNT = 5  # img2dataset's default: shard names of five digits
TAR_MTIME = 1_700_000_000  # fixed member times: the same seed writes the same bytes
HUB_ROW_GROUP = 100  # rows per row group, as datasets writes image columns (and img2dataset its metadata)
# img2dataset's metadata columns after the input's ("caption", "url"), with sha256 as compute_hash's default
META_SCHEMA = pa.schema([
    ("caption", pa.string()), ("url", pa.string()), ("key", pa.string()), ("status", pa.string()),
    ("error_message", pa.string()), ("width", pa.int32()), ("height", pa.int32()), ("original_width", pa.int32()),
    ("original_height", pa.int32()), ("exif", pa.string()), ("sha256", pa.string()),
])
NOT_IN_HUB_PARQUET = ("caption_not_utf8", "json_not_json")  # a string column holds UTF-8; there is no .json
NOT_IN_FOLDER = ("json_not_json",)


@dataclass
class PairsWritten:
    """What a writer wrote: ``captions`` of the good samples by key, ``bad`` kinds by key, the files."""

    captions: dict[str, str] = field(default_factory=dict)
    bad: dict[str, str] = field(default_factory=dict)
    failed: list[str] = field(default_factory=list)  # img2dataset: keys of failed downloads (Parquet rows only)
    files: list[Path] = field(default_factory=list)


def compute_key(key: int, shard_id: int, samples_per_shard: int) -> str:
    """img2dataset's sample key: ``shard_id * 10**oom + key``, zero-padded to ``oom + 5`` digits."""
    oom_sample = math.ceil(math.log10(samples_per_shard))
    return f"{10 ** oom_sample * shard_id + key:0{oom_sample + OOM_SHARD_COUNT}d}"


def _output(root: str | Path) -> Path:
    root = Path(root)
    if root.exists() and not root.is_dir():
        raise UsageError(f"output {root} exists and is not a folder")
    root.mkdir(parents=True, exist_ok=True)
    return root


def _refuse(config: SyntheticPairsConfig, impossible: tuple[str, ...], layout: str) -> None:
    wrong = [kind for kind in config.bad_pairs if kind in impossible]
    if wrong:
        raise ConfigError(f"{{0}} {wrong}: not possible in {layout}", "bad_pairs")


def _meta(pair: Pair, key: str, caption: str, url: str) -> dict:
    width, height = pair.size
    return {"caption": caption, "url": url, "key": key, "status": "success", "error_message": None,
            "width": width, "height": height, "original_width": width, "original_height": height,
            "exif": "{}", "sha256": hashlib.sha256(pair.image).hexdigest()}


def _failed_meta(key: str, caption: str, url: str) -> dict:
    return {"caption": caption, "url": url, "key": key, "status": "failed_to_download",
            "error_message": "HTTP Error 404: Not Found", "width": None, "height": None, "original_width": None,
            "original_height": None, "exif": None, "sha256": None}


def _failed(config: SyntheticPairsConfig, index: int) -> bool:
    """Whether row ``index`` is a failed download: a share ``failed_fraction`` of the rows, spread evenly."""
    f = config.failed_fraction
    return f > 0 and math.floor((index + 1) * f) > math.floor(index * f)


def write_img2dataset(root: str | Path, config: SyntheticPairsConfig) -> PairsWritten:
    """img2dataset's webdataset output for ``config.count`` input rows (see the module docstring)."""
    root, written = _output(root), PairsWritten()
    bad = config.bad_indices()
    for shard_id, start in enumerate(range(0, config.count, config.samples_per_shard)):
        began = time.time()
        name = f"{shard_id:0{OOM_SHARD_COUNT}d}"
        rows, successes = [], 0
        with atomic_writer(root / f"{name}.tar") as f:
            tar = wds.TarWriter(f, mtime=TAR_MTIME)
            for index in range(start, min(start + config.samples_per_shard, config.count)):
                key = compute_key(index - start, shard_id, config.samples_per_shard)
                url = f"https://images.example.com/{config.seed}/{index}.{config.image_format}"
                pair = make_pair(index, config)
                kind = bad.get(index)
                caption = huge_caption(pair.caption) if kind == "huge_caption" else pair.caption
                if _failed(config, index) and kind is None:
                    rows.append(_failed_meta(key, caption, url))
                    written.failed.append(key)
                    continue
                meta = _meta(pair, key, caption, url)
                sample = {"__key__": key, config.image_format: pair.image, "txt": caption.encode("utf-8"),
                          "json": json.dumps(meta, indent=4).encode("utf-8")}
                _spoil(sample, kind, pair, config.image_format)
                tar.write(sample)
                rows.append(meta)
                successes += 1
                if kind is None:
                    written.captions[key] = caption
                else:
                    written.bad[key] = kind
            tar.close()
        with atomic_writer(root / f"{name}.parquet") as f:
            pq.write_table(pa.Table.from_pylist(rows, schema=META_SCHEMA), f, row_group_size=HUB_ROW_GROUP)
        stats = {"count": len(rows), "successes": successes, "failed_to_download": len(rows) - successes,
                 "failed_to_resize": 0, "duration": time.time() - began, "start_time": began, "end_time": time.time(),
                 "status_dict": {"success": successes, "HTTP Error 404: Not Found": len(rows) - successes}}
        write_atomic(root / f"{name}_stats.json", json.dumps(stats, indent=4).encode())
        written.files += [root / f"{name}.tar", root / f"{name}.parquet"]
    return written


def _spoil(sample: dict, kind: str | None, pair: Pair, image_format: str) -> None:
    """Make ``sample`` (a tar sample's members) the bad pair ``kind``."""
    if kind == "caption_not_utf8":
        sample["txt"] = not_utf8(pair.caption)
    elif kind == "empty_caption":
        sample["txt"] = b""
    elif kind == "missing_caption":
        del sample["txt"]
    elif kind == "json_not_json":
        sample["json"] = b'{"caption": "unterminated'
    elif kind == "missing_image":
        del sample[image_format]
    elif kind == "truncated_image":
        sample[image_format] = pair.image[:len(pair.image) // 3]


def write_hub_parquet(root: str | Path, config: SyntheticPairsConfig, *, image_column: str = "image",
                      caption_column: str = "caption", split: str = "train") -> PairsWritten:
    """A Hub caption dataset: ``root/data/{split}-00000-of-0000N.parquet`` (see the module docstring).

    Keys are ``FILE:ROW`` (the file's name and the row in it). A missing image is a null struct, a missing
    caption a null string.
    """
    _refuse(config, NOT_IN_HUB_PARQUET, "a Hub Parquet file")
    if image_column == caption_column:
        raise ConfigError("{0} and {1} must differ", "image_column", "caption_column")
    data, written = _output(Path(root) / "data"), PairsWritten()
    bad = config.bad_indices()
    files = math.ceil(config.count / config.samples_per_shard)
    features = {image_column: {"_type": "Image"}, caption_column: {"dtype": "string", "_type": "Value"}}
    schema = pa.schema([(image_column, pa.struct([("bytes", pa.binary()), ("path", pa.string())])),
                        (caption_column, pa.string())],
                       metadata={"huggingface": json.dumps({"info": {"features": features}})})
    for file_id, start in enumerate(range(0, config.count, config.samples_per_shard)):
        name = f"{split}-{file_id:05d}-of-{files:05d}.parquet"
        images, captions = [], []
        for row, index in enumerate(range(start, min(start + config.samples_per_shard, config.count))):
            pair, kind = make_pair(index, config), bad.get(index)
            path = f"{index:08d}.{config.image_format}"
            image: dict | None = {"bytes": pair.image, "path": path}
            caption: str | None = pair.caption
            if kind == "empty_caption":
                caption = ""
            elif kind == "missing_caption":
                caption = None
            elif kind == "huge_caption":
                caption = huge_caption(pair.caption)
            elif kind == "missing_image":
                image = None
            elif kind == "truncated_image":
                image = {"bytes": pair.image[:len(pair.image) // 3], "path": path}
            images.append(image)
            captions.append(caption)
            key = f"{name}:{row}"
            if kind is None:
                written.captions[key] = pair.caption
            else:
                written.bad[key] = kind
        table = pa.Table.from_arrays([pa.array(images, schema.field(0).type), pa.array(captions, pa.string())],
                                     schema=schema)
        with atomic_writer(data / name) as f:
            pq.write_table(table, f, row_group_size=HUB_ROW_GROUP)
        written.files.append(data / name)
    return written


def write_caption_folder(root: str | Path, config: SyntheticPairsConfig) -> PairsWritten:
    """A folder of ``NAME.<image_format>`` pictures, each with its caption in ``NAME.txt`` (keys: NAME).

    A missing image leaves the ``.txt`` alone; a missing caption, the picture alone.
    """
    _refuse(config, NOT_IN_FOLDER, "a caption folder")
    root, written = _output(root), PairsWritten()
    bad = config.bad_indices()
    for index in range(config.count):
        pair, kind, name = make_pair(index, config), bad.get(index), f"{index:08d}"
        image, caption = pair.image, pair.caption.encode("utf-8")
        if kind == "caption_not_utf8":
            caption = not_utf8(pair.caption)
        elif kind == "empty_caption":
            caption = b""
        elif kind == "huge_caption":
            caption = huge_caption(pair.caption).encode("utf-8")
        elif kind == "truncated_image":
            image = image[:len(image) // 3]
        if kind != "missing_image":
            write_new(root / f"{name}.{config.image_format}", image)
            written.files.append(root / f"{name}.{config.image_format}")
        if kind != "missing_caption":
            write_new(root / f"{name}.txt", caption)
            written.files.append(root / f"{name}.txt")
        if kind is None:
            written.captions[name] = pair.caption
        else:
            written.bad[name] = kind
    return written
