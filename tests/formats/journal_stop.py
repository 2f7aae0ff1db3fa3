"""Stopping a conversion right after its N-th shard is journaled: a kill, in process, at a known point."""

from __future__ import annotations

from dataio.formats.dataset.convert_journal import Journal


class Interrupted(Exception):
    """Stands in for a kill right after a shard was journaled."""


def interrupt_after(monkeypatch, records: int) -> list[dict]:
    """Make ``Journal.add`` stop the conversion after ``records`` records; returns the records' totals.

    ``monkeypatch.undo()`` lets the rerun finish.
    """
    seen: list[dict] = []
    original = Journal.add

    def add(self, index, record):
        original(self, index, record)
        seen.append(record.totals)
        if len(seen) == records:
            raise Interrupted

    monkeypatch.setattr(Journal, "add", add)
    return seen
