"""Decode, crop, resize and flip a batch of JPEGs with an NVIDIA DALI pipeline.

The pipeline is fed with ``fn.external_source``: the encoded bytes dataio
reads from the shards (the same tar members DALI's ``.idx`` files point at)
and, per sample, the crop window, output size and flip that dataio's sampler
drew. That keeps dataio's order, rank split and crop parameters exactly,
which DALI's own readers cannot. ``fn.decoders.image_slice`` decodes only the
crop window (ROI decoding; nvJPEG / the hardware decoder with ``device_id``),
then ``fn.resize`` (antialiased, as the turbo backend) and ``fn.flip``. With
``device_id=None`` it all runs on the CPU, which is what CI tests.

Files packed by dataio carry restart markers; each is first cut down to the
restart intervals around its crop (``cut_to_boxes``, the turbo backend's
splicer), so DALI entropy-decodes only what the crop needs: the same images
(tested), and 1.2-1.35x the DALI CPU backend's rate on the demo set.

The pipeline is built once per decoder and reused for every batch and epoch
(the output size is a per-sample input, so progressive resizing needs no
rebuild). DALI invalidates a pipeline after an operator error; the decoder
then rebuilds it on the next batch.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from dataio.formats.fallback_log import warn_once

try:
    from dataio.formats.jpeg import _jpeg_codec
except ImportError:  # built without libjpeg headers: DALI gets the files as they are
    _jpeg_codec = None

WITHOUT_CODEC = ("dataio.formats.jpeg._jpeg_codec is not built (no C compiler or libjpeg headers when torch-dataio was "
                 "installed): DALI gets whole files, not files cut to their crops (which measured 1.2-1.35x its "
                 "CPU rate); install gcc and the libjpeg-turbo headers, then reinstall torch-dataio")


class DaliError(RuntimeError):
    """DALI failed on a batch; the caller finds and names the sample."""


class DaliDecoder:
    """``decode(encoded, boxes, flipped, size)`` -> (N, size, size, 3) uint8 tensor (CPU, or CUDA on a GPU)."""

    def __init__(self, *, max_batch: int, threads: int, device_id: int | None, hw_decoder_load: float = 0.65,
                 seed: int = 0, splice: bool = True) -> None:
        self.max_batch, self.threads, self.splice = max_batch, max(1, threads), splice
        self.device_id, self.hw_decoder_load, self.seed = device_id, hw_decoder_load, seed
        self._pipe = None
        self.builds = 0  # how many times a pipeline was built (tests check the cache)
        if splice and _jpeg_codec is None:
            warn_once("jpeg-codec-dali", WITHOUT_CODEC)

    def _build(self):
        # Deliberately lazy: DALI is optional (Linux x86-64 only) and its import costs about a second.
        import nvidia.dali.fn as fn
        import nvidia.dali.types as types
        from nvidia.dali import pipeline_def

        gpu = self.device_id is not None

        @pipeline_def(batch_size=self.max_batch, num_threads=self.threads, device_id=self.device_id,
                      seed=self.seed, exec_async=False, exec_pipelined=False, prefetch_queue_depth=1)
        def pipeline():
            jpegs = fn.external_source(name="jpegs", dtype=types.UINT8, ndim=1)
            anchor = fn.external_source(name="anchor", dtype=types.FLOAT, ndim=1)
            shape = fn.external_source(name="shape", dtype=types.FLOAT, ndim=1)
            size = fn.external_source(name="size", dtype=types.FLOAT, ndim=1)
            flip = fn.external_source(name="flip", dtype=types.INT32, ndim=0)
            options = {"hw_decoder_load": self.hw_decoder_load} if gpu else {}
            images = fn.decoders.image_slice(jpegs, anchor, shape, device="mixed" if gpu else "cpu",
                                             output_type=types.RGB, axis_names="WH", normalized_anchor=False,
                                             normalized_shape=False, **options)
            images = fn.resize(images, size=size, antialias=True, interp_type=types.INTERP_LINEAR)
            return fn.flip(images, horizontal=flip)

        pipe = pipeline()
        pipe.build()
        self.builds += 1
        return pipe

    def decode(self, encoded: list[np.ndarray], boxes: np.ndarray, flipped: np.ndarray, size: int) -> torch.Tensor:
        """Decode one batch (at most ``max_batch`` samples); raises DaliError if DALI fails."""
        n = len(encoded)
        if self._pipe is None:
            self._pipe = self._build()
        if self.splice:
            encoded, boxes = cut_to_boxes(encoded, boxes)
        boxes = boxes.astype(np.float32)
        self._pipe.feed_input("jpegs", encoded)
        self._pipe.feed_input("anchor", [boxes[i, :2].copy() for i in range(n)])
        self._pipe.feed_input("shape", [(boxes[i, 2:] - boxes[i, :2]) for i in range(n)])
        self._pipe.feed_input("size", [np.array([size, size], dtype=np.float32)] * n)
        self._pipe.feed_input("flip", [np.array(int(f), dtype=np.int32) for f in flipped])
        try:
            (images,) = self._pipe.run()
        except RuntimeError as e:
            self._pipe = None  # DALI marks the pipeline invalid after an error
            raise DaliError(str(e)) from None
        if self.device_id is None:
            return torch.from_numpy(images.as_array())
        from nvidia.dali.plugin.pytorch import feed_ndarray  # lazy: DALI is optional (see _build)

        out = torch.empty((n, size, size, 3), dtype=torch.uint8, device=f"cuda:{self.device_id}")
        feed_ndarray(images.as_tensor(), out, cuda_stream=torch.cuda.current_stream(self.device_id))
        return out

    def decode_each(self, encoded: list[np.ndarray], boxes: np.ndarray, flipped: np.ndarray,
                    size: int) -> tuple[torch.Tensor, list[tuple[int, str]]]:
        """Decode a batch, naming the files DALI fails on: ``(images, [(position, reason), ...])``.

        DALI cannot skip one bad file inside a pipeline run, so a failing batch is
        bisected: halves are decoded again until each failure is one file (about
        ``2 log2 N`` runs per bad file). Failed positions are left as zeros.
        """
        failures: list[tuple[int, str]] = []
        images: torch.Tensor | None = None  # allocated on the device of the first decoded part

        def decode(positions: list[int]) -> None:
            nonlocal images
            try:
                part = self.decode([encoded[i] for i in positions], boxes[positions], flipped[positions], size)
            except DaliError as e:
                if len(positions) == 1:
                    failures.append((positions[0], f"DALI: {first_line(str(e))}"))
                    return
                half = len(positions) // 2
                decode(positions[:half])
                decode(positions[half:])
                return
            if images is None:
                images = torch.zeros((len(encoded), size, size, 3), dtype=torch.uint8, device=part.device)
            images[positions] = part

        if encoded:
            decode(list(range(len(encoded))))
        if images is None:
            images = torch.zeros((len(encoded), size, size, 3), dtype=torch.uint8)
        return images, sorted(failures)

    def close(self) -> None:
        self._pipe = None


def cut_to_boxes(encoded: list[np.ndarray], boxes: np.ndarray) -> tuple[list[np.ndarray], np.ndarray]:
    """Each JPEG cut down to the restart intervals around its box (dataio/jpeg_splice.c), its box moved to match.

    Files without such intervals, and boxes that need them all, are left as they are. DALI then
    entropy-decodes (on the CPU, or in nvJPEG's hybrid and hardware paths) only what the crop needs.
    """
    if _jpeg_codec is None:
        return encoded, boxes
    cut, moved = list(encoded), np.array(boxes, dtype=np.float64)
    for i, (x0, y0, x1, y1) in enumerate(moved.tolist()):
        found = _jpeg_codec.splice(encoded[i], math.floor(x0), math.floor(y0), math.ceil(x1), math.ceil(y1))
        if found is not None:
            spliced, left, top = found
            cut[i] = np.frombuffer(spliced, dtype=np.uint8)
            moved[i] -= (left, top, left, top)
    return cut, moved


def first_line(message: str) -> str:
    """The informative line of a DALI error message."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    for line in lines:
        if not line.startswith(("Critical error", "Error in", "which was used", "File ", "encountered",
                                "C++ context", "Current pipeline")) and not line.startswith("images ="):
            return line
    return lines[0] if lines else "DALI error"
