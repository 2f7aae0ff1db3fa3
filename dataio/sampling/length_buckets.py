"""An epoch's order with batches of about one length: sorted within windows, then the window's batches shuffled.

Captions (and any variable-length field) padded to a batch's longest row waste less when a batch holds
rows of about one length. The order stays a pure function of ``(seed, epoch)`` and the lengths, never of
the world size: positions are only moved within windows of ``window`` batches of ``batch_size``, each
window stably sorted by length, cut into batches that are then shuffled among themselves (so lengths do
not rise through the window). A loader deals such an order a whole batch at a time
(``SampleSharing._deals_whole_batches``), so each rank's batch is one of these spans, and an exact or
elastic resume replays it.
"""

from __future__ import annotations

import numpy as np

BUCKET_STREAM = 0xB0C  # the generator's stream, apart from the order's own


def bucketed(order: np.ndarray, lengths: np.ndarray, batch_size: int, window: int, *, seed: int,
             epoch: int) -> np.ndarray:
    """``order`` (sample ids) rearranged so that each batch of ``batch_size`` holds samples of about one length."""
    out = np.empty_like(order)
    span = batch_size * window
    rng = np.random.default_rng([seed, epoch, BUCKET_STREAM])
    for start in range(0, len(order), span):
        ids = order[start:start + span]
        ids = ids[np.argsort(lengths[ids], kind="stable")]
        batches = [ids[i:i + batch_size] for i in range(0, len(ids), batch_size)]
        full = len(batches) - (len(batches[-1]) < batch_size)  # a short last batch stays last
        shuffled = [batches[i] for i in rng.permutation(full)] + batches[full:]
        out[start:start + len(ids)] = np.concatenate(shuffled)
    return out
