"""The loader state in the shape of torchdata's ``StatefulDataLoader``, around dataio's own position.

Code written for ``StatefulDataLoader`` reads and stores keys such as
``_num_yielded`` and ``_sampler_iter_state``; dataio's resume needs only the
``EpochPosition`` keys (epoch, samples_consumed, seed, world_size, dataset),
which stay at the top level so a state saved on one world size resumes on
another. ``split_state`` accepts either shape: the flat dataio state of
earlier versions, or this one.
"""

from __future__ import annotations

from typing import Any

# torchdata.stateful_dataloader.StatefulDataLoader (single-process iterator) keys, in its order
TORCHDATA_KEYS = ("_index_sampler_state", "_sampler_iter_state", "_sampler_iter_yielded", "_num_yielded",
                  "_IterableDataset_len_called", "_shared_seed", "fetcher_state", "dataset_state",
                  "_iterator_finished")


def torchdata_state(position: dict[str, Any], yielded: int) -> dict[str, Any]:
    """``position`` (dataio's keys) plus StatefulDataLoader's, with ``yielded`` batches this epoch on this rank."""
    state: dict[str, Any] = dict.fromkeys(TORCHDATA_KEYS)
    state.update(_sampler_iter_yielded=yielded, _num_yielded=yielded, _iterator_finished=False)
    state.update(position)
    return state


def split_state(state: Any) -> dict[str, Any]:
    """dataio's position from a state of either shape.

    None and ``{}`` are refused (torchdata takes ``{}`` as nothing to restore; here it is
    almost always a checkpoint that lost its loader state, and a silent restart of the
    epoch would repeat what was trained on).

    Raises ValueError naming the problem for a StatefulDataLoader state that
    holds no dataio position (saved by another loader), or a bad ``_num_yielded``.
    """
    if not isinstance(state, dict):
        raise ValueError(f"loader state must be a dict from state_dict(), got {type(state).__name__} "
                         f"{state!r:.40}: nothing was loaded")
    if not state:
        raise ValueError("loader state is empty ({}): nothing to resume from; pass the dict state_dict() returned")
    if "_num_yielded" in state and "samples_consumed" not in state:
        raise ValueError("this StatefulDataLoader state holds no dataio position (epoch, samples_consumed, seed): "
                         "it was saved by another loader")
    position = {k: v for k, v in state.items() if k not in TORCHDATA_KEYS}
    yielded = state.get("_num_yielded", 0)
    if isinstance(yielded, bool) or not isinstance(yielded, int) or yielded < 0:
        raise ValueError(f"loader state _num_yielded must be an integer >= 0, got {yielded!r}")
    position["_num_yielded"] = yielded
    return position
