"""What ``dataio verify`` hands each kind's own checks: the folder, its manifest and sample table, the rows and
shards already found wrong, and the report they add their problems to.

``verify`` checks what every folder has (shards, the sample table against the manifest and itself, each row's
member, the tokenizer file, every image decoded with ``--deep``); what only a kind has is that kind's ``verify``
part in the table of kinds (``dataio.formats.kinds``), called with a ``VerifyContext``: the class labels'
``.cls`` members, an image-text pair folder's caption ids, a COCO folder's box targets, a token folder's ids.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

from dataio.formats.dataset.manifest import Manifest
from dataio.formats.file_gate import map_input
from dataio.formats.dataset.sample_table import SampleTable


@dataclass
class VerifyReport:
    """Problems found, each naming its shard (and sample), plus counts of what was checked."""

    folder: Path | str
    problems: list[str] = field(default_factory=list)
    shards_checked: int = 0
    samples_checked: int = 0

    @property
    def ok(self) -> bool:
        return not self.problems

    def line(self) -> str:
        verdict = "OK" if self.ok else f"{len(self.problems)} problem(s)"
        return f"verify {self.folder}: {self.shards_checked} shards, {self.samples_checked} samples decoded: {verdict}"


@dataclass
class VerifyContext:
    """One folder being verified, as a kind's checks see it."""

    folder: Path
    manifest: Manifest
    table: SampleTable | None  # None for a folder without a sample table (token shards), or one not readable
    faults: dict[int, str]  # rows of the table already found wrong, and why (deeper checks pass them over)
    bad_shards: set[int]  # shards that cannot be read (missing, truncated, not their count)
    deep: bool  # --deep: every member read
    report: VerifyReport

    def sample_problem(self, row: int, reason: str) -> None:
        """A problem of row ``row`` of the sample table (-1: of the table as a whole)."""
        where = self.manifest.sample_table
        assert self.table is not None
        self.report.problems.append(f"{where}: {reason}" if row < 0 else
                                    f"sample {self.table.key(row)!r} in {where}: {reason}")


def arrow_batches(path: Path) -> list[pa.RecordBatch]:
    """The record batches of an Arrow IPC file (text shards) or stream (image shards, HF's layout)."""
    source = map_input(path)
    try:
        reader = pa.ipc.open_file(source)
        return [reader.get_batch(i) for i in range(reader.num_record_batches)]
    except pa.ArrowInvalid:
        source.seek(0)
        return list(pa.ipc.open_stream(source))
