"""The loaders dataio is compared against, each over the same images.

- ``standard``: what users run today: an ImageFolder-equivalent Dataset
  (PIL open, RGB, torchvision's RandomResizedCrop = crop then antialiased
  bilinear resize, horizontal flip, PILToTensor) under
  ``DataLoader(num_workers=cores)``. torchvision is reproduced with PIL +
  torch, since its wheel does not import on the CPU torch here. In eval mode
  (``train=False``) the transform is torchvision's validation one:
  Resize(size / 0.875) + CenterCrop(size) + PILToTensor, unshuffled.
- ``webdataset``: webdataset's own pipeline, same transform. Its members are
  decoded by ``dataio.formats.dataset.shard_members`` (PIL for the image, ``.cls``),
  not ``.decode("pil")``: webdataset's default decoders unpickle ``.pyd`` and
  ``.pth`` members, so a crafted shard would run code in the bench.
- ``dali_cpu``: a DALI CPU pipeline over the same shards and index files.
- ``shard_dataset``: ``dataio.ShardDataset`` over the shards (dataio's decoder,
  PIL images with ``to_pil=True``) with the standard recipe's very transform,
  under the same ``DataLoader(num_workers=cores)``: the path of a script whose
  transforms dataio does not implement.
- ``dataio_mixture``: ``dataio.ImageLoader`` over a mixture of three sources, the
  same shards under three names with equal weights, against ``dataio``.
- ``machine_limit``: bare single-thread read + full decode + crop-resize of the
  same files, in memory; times the core count it is the machine's limit.

Each ``make_*`` returns an ``Epoch``: a callable that runs one epoch and
returns the number of images, and ``close`` to stop its workers. The bench
runs the epochs of all loaders round-robin, so slow drifts of a shared machine
affect them alike.
"""

from __future__ import annotations

import io
import os
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np
import torch
from PIL import Image

from dataio.augment import crop_boxes
from dataio.formats.dataset import shard_members
from dataio.formats.errors import DataioError
from dataio.formats.images.image_tree import read_regular_file, scan_image_folder, source_path
from dataio.formats.dataset.manifest import read_manifest
from dataio.formats.dataset.sample_table import read_sample_table, sample_checksum
from dataio.images.loader import ImageLoader
from dataio.images.shard_dataset import ShardDataset
from dataio.images.shard_files import ShardFiles
from dataio.images.turbo_decode import decode_crop_into
from dataio.formats.file_gate import read_kernel_text


class TorchvisionStyleTrainTransform:
    """RandomResizedCrop(size) + RandomHorizontalFlip + PILToTensor, on PIL images."""

    def __init__(self, size: int, seed: int = 0) -> None:
        self.size = size
        self.rng = np.random.default_rng(seed)

    def __call__(self, image: Image.Image) -> torch.Tensor:
        box = crop_boxes.random_resized_crop_boxes(
            np.array([image.width]), np.array([image.height]), self.rng, (0.08, 1.0), (3 / 4, 4 / 3)
        )[0]
        image = image.crop(tuple(int(v) for v in box)).resize((self.size, self.size), Image.BILINEAR)
        if self.rng.random() < 0.5:
            image = image.transpose(Image.FLIP_LEFT_RIGHT)
        return torch.from_numpy(np.array(image)).permute(2, 0, 1)  # PILToTensor


class TorchvisionStyleEvalTransform:
    """Resize(round(size / crop_ratio)) + CenterCrop(size) + PILToTensor, on PIL images: torchvision's own
    arithmetic (the shorter side to the resize size, the longer scaled and truncated; the crop's offsets
    rounded), with PIL's antialiased bilinear resize of the whole image."""

    def __init__(self, size: int, crop_ratio: float = 0.875) -> None:
        self.size, self.resize = size, int(round(size / crop_ratio))

    def __call__(self, image: Image.Image) -> torch.Tensor:
        width, height = image.size
        short, long = (width, height) if width <= height else (height, width)
        new_short, new_long = self.resize, int(self.resize * long / short)
        new_size = (new_short, new_long) if width <= height else (new_long, new_short)
        image = image.resize(new_size, Image.BILINEAR)
        top = int(round((new_size[1] - self.size) / 2.0))
        left = int(round((new_size[0] - self.size) / 2.0))
        image = image.crop((left, top, left + self.size, top + self.size))
        return torch.from_numpy(np.array(image)).permute(2, 0, 1)  # PILToTensor


class ImageFolderDataset(torch.utils.data.Dataset):
    """``torchvision.datasets.ImageFolder`` with PIL loading, reproduced."""

    def __init__(self, root: Path, transform: Callable[[Image.Image], torch.Tensor],
                 samples: list[tuple[str, int]] | None = None) -> None:
        self.root, self.transform = Path(root), transform
        self.samples = samples if samples is not None else scan_image_folder(self.root)[1]

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        path, label = self.samples[index]
        data = read_regular_file(source_path(self.root, path))  # stored paths are escaped; links as convert's
        image = Image.open(io.BytesIO(data)).convert("RGB")
        return self.transform(image), label


def _worker_init(worker_id: int) -> None:
    info = torch.utils.data.get_worker_info()
    transform = getattr(info.dataset, "transform", None)
    if isinstance(transform, TorchvisionStyleTrainTransform):
        transform.rng = np.random.default_rng(1000 + worker_id)


class Epoch:
    """One loader under test: ``epoch()`` runs a pass and returns the images seen."""

    def __init__(self, batches: Callable[[], Iterable], count: Callable[[object], int],
                 close: Callable[[], None] = lambda: None, stats: object | None = None,
                 worker_pids: Callable[[], list[int]] = list) -> None:
        self.batches, self.count, self._close = batches, count, close
        self.stats = stats  # dataio's loader.stats (stage times, threads); None for the other loaders
        self.worker_pids = worker_pids  # the loader's worker processes (a DataLoader's), whose CPU time counts too

    def worker_cpu(self) -> float:
        """CPU seconds the loader's worker processes have used so far (0 without workers, or off Linux)."""
        return sum(process_cpu_seconds(pid) for pid in self.worker_pids())

    def __call__(self) -> int:
        return sum(self.count(batch) for batch in self.batches())

    def close(self) -> None:
        self._close()


def timed(epoch: Callable[[], int]) -> float:
    """images/s of one call of ``epoch``."""
    start = time.perf_counter()
    seen = epoch()
    return seen / (time.perf_counter() - start)


def timed_with_cpu(epoch: Epoch) -> tuple[float, float]:
    """images/s of one epoch, and the CPU microseconds it took per image: this process (the loader's threads,
    or a DataLoader's main process) plus the loader's worker processes. CPU time is what a shared machine's
    load does not change much, so the ratio of two loaders' CPU per image is steadier than that of their rates."""
    workers, cpu, start = epoch.worker_cpu(), time.process_time(), time.perf_counter()
    seen = epoch()
    wall = time.perf_counter() - start
    spent = time.process_time() - cpu + epoch.worker_cpu() - workers
    return seen / wall, 1e6 * spent / max(1, seen)


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` from /proc (0.0 if it cannot be read)."""
    try:
        fields = read_kernel_text(f"/proc/{pid}/stat").rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime (fields 14, 15)


def _dataloader_epoch(loader: torch.utils.data.DataLoader) -> Epoch:
    state: dict[str, object] = {}

    def batches() -> Iterable:
        state["iterator"] = iter(loader)  # persistent workers are reused across epochs
        return state["iterator"]

    def close() -> None:
        iterator = state.pop("iterator", None)
        if iterator is not None and hasattr(iterator, "_shutdown_workers"):
            iterator._shutdown_workers()

    def worker_pids() -> list[int]:
        return [w.pid for w in getattr(state.get("iterator"), "_workers", ()) if w.pid is not None]

    return Epoch(batches, lambda b: len(b[1]), close, worker_pids=worker_pids)


def accepted_samples(shards_folder: Path) -> list[tuple[str, int]]:
    """(relative path, label) of the source files the converter accepted, in its order."""
    folder, manifest = read_manifest(shards_folder)
    table = read_sample_table(folder / manifest.sample_table)
    samples = list(zip(table.table.column("path").to_pylist(), table.label.tolist(), strict=True))
    for row, (path, _) in enumerate(samples):  # the table is input: its paths must stay inside SRC
        try:
            source_path(".", path)
        except ValueError as e:
            raise DataioError(f"{folder / manifest.sample_table}: row {row}: {e}") from None
    return samples


def make_standard(src: Path, *, batch_size: int, size: int, num_workers: int,
                  samples: list[tuple[str, int]] | None = None, train: bool = True) -> Epoch:
    transform = TorchvisionStyleTrainTransform(size) if train else TorchvisionStyleEvalTransform(size)
    dataset = ImageFolderDataset(src, transform, samples)
    loader = torch.utils.data.DataLoader(
        dataset, batch_size=batch_size, shuffle=train, num_workers=num_workers,
        persistent_workers=num_workers > 0, worker_init_fn=_worker_init,
    )
    return _dataloader_epoch(loader)


def make_standard_eval(src: Path, *, batch_size: int, size: int, num_workers: int,
                       samples: list[tuple[str, int]] | None = None) -> Epoch:
    """The standard recipe's validation loader: Resize + CenterCrop, in order."""
    return make_standard(src, batch_size=batch_size, size=size, num_workers=num_workers, samples=samples,
                         train=False)


def make_shard_dataset(shards_folder: Path, *, batch_size: int, size: int, num_workers: int) -> Epoch:
    """``ShardDataset(shards, transform, to_pil=True)`` under the standard recipe's DataLoader and transform."""
    dataset = ShardDataset(shards_folder, TorchvisionStyleTrainTransform(size), to_pil=True)
    loader = torch.utils.data.DataLoader(
        dataset, batch_size=batch_size, shuffle=True, num_workers=num_workers,
        persistent_workers=num_workers > 0, worker_init_fn=_worker_init,
    )
    return _dataloader_epoch(loader)


def make_webdataset(shards: list[Path], *, batch_size: int, size: int, num_workers: int) -> Epoch:
    import webdataset as wds  # deliberately lazy here: only this baseline needs it

    transform = TorchvisionStyleTrainTransform(size)
    # Absolute paths: webdataset opens "pipe:..." or "http:..." names as commands and URLs, and a
    # relative shard folder could make a manifest's shard name one. Only the image and .cls members
    # are read (select_files) and decoded, with explicit handlers.
    dataset = (
        wds.WebDataset([str(Path(s).resolve()) for s in shards], shardshuffle=len(shards), empty_check=False,
                       select_files=shard_members.wanted_member)
        .shuffle(1000)
        .map(shard_members.decode_sample)
        .map_tuple(transform, lambda label: label)
        .batched(batch_size, partial=True)
    )
    loader = torch.utils.data.DataLoader(dataset, batch_size=None, num_workers=num_workers,
                                         persistent_workers=num_workers > 0, worker_init_fn=_worker_init)
    return _dataloader_epoch(loader)


def make_dali_cpu(shards: list[Path], *, batch_size: int, size: int, num_workers: int) -> Epoch:
    from nvidia.dali import fn, pipeline_def, types  # lazy: DALI is optional and slow to import

    @pipeline_def(batch_size=batch_size, num_threads=num_workers, device_id=None, seed=0)
    def pipeline():
        jpegs, labels = fn.readers.webdataset(
            paths=[str(s) for s in shards], index_paths=[str(s.with_suffix(".idx")) for s in shards],
            ext=["jpg", "cls"], random_shuffle=True, missing_component_behavior="error", name="reader",
        )
        images = fn.decoders.image_random_crop(
            jpegs, device="cpu", output_type=types.RGB, random_area=[0.08, 1.0], random_aspect_ratio=[3 / 4, 4 / 3]
        )
        images = fn.resize(images, resize_x=size, resize_y=size, antialias=True)
        images = fn.flip(images, horizontal=fn.random.coin_flip())
        return images, labels

    pipe = pipeline()
    pipe.build()
    epoch_size = pipe.epoch_size("reader")
    steps = -(-epoch_size // batch_size)

    def epoch() -> Iterable[int]:
        for _ in range(steps):
            images, _ = pipe.run()
            yield len(images)

    holder = [pipe]
    return Epoch(epoch, lambda n: n, holder.clear)


def make_dataio(shards_folder: Path, *, batch_size: int, size: int, num_workers: int | str,
                **options: object) -> Epoch:
    """dataio's loader; its stages are timed in CPU seconds (``StageTimes.clock``): the stage table sets them
    beside single-thread limits, and wall-clock ranges on a shared machine also count waits for a core (the
    CPU clock costs ~3 us more per image than the wall clock's, under 0.5%)."""
    loader = ImageLoader(shards_folder, batch_size=batch_size, image_size=size, num_workers=num_workers, **options)
    loader.stats.stages.clock = time.thread_time
    return Epoch(lambda: loader, lambda b: len(b[1]), loader.close, loader.stats)


def make_dataio_mixture(shards_folder: Path, *, batch_size: int, size: int, num_workers: int,
                        sources: int = 3) -> Epoch:
    """dataio over a mixture of ``sources`` sources, each the same shards under another name, equal weights, an
    epoch as many samples as one source holds: the mixture's cost against the single source (row ``dataio``)."""
    names = [f"source{i}" for i in range(sources)]
    samples = read_manifest(shards_folder)[1].num_samples
    loader = ImageLoader(dict.fromkeys(names, shards_folder), weights=dict.fromkeys(names, 1.0), epoch_length=samples,
                         batch_size=batch_size, image_size=size, num_workers=num_workers)
    loader.stats.stages.clock = time.thread_time  # as make_dataio's: the stage table is in CPU seconds
    return Epoch(lambda: loader, lambda b: len(b[1]), loader.close, loader.stats)


def make_dataio_eval(shards_folder: Path, *, batch_size: int, size: int, num_workers: int) -> Epoch:
    """dataio in eval mode (``train=False``): the centre crop of the standard recipe's Resize + CenterCrop."""
    return make_dataio(shards_folder, batch_size=batch_size, size=size, num_workers=num_workers, train=False)


def make_dataio_auto(shards_folder: Path, *, batch_size: int, size: int, num_workers: int) -> Epoch:
    """dataio with ``num_workers="auto"`` over all the cores (``cpu_budget=1.0``: the bench has no model to
    leave a core to); ``num_workers`` is ignored. It tunes during the warm-up epoch."""
    return make_dataio(shards_folder, batch_size=batch_size, size=size, num_workers="auto", cpu_budget=1.0)


def make_dataio_unchecked(shards_folder: Path, *, batch_size: int, size: int, num_workers: int) -> Epoch:
    """dataio with its per-sample checksums off (``verify_samples=False``): the checksums' end-to-end cost."""
    return make_dataio(shards_folder, batch_size=batch_size, size=size, num_workers=num_workers,
                       verify_samples=False)


def make_dataio_remote(url: str, *, batch_size: int, size: int, num_workers: int,
                       storage_options: dict | None = None, cache: bool = False) -> Epoch:
    """dataio over shards at an fsspec URL (one range request per sample, read ahead along the epoch
    order); with ``cache``, a bounded local cache in a temporary folder, so epochs after the first read no
    network (the benchmark's warm-up epoch fills it)."""
    tmp = tempfile.TemporaryDirectory(prefix="dataio-bench-cache-") if cache else None
    loader = ImageLoader(url, batch_size=batch_size, image_size=size, num_workers=num_workers,
                         storage_options=storage_options, cache_dir=tmp.name if tmp else None)

    def close() -> None:
        loader.close()
        if tmp is not None:
            tmp.cleanup()

    return Epoch(lambda: loader, lambda b: len(b[1]), close)


def make_checksum_loop(files: list[bytes]) -> Epoch:
    """Single thread: the per-sample checksum the loader computes on every read, over files in memory."""

    def one_pass() -> Iterable[int]:
        for data in files:
            sample_checksum(data)
            yield 1

    return Epoch(one_pass, lambda n: n)


def make_dataio_dali_gpu(shards_folder: Path, *, batch_size: int, size: int, num_workers: int) -> Epoch:
    """dataio's DALI backend on the GPU (nvJPEG / hardware decoder); the batch is synchronised per step."""
    loader = ImageLoader(shards_folder, batch_size=batch_size, image_size=size, num_workers=num_workers,
                         decoder="dali", device="cuda")

    def count(batch) -> int:
        torch.cuda.current_stream().synchronize()
        return len(batch[1])

    return Epoch(lambda: loader, count, loader.close, loader.stats)


def source_images(src: Path, samples: list[tuple[str, int]], limit: int = 1000) -> list[bytes]:
    """The first ``limit`` accepted source files' bytes, as the standard recipe reads them."""
    return [read_regular_file(source_path(src, path)) for path, _ in samples[:limit]]


def packed_images(shards_folder: Path, limit: int = 1000) -> list[bytes]:
    """The same images' bytes as packed in the shards (what dataio's loader decodes)."""
    folder, manifest = read_manifest(shards_folder)
    table = read_sample_table(folder / manifest.sample_table)
    files = ShardFiles(folder, manifest)
    try:
        return [files.read(int(table.shard[i]), int(table.offset[i]), int(table.size[i]))
                for i in range(min(limit, len(table)))]
    finally:
        files.close()


def make_machine_limit(files: list[bytes], *, size: int, dataio_path: bool = False) -> Epoch:
    """Single thread: decode + fused crop-resize of files already in memory, with no loader around it.

    By default the machine's limit as the issue defines it: a full decode (no
    DCT scaling, no region decoding) and one antialiased ``resize(box=...)``
    into a preallocated array; its rate times the core count is the limit.
    Give it ``source_images``. ``dataio_path=True`` times dataio's own
    per-image path instead (region and reduced-size decoding, and splicing of
    the packed files' restart intervals): give it ``packed_images``, so the
    loader's parallel efficiency shows too.
    """
    sizes = [Image.open(io.BytesIO(data)).size for data in files]
    boxes = crop_boxes.random_resized_crop_boxes(
        np.array([w for w, _ in sizes]), np.array([h for _, h in sizes]), np.random.default_rng(0),
        (0.08, 1.0), (3 / 4, 4 / 3),
    )
    out = np.empty((size, size, 3), dtype=np.uint8)

    def one_pass() -> Iterable[int]:
        for data, box in zip(files, boxes, strict=True):
            decode_crop_into(data, box, False, out, reduced_decode=dataio_path, region_decode=dataio_path)
            yield 1

    return Epoch(one_pass, lambda n: n)
