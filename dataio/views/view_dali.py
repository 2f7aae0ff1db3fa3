"""Multi-crop views with NVIDIA DALI: each image decoded once (nvJPEG and the hardware decoder on a GPU, or DALI's
CPU decoder), every view sliced, resized and flipped from the decoded image inside one pipeline run.

As the image loader's DALI decoder (``dataio.images.dali_decode``), the pipeline is fed with ``fn.external_source``:
the bytes dataio reads and, per view, the crop window and flip its sampler drew, so the order, rank split and crops
are dataio's own. ``fn.decoders.image`` decodes each image whole once; per view ``fn.slice`` takes its window,
``fn.resize`` (antialiased) brings it to the view's size and ``fn.flip`` mirrors it. The views stay uint8 and go to
the finish (``view_finish``), which applies their photometric draws batched on the device. A batch DALI fails on is
bisected, as the image decoder's, until each failure is one named sample.
"""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any

import numpy as np
import torch

from dataio.images.dali_decode import DaliDecoder, DaliError, first_line
from dataio.images.table_size import check_size, header_size
from dataio.pipeline.error_policy import DATA_EXCEPTIONS
from dataio.pipeline.sample_source import Failures
from dataio.pipeline.stage_times import Lap
from dataio.views.views_config import ViewsConfig


class ViewsDali:
    """``decode(source, fields, keys, boxes, flipped, lap, fetched)``: the batch's views into its stacks."""

    def __init__(self, dali: DaliDecoder, views: ViewsConfig) -> None:
        self.dali, self.views = dali, views
        self.sizes = [views.global_size] * views.global_crops + [views.local_size] * views.local_crops
        self._pipe = None

    def _build(self):
        # Deliberately lazy: DALI is optional (Linux x86-64 only) and its import costs about a second.
        import nvidia.dali.fn as fn
        import nvidia.dali.types as types
        from nvidia.dali import pipeline_def

        d = self.dali
        gpu = d.device_id is not None

        @pipeline_def(batch_size=d.max_batch, num_threads=d.threads, device_id=d.device_id, seed=d.seed,
                      exec_async=False, exec_pipelined=False, prefetch_queue_depth=1)
        def pipeline():
            jpegs = fn.external_source(name="jpegs", dtype=types.UINT8, ndim=1)
            options = {"hw_decoder_load": d.hw_decoder_load} if gpu else {}
            image = fn.decoders.image(jpegs, device="mixed" if gpu else "cpu", output_type=types.RGB, **options)
            outputs = []
            for view, size in enumerate(self.sizes):
                anchor = fn.external_source(name=f"anchor{view}", dtype=types.FLOAT, ndim=1)
                shape = fn.external_source(name=f"shape{view}", dtype=types.FLOAT, ndim=1)
                flip = fn.external_source(name=f"flip{view}", dtype=types.INT32, ndim=0)
                crop = fn.slice(image, anchor, shape, axis_names="WH", normalized_anchor=False,
                                normalized_shape=False, out_of_bounds_policy="trim_to_shape")
                crop = fn.resize(crop, size=[float(size), float(size)], antialias=True, interp_type=types.INTERP_LINEAR)
                outputs.append(fn.flip(crop, horizontal=flip))
            return tuple(outputs)

        pipe = pipeline()
        pipe.build()
        return pipe

    def _run(self, encoded: list[np.ndarray], boxes: np.ndarray, flipped: np.ndarray) -> list[torch.Tensor]:
        """Each view of one batch (at most ``max_batch`` samples) as (n, S, S, 3) uint8; raises DaliError."""
        n = len(encoded)
        if self._pipe is None:
            self._pipe = self._build()
        self._pipe.feed_input("jpegs", encoded)
        for view in range(len(self.sizes)):
            b = boxes[view].astype(np.float32)
            self._pipe.feed_input(f"anchor{view}", [b[i, :2].copy() for i in range(n)])
            self._pipe.feed_input(f"shape{view}", [b[i, 2:] - b[i, :2] for i in range(n)])
            self._pipe.feed_input(f"flip{view}", [np.array(int(f), dtype=np.int32) for f in flipped[view]])
        try:
            outputs = self._pipe.run()
            if self.dali.device_id is None:  # as_array fails too on a batch DALI decoded wrong (ragged shapes)
                return [torch.from_numpy(out.as_array()) for out in outputs]
        except RuntimeError as e:
            self._pipe = None  # DALI marks the pipeline invalid after an error
            raise DaliError(str(e)) from None
        from nvidia.dali.plugin.pytorch import feed_ndarray  # lazy: DALI is optional (see _build)

        moved = []
        for out, size in zip(outputs, self.sizes, strict=True):
            tensor = torch.empty((n, size, size, 3), dtype=torch.uint8, device=f"cuda:{self.dali.device_id}")
            feed_ndarray(out.as_tensor(), tensor, cuda_stream=torch.cuda.current_stream(self.dali.device_id))
            moved.append(tensor)
        return moved

    def decode(self, source: Any, fields: dict[str, Any], keys: np.ndarray, boxes: np.ndarray, flipped: np.ndarray,
               lap: Lap, fetched: Future | None) -> Failures:
        """Read the batch's bytes, decode every view (bisecting a failing batch), and write each view's rows of the
        stacks in ``fields`` (replaced by tensors on DALI's device); the unreadable and failed samples, named."""
        failures: Failures = []
        encoded: list[np.ndarray] = []
        readable: list[int] = []
        with lap("read"):
            data = fetched.result() if fetched is not None else [None] * len(keys)
            for i, sample in enumerate(keys.tolist()):
                try:
                    encoded_bytes = source.shards.read(sample, data[i])
                    # DALI reads the size itself, the boxes are in the table's: the header alone here (microseconds)
                    table = source.shards.table
                    check_size(*header_size(encoded_bytes), (int(table.width[sample]), int(table.height[sample])))
                    encoded.append(np.frombuffer(encoded_bytes, dtype=np.uint8))
                    readable.append(i)
                except DATA_EXCEPTIONS as e:
                    failures.append((i, source.shards.sample_error(sample, f"{type(e).__name__}: {e}")))
        views: list[torch.Tensor | None] = [None] * len(self.sizes)

        def run(positions: list[int]) -> None:  # positions into ``readable``
            try:
                parts = self._run([encoded[p] for p in positions], boxes[:, [readable[p] for p in positions]],
                                  flipped[:, [readable[p] for p in positions]])
            except DaliError as e:
                if len(positions) == 1:
                    i = readable[positions[0]]
                    failures.append((i, source.shards.sample_error(int(keys[i]), f"DALI: {first_line(str(e))}")))
                    return
                half = len(positions) // 2
                run(positions[:half])
                run(positions[half:])
                return
            rows = torch.tensor([readable[p] for p in positions])
            for view, part in enumerate(parts):
                if views[view] is None:
                    views[view] = torch.zeros((len(keys), *part.shape[1:]), dtype=torch.uint8, device=part.device)
                views[view][rows.to(part.device)] = part

        with lap("decode"):
            if encoded:
                run(list(range(len(encoded))))
        decoded = len(readable) - sum(1 for i, _ in failures if i in set(readable))
        for name, first in (("collated_global_crops", 0), ("collated_local_crops", self.views.global_crops)):
            stack = fields.get(name)
            if stack is None:
                continue
            blocks = [views[first + view] for view in range(stack.views)]
            if all(block is not None for block in blocks):
                stack.array = torch.cat(blocks)  # view-major: view 0 of every sample, then view 1 ...
            else:  # nothing decoded: zeros, every sample failed
                stack.array = torch.zeros((stack.views * len(keys), *stack.array.shape[1:]), dtype=torch.uint8)
        with source._count:
            source.decodes += decoded
        lap.items = len(keys)
        lap.flush()
        return failures

    def close(self) -> None:
        self._pipe = None
