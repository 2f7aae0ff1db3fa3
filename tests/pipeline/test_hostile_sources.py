"""A new kind's source is the user's code: what it hands the skeleton is checked, and a source that breaks the
contract is one ``ConfigError`` line naming it and what it returned, never a batch that lies about its samples."""

from __future__ import annotations

import numpy as np
import pytest

from dataio.errors import ConfigError, SampleError
from dataio.loader.sample_loader import SampleLoader
from tests.pipeline.array_source import ArraySource


class ReportsPosition(ArraySource):
    """Reads every sample, then names ``position`` as failed in the batch holding sample 3."""

    def __init__(self, count: int, position: object) -> None:
        super().__init__(count)
        self.position = position

    def _read(self, ids, fields):
        super()._read(ids, fields)
        return [(self.position, SampleError("arrays-0", "3", "damaged"))] if 3 in ids.tolist() else []


class KeepsFailures(ArraySource):
    """A ``without`` that drops nothing: the failed sample would be handed out, counted as skipped."""

    def without(self, batch, positions):
        return batch


class ExtraRow(ArraySource):
    """Allocates one field a row too many (a source that sized it by something other than the batch's ids)."""

    def start_batch(self, index, ids, key):
        begun = super().start_batch(index, ids, key)
        begun.fields["label"] = np.zeros(len(ids) + 1, np.int64)
        return begun


class NotAnError(ArraySource):
    def _read(self, ids, fields):
        super()._read(ids, fields)
        return [(0, "damaged")]


def _read_all(source, **options) -> list[list[int]]:
    loader = SampleLoader(source, batch_size=4, shuffle=False, on_error="skip", **options)
    return [batch["sample_ids"].tolist() for batch in loader]


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("position", [99, 4, -1])
def test_a_failure_outside_the_batch_is_named(workers, position):
    """Position 99 or 4 of a batch of 4 was an IndexError naming nothing; -1 silently dropped the batch's last
    sample, which was read fine, and kept the one the source said had failed."""
    with pytest.raises(ConfigError, match=rf"^source ReportsPosition: a read task named position {position} as "
                                          r"failed in a batch of 4 samples \(positions 0..3; the error: sample '3'"):
        _read_all(ReportsPosition(10, position), num_workers=workers)
    assert _read_all(ReportsPosition(10, 3), num_workers=workers) == [[0, 1, 2], [4, 5, 6, 7], [8, 9]]


def test_a_without_that_drops_nothing_is_named():
    """Sample 2 was counted as skipped and handed out all the same."""
    with pytest.raises(ConfigError, match=r"^source KeepsFailures: without\(\) returned 4 samples for a batch of 4 "
                                          "with 1 failed: it must drop the failed samples"):
        _read_all(KeepsFailures(10, bad=[2]))
    assert _read_all(ArraySource(10, bad=[2])) == [[0, 1, 3], [4, 5, 6, 7], [8, 9]]


def test_a_field_whose_rows_are_not_the_batch_is_named():
    """A label field of 5 rows beside 4 sample ids reached the model; the batch's count is its ids, and a field
    that differs is refused before it is copied."""
    with pytest.raises(ConfigError, match=r"^source ExtraRow: field 'label' has 5 rows for a batch of 4 samples"):
        _read_all(ExtraRow(10))


def test_a_failure_that_is_not_a_sample_error_is_named():
    """It was an AttributeError ('str' object has no attribute 'shard') from the error policy."""
    with pytest.raises(ConfigError, match=r"^source NotAnError: a read task must return \[\(position, SampleError\)"
                                          r", \.\.\.\] for the samples it could not read, got tuple \(0, 'damaged'\)"):
        _read_all(NotAnError(10))
