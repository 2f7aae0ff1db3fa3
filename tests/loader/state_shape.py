"""The keys torchdata's ``StatefulDataLoader`` puts in a state, as dataio's loaders fill them (not a test module)."""

from __future__ import annotations


def torchdata_keys(yielded: int) -> dict:
    """StatefulDataLoader's keys after ``yielded`` batches of the epoch on this rank."""
    return {"_index_sampler_state": None, "_sampler_iter_state": None, "_sampler_iter_yielded": yielded,
            "_num_yielded": yielded, "_IterableDataset_len_called": None, "_shared_seed": None,
            "fetcher_state": None, "dataset_state": None, "_iterator_finished": False}
