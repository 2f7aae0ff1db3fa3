"""Which loader stage a run waited on, and what to change: the Chronometer verdict's second half.

Decode threads run ``read``, ``decode``, ``resize`` and (a CPU loader's ``normalize=True``)
``normalize`` side by side, so their
thread-seconds are divided by the thread count to compare with the stages of
the loader's own thread (``plan``, ``copy``, ``augment``, text's ``read`` and
``collate``): the largest is the stage that sets the pace. A run that is not
input-bound is told the loader keeps up. The advice fits the task: a text
run (``unit="tokens"``) is never told of channels_last or image batches.
"""

from __future__ import annotations

from typing import Any

THREADED = ("read", "decode", "resize", "normalize")  # image stages on the decode threads
PIPELINE = ("read", "decode", "resize", "normalize", "plan", "collate", "copy", "augment")

ADVICE = {
    "decode": ("more decode threads (--workers, or num_workers='auto'), the DALI decoder on a GPU "
               "(decoder='dali'), or shards packed at a smaller --max-side (fewer pixels to decode)"),
    "resize": ("crop_on_device=True (the host decodes, the device crops and resizes), or shards packed at "
               "a smaller --max-side (less to resize)"),
    "read": ("shards on local disk or in the page cache (copy them to node-local SSD), and fewer, larger "
             "shards"),
    "normalize": ("uint8 batches (normalize=False) normalised by the model, or a GPU device (the uint8 batch is "
                  "copied and normalised there)"),
    "plan": "a larger batch (per-batch planning is a fixed cost on the loader's thread)",
    "collate": "--pack (rows filled with no padding) or a larger --max-tokens (fewer, larger batches)",
    "copy": "pin_memory=True (asynchronous copies from pinned memory), and uint8 batches normalised on the device",
    "augment": ("normalisation and augmentation after the copy ran on the CPU: on a GPU they run on the copy "
                "stream, beside the model; on the CPU, a lower --randaugment magnitude or no --mixup/--cutmix"),
}
TEXT_ADVICE = {  # where a text run's remedy differs from an image run's
    "copy": "pin_memory=True (asynchronous copies from pinned memory)",
}
PACKED_ADVICE = {  # a run that already packs its rows
    "collate": "a larger --max-tokens (fewer, larger batches: packing is a fixed cost per row)",
    "compute": "the loader keeps up: speed up the model (AMP, --compile, a larger --max-tokens)",
}


def wall_seconds(stages: dict[str, float], threads: int) -> dict[str, float]:
    """Each pipeline stage's seconds as the wall time it costs: decode-thread stages divided by ``threads``."""
    threads = max(1, threads)
    return {name: stages[name] / (threads if name in THREADED and "decode_wait" in stages else 1)
            for name in PIPELINE if stages.get(name, 0) > 0}


COMPUTE_ADVICE = {
    "img": "the loader keeps up: speed up the model (AMP, channels_last, --compile, a larger batch)",
    "tokens": "the loader keeps up: speed up the model (AMP, --compile, --pack, a larger --max-tokens)",
}


def diagnose(stages: dict[str, float], *, threads: int, input_bound: bool, unit: str = "img",
             packed: bool = False) -> dict[str, Any]:
    """``{"bottleneck": stage, "advice": text}``: the loader stage with the most wall time when the run is
    input-bound, else ``compute`` (the loader keeps up); ``unit`` (img or tokens) picks the task's advice,
    ``packed`` (a text run packing its rows) leaves out the advice to pack."""
    text = unit == "tokens"
    packed = packed and text
    if not input_bound:
        advice = PACKED_ADVICE["compute"] if packed else COMPUTE_ADVICE["tokens" if text else "img"]
        return {"bottleneck": "compute", "advice": advice}
    cost = wall_seconds(stages, threads)
    if not cost:
        return {"bottleneck": "unknown", "advice": "no stage times recorded"}
    stage = max(cost, key=cost.get)
    advice = (PACKED_ADVICE.get(stage) if packed else None) or (TEXT_ADVICE.get(stage) if text else None)
    return {"bottleneck": stage, "advice": advice or ADVICE[stage]}


def totals(per_epoch: dict[str, dict[str, dict[str, float]]]) -> dict[str, float]:
    """Seconds per stage summed over the epochs of ``LoaderStats.as_dict()["stages"]``."""
    out: dict[str, float] = {}
    for stages in per_epoch.values():
        for name, entry in stages.items():
            out[name] = out.get(name, 0.0) + entry["seconds"]
    return out
