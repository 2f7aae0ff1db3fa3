"""``dataio bench pairs SRC``: image-text pairs, dataio against open_clip's data pipeline on the same tars.

SRC is img2dataset output (``KEY.jpg``, ``KEY.txt``, ``KEY.json`` in tars); when it is new or empty,
``--photos`` captioned photos of ``--photo-class`` are generated into it first. dataio adopts the tars
(``dataio index`` with a BPE tokenizer trained on the captions, not timed, skipped when SRC already has
a manifest and a tokenizer): the generated ones in place, a user's in ``SRC-indexed`` beside it (``prepare``:
nothing is written into a user's folder). Rows, over the same tars with the same thread count, batch
size, crop size and context length, in one process:

- open_clip's pipeline shape (``pair_baselines.make_open_clip_style``): webdataset, PIL decode,
  RandomResizedCrop(0.9-1.0, bicubic), normalisation and per-sample tokenisation in ``--workers``
  ``DataLoader`` worker processes;
- dataio, stored ids: ``PairLoader`` with ``--workers`` decode threads, the same crop scale and
  normalisation, no flip, the ids stored at index time padded to the context length;
- dataio, tokenised as read: the same with the tokenizer run on the decode threads.

Each loader runs ``--warmup`` untimed epochs, then the loaders take turns epoch by epoch for
``--epochs`` timed epochs each (load from other processes on a shared machine then hits each alike);
a row is the median pairs/s and CPU microseconds per pair (its threads, or its worker processes),
and the pairs each epoch read (every loader reads every pair once an epoch).
"""

from __future__ import annotations

import datetime
import os
import shutil
import statistics
import tarfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from dataio.formats.dataset.manifest import MANIFEST_NAME, read_manifest
from dataio.formats.dataset.wds_shards import scan_tar
from dataio.formats.errors import ConfigError, UsageError
from dataio.formats.file_gate import atomic_writer, open_input
from dataio.formats.kinds import kind_of
from dataio.formats.pairs.synthetic_pair_writers import write_img2dataset
from dataio.formats.pairs.synthetic_pairs import PAIR_PHOTO_CLASSES, SyntheticPairsConfig
from dataio.formats.images.wds_index import IndexConfig, index_shards
from dataio.formats.text.tokenizer_setup import TokenizerConfig
from dataio.pairs.caption_config import CaptionConfig
from dataio.pairs.loader import PairLoader

from dataio.bench.image_baselines import Epoch
from dataio.bench.pair_baselines import OPENAI_MEAN, OPENAI_STD, img2dataset_tars, make_open_clip_style
from dataio.bench.report import format_table, load_average, machine_description, write_results

ROWS = {"open_clip": "open_clip: webdataset + PIL + per-sample tokenizer, DataLoader workers",
        "dataio": "dataio PairLoader, stored ids", "dataio_tokenize": "dataio PairLoader, tokenised as read"}


@dataclass(frozen=True, kw_only=True)
class BenchPairsConfig:
    """Options of the pair benchmark (the module's docstring says what runs)."""

    src: Path
    out: Path = Path("bench/results")
    photos: int = 2048  # generated when src holds no tar
    photo_class: str = "imagenet"
    shard_pairs: int = 256  # at most, per generated tar (every DataLoader worker needs tars of its own)
    batch_size: int = 256
    image_size: int = 224
    context_length: int = 77
    vocab_size: int = 4096  # of the tokenizer trained on the captions at index time
    num_workers: int = field(default_factory=lambda: __import__("os").cpu_count() or 1)
    epochs: int = 3
    warmup: int = 1

    def __post_init__(self) -> None:
        object.__setattr__(self, "src", Path(self.src))
        object.__setattr__(self, "out", Path(self.out))
        if self.photo_class not in PAIR_PHOTO_CLASSES:
            raise ConfigError(f"{{0}} must be one of {', '.join(PAIR_PHOTO_CLASSES)}, got {self.photo_class!r}",
                              "photo_class")
        for name in ("photos", "shard_pairs", "batch_size", "image_size", "num_workers", "epochs"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{{0}} must be >= 1, got {getattr(self, name)}", name)
        if self.warmup < 0 or self.context_length < 2:
            raise ConfigError(f"{{0}} must be >= 0 and {{1}} >= 2, got {self.warmup} and {self.context_length}",
                              "warmup", "context_length")


def prepare(config: BenchPairsConfig, log=print) -> Path:
    """The folder the rows read, checked before anything is written: SRC when it already holds a pair manifest (read,
    never written) or when the tars are generated here (into a new or empty SRC only); a user's tars without a
    manifest are indexed in ``SRC-indexed`` beside it (hard links to the tars; copies across file systems), never
    in SRC: a folder of other tars had a manifest and index files written among them before it was refused."""
    src = config.src
    if src.exists() and not src.is_dir():
        raise UsageError(f"{src} is not a folder: give img2dataset output, or a new or empty folder to generate into")
    if not (src.is_dir() and img2dataset_tars(src)):
        if src.is_dir() and any(src.iterdir()):
            raise UsageError(f"{src} holds no tar and is not empty: give img2dataset output (tars of KEY.jpg, "
                             "KEY.txt), or a new or empty folder to generate captioned photos into")
        log(f"generating {config.photos} captioned {config.photo_class} photos as img2dataset writes them -> {src}")
        per_tar = min(config.shard_pairs, -(-config.photos // (2 * config.num_workers)))  # 2+ tars a worker
        write_img2dataset(src, SyntheticPairsConfig(count=config.photos, photo_class=config.photo_class,
                                                    samples_per_shard=per_tar))
        folder = src  # the bench's own folder: indexed in place
    elif (src / MANIFEST_NAME).is_file():
        folder = src
    else:
        _check_captions(src)
        folder = src.parent / f"{src.name}-indexed"
        if not (folder / MANIFEST_NAME).is_file():
            _linked(src, folder, log)
    if not (folder / MANIFEST_NAME).is_file():
        log(f"dataio index {folder} --train-tokenizer bpe --vocab-size {config.vocab_size} (not timed)")
        index_shards(IndexConfig(shards=(folder,), tokenizer=TokenizerConfig(train="bpe", vocab_size=config.vocab_size),
                                 progress=False, kind="pairs"))
    _, manifest = read_manifest(folder)
    kind = kind_of(manifest)
    if kind.name != "pairs":
        raise UsageError(f"{folder} holds {kind.what}, not image-text pairs: give img2dataset output (tars of KEY.jpg, "
                         "KEY.txt)")
    if not (folder / "tokenizer.json").is_file():
        raise ConfigError(f"{{0}} {folder} was indexed without token ids: index it again with --train-tokenizer bpe "
                          "(or --tokenizer FILE), or give an img2dataset folder that has no manifest yet", "src")
    return folder


def _check_captions(src: Path) -> None:
    """A user's tars must hold captions (``KEY.txt``) beside images, by their member names: refused before anything
    is linked or indexed."""
    found: set[str] = set()
    for tar in img2dataset_tars(src):
        try:
            found |= {c.extension.lower() for components in scan_tar(tar) for c in components}
        except (tarfile.TarError, EOFError, OSError) as e:
            raise UsageError(f"{tar}: not a readable tar ({e})") from None
        if "txt" in found:
            return
    shown = ", ".join(sorted(found)[:8]) or "none"
    raise UsageError(f"{src}: its tars hold no captions (KEY.txt; members: {shown}): not img2dataset image-text pairs")


def _linked(src: Path, folder: Path, log=print) -> None:
    """``folder`` beside SRC holding SRC's tars as hard links (copied where the file system refuses a link)."""
    log(f"indexing {src}'s tars in {folder} (hard links; SRC is not written)")
    folder.mkdir(exist_ok=True)
    for tar in img2dataset_tars(src):
        target = folder / tar.name
        if target.exists():
            continue
        try:
            os.link(tar, target)
        except OSError:  # another file system (EXDEV) or no links: a copy, through the gate
            with open_input(tar) as source, atomic_writer(target) as copy:
                shutil.copyfileobj(source, copy, 1 << 20)


def _dataio(src: Path, config: BenchPairsConfig, tokenizer: Path | None) -> Epoch:
    captions = CaptionConfig(tokenizer=tokenizer, max_length=config.context_length, pad_to_max_length=True)
    loader = PairLoader(src, batch_size=config.batch_size, image_size=config.image_size, num_workers=config.num_workers,
                        normalize=True, mean=OPENAI_MEAN, std=OPENAI_STD, crop_scale=(0.9, 1.0), hflip=0.0,
                        captions=captions)
    loader.stats.stages.clock = time.thread_time  # its stage times in CPU seconds, as the image bench's
    return Epoch(lambda: loader, lambda batch: len(batch["sample_ids"]), loader.close, loader.stats)


def _make(name: str, src: Path, config: BenchPairsConfig) -> Epoch:
    if name == "open_clip":
        return make_open_clip_style(img2dataset_tars(src), batch_size=config.batch_size, size=config.image_size,
                                    num_workers=config.num_workers, tokenizer=src / "tokenizer.json",
                                    context_length=config.context_length)
    return _dataio(src, config, src / "tokenizer.json" if name == "dataio_tokenize" else None)


def _measure(epochs: dict[str, Epoch], config: BenchPairsConfig, log=print) -> dict[str, dict[str, list[float]]]:
    """Warm-up epochs of each loader, then one timed epoch of each in turn, ``config.epochs`` times."""
    try:
        for name, epoch in epochs.items():
            for _ in range(config.warmup):
                epoch()
            log(f"  {name} warmed up")
        out: dict[str, dict[str, list[float]]] = {name: {"pairs_s": [], "cpu_us": [], "pairs": []} for name in epochs}
        for _ in range(config.epochs):
            for name, epoch in epochs.items():
                workers, cpu, start = epoch.worker_cpu(), time.process_time(), time.perf_counter()
                seen = epoch()
                wall = time.perf_counter() - start
                spent = time.process_time() - cpu + epoch.worker_cpu() - workers  # as image_baselines.timed_with_cpu
                out[name]["pairs_s"].append(seen / wall)
                out[name]["cpu_us"].append(1e6 * spent / max(1, seen))
                out[name]["pairs"].append(seen)
        return out
    finally:
        for epoch in epochs.values():
            epoch.close()


def bench_pairs(config: BenchPairsConfig, log=print) -> dict[str, Any]:
    """Run the rows on SRC, print the table and ratio, write ``pairs.json`` and ``pairs.png``."""
    folder, manifest = read_manifest(prepare(config, log))
    tars = img2dataset_tars(folder)
    if len(tars) < config.num_workers:
        log(f"note: {len(tars)} tars for {config.num_workers} DataLoader workers: some idle (webdataset gives each "
            "worker whole tars)")
    log(f"running {', '.join(ROWS)} ({config.num_workers} workers or threads each, an epoch of each in turn) ...")
    measured = _measure({name: _make(name, folder, config) for name in ROWS}, config, log)
    rows = [{"loader": name, "label": ROWS[name], "epochs": runs["pairs_s"],
             "pairs_s": statistics.median(runs["pairs_s"]), "cpu_us_per_pair": statistics.median(runs["cpu_us"]),
             "pairs_per_epoch": sorted(set(runs["pairs"]))}
            for name, runs in measured.items()]
    base = rows[0]
    for row in rows:
        row["vs_open_clip"] = row["pairs_s"] / base["pairs_s"]
        row["cpu_vs_open_clip"] = base["cpu_us_per_pair"] / row["cpu_us_per_pair"]
    sizes = [shard.bytes for shard in manifest.shards]
    result = {"benchmark": "pairs", "date": datetime.date.today().isoformat(), "machine": machine_description(),
              "load_average": load_average(), "num_pairs": manifest.num_samples, "tars": len(tars),
              "mean_pair_kb": sum(sizes) / max(1, manifest.num_samples) / 1e3,
              "config": {k: str(v) if isinstance(v, Path) else v for k, v in asdict(config).items()
                         if k not in ("src", "out")},
              "rows": rows, "ratio": rows[1]["vs_open_clip"], "ratio_tokenised_as_read": rows[2]["vs_open_clip"]}
    log(render(result))
    paths = write_results(config.out, "pairs", result, {r["label"]: r["pairs_s"] for r in rows}, "pairs/s")
    log("wrote " + ", ".join(str(p) for p in paths))
    return result


def render(result: dict[str, Any]) -> str:
    m, c = result["machine"], result["config"]
    head = (f"dataio bench pairs, {result['date']}: {m['cpu']}, {m['cores']} cores, load average "
            f"{result['load_average']}; {result['num_pairs']} img2dataset pairs in {result['tars']} tars "
            f"({result['mean_pair_kb']:.0f} KB a pair); batch {c['batch_size']}, crops {c['image_size']}, context "
            f"{c['context_length']}, {c['num_workers']} workers or threads; median of {c['epochs']} epochs")
    table = format_table(result["rows"], [("label", "loader", "s"), ("pairs_s", "pairs/s", ",.0f"),
                                          ("vs_open_clip", "vs open_clip", ".2f"),
                                          ("cpu_us_per_pair", "CPU us/pair", ",.0f"),
                                          ("cpu_vs_open_clip", "CPU vs open_clip", ".2f"),
                                          ("pairs_per_epoch", "pairs an epoch", "")])
    return "\n".join([head, table,
                      f"compared on this machine ({m['cpu']}, {m['cores']} cores) with open_clip's pipeline on the "
                      f"same tars: dataio (stored ids) ran at {result['ratio']:.2f}x its pairs/s, "
                      f"{result['ratio_tokenised_as_read']:.2f}x tokenising as it reads"])
