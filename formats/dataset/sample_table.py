"""The per-sample table of an image shard folder: where each image is, its size, and its label when it has one.

Stored as an Arrow IPC file (``samples.arrow``) next to the shards and read
memory-mapped, so opening a 1.28M-sample ImageNet costs milliseconds. Row i is
global sample i, in shard order.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import xxhash

from dataio.formats.errors import DataioError
from dataio.formats.file_gate import map_input
from dataio.formats.files import write_atomic
from dataio.formats.dataset.row_overlaps import overlapping_rows

# The class label: a column of the folders whose samples declare one (classification: ``sample_fields``), not of
# every table. Image-text pair and box folders packed before December 2026 hold one too (-1, or a label COCO's
# converter made up), which readers accept and pass over.
LABEL_FIELD = pa.field("label", pa.int32())
SCHEMA = pa.schema(
    [
        ("key", pa.string()),
        ("shard", pa.int32()),
        ("offset", pa.int64()),  # byte offset of the image member's data in the shard
        ("size", pa.int64()),  # byte size of the image member
        ("width", pa.int32()),  # decoded image size, so crops can be drawn before decoding
        ("height", pa.int32()),
        ("path", pa.string()),  # source path relative to the source folder, as image_tree.escape_path writes it
    ]
)
# Since format 1.1: the xxh3-64 of each image member, checked on every read (a flipped byte in a JPEG's
# entropy-coded data decodes to wrong pixels without any error). Tables packed before have no such column.
CHECKSUM_FIELD = pa.field("xxh3", pa.uint64())
# Split conversions (issue 44): a part's table holds each sample's size in its writer's shard rule
# (``shard_rule``), and the merged table each sample's shard in a one-process conversion, which the loaders'
# shuffle uses so that a merged folder gives a one-process folder's batches for a seed. Reads use ``shard``.
RECORD_SIZE_FIELD = pa.field("record_size", pa.int64())
ORDER_SHARD_FIELD = pa.field("order_shard", pa.int32())
_OPTIONAL = (CHECKSUM_FIELD, RECORD_SIZE_FIELD, ORDER_SHARD_FIELD)  # last, in this order, where a table has them


def sample_checksum(data: bytes) -> int:
    """The per-sample checksum stored in the table: xxh3-64 (about 20 GB/s, so ~5 us per ImageNet JPEG)."""
    return xxhash.xxh3_64_intdigest(data)


@dataclass(frozen=True)
class SampleTable:
    """Columns of the sample table as numpy arrays (keys and paths stay in Arrow)."""

    shard: np.ndarray
    offset: np.ndarray
    size: np.ndarray
    label: np.ndarray | None  # (N,) int32 class labels; None in a table of samples without a class
    width: np.ndarray
    height: np.ndarray
    table: pa.Table
    checksum: np.ndarray | None = None  # (N,) uint64 xxh3-64 per image member, None in older tables
    order_shard: np.ndarray | None = None  # (N,) int32 one-process shard of a merged split conversion, else None

    @property
    def order_shards(self) -> np.ndarray:
        """The shard of each sample the shuffle permutes: a one-process conversion's (``order_shard``) where the
        table holds it, else the physical one."""
        return self.shard if self.order_shard is None else self.order_shard

    def __len__(self) -> int:
        return len(self.shard)

    def key(self, i: int) -> str:
        return self.table.column("key")[i].as_py()

    def path(self, i: int) -> str:
        return self.table.column("path")[i].as_py()


def table_schema(names: object) -> pa.Schema:
    """The schema's own columns for a table holding ``names``: ``SCHEMA``'s, the label after ``size`` when there is
    one (where it always was), the checksum, a part's record sizes and a merge's order shards last."""
    fields = list(SCHEMA)
    if LABEL_FIELD.name in names:  # type: ignore[operator]
        fields.insert(SCHEMA.get_field_index("width"), LABEL_FIELD)
    fields.extend(f for f in _OPTIONAL if f.name in names)  # type: ignore[operator]
    return pa.schema(fields)


SCHEMA_WITH_CHECKSUM = table_schema({LABEL_FIELD.name, CHECKSUM_FIELD.name})  # a classification table's since 1.1


def write_sample_table(path: str | Path, columns: dict[str, list]) -> None:
    """Write the table atomically (temp file, then rename); columns beyond ``SCHEMA``'s (declared fields) follow
    its own, with the types Arrow gives them."""
    schema = table_schema(columns)
    for name, values in columns.items():
        if name not in schema.names:
            schema = schema.append(pa.field(name, values.type if isinstance(values, (pa.Array, pa.ChunkedArray))
                                            else pa.array(values).type))
    table = pa.Table.from_pydict(columns, schema=schema)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, schema) as writer:
        writer.write_table(table)
    write_atomic(path, sink.getvalue().to_pybytes())


def read_sample_table(path: str | Path, data: bytes | None = None, declared: frozenset[str] | None = None
                      ) -> SampleTable:
    """Memory-map (or, with ``data``, the bytes of a remote copy) and validate the table; raises
    DataioError naming the file. ``declared``: the columns the manifest's fields add (``sample_fields``); None
    when not known (a label column is then taken as the samples' classes)."""
    try:
        source = map_input(path) if data is None else pa.BufferReader(data)
        table = pa.ipc.open_file(source).read_all()
    except (OSError, pa.ArrowInvalid) as e:
        raise DataioError(f"{path}: cannot read sample table ({e})") from None
    problem = schema_problem(table, declared or frozenset())
    if problem:
        raise DataioError(f"{path}: {problem}")

    def column(name: str) -> np.ndarray:
        return table.column(name).to_numpy()

    names = table.schema.names
    # a label the manifest does not declare (older pair and box folders' -1s, or a column added by hand) is never
    # handed out as the samples' classes
    labelled = LABEL_FIELD.name in names and (declared is None or LABEL_FIELD.name in declared)
    sample_table = SampleTable(
        column("shard"), column("offset"), column("size"), column("label") if labelled else None,
        column("width"), column("height"), table, column(CHECKSUM_FIELD.name) if CHECKSUM_FIELD.name in names else None,
        column(ORDER_SHARD_FIELD.name) if ORDER_SHARD_FIELD.name in names else None,
    )
    return sample_table


def schema_problem(table: pa.Table, declared: frozenset[str] = frozenset()) -> str | None:
    """What is wrong with the table's columns, in one line naming the column (the expected and found types), or None.

    Before, the whole schema was printed (9 lines) and the reader had to find the column that differed. The
    table holds the columns of ``SCHEMA`` and may hold those the manifest declares (a superset, never an exact
    schema: one added field does not make every reader refuse the folder); any other column is refused, and so
    is an Arrow extension type, whatever its name (pyarrow once unpickled one: CVE-2023-47248). The ``label``
    column is one of its own where the fields declare a class label (classification) or the table holds one
    (folders of other kinds packed before December 2026).
    """
    names = set(table.schema.names)  # the label when the fields declare one (or it is there), the checksum since 1.1
    expected = table_schema({f.name for f in _OPTIONAL} & names | {LABEL_FIELD.name} & (names | declared))
    for field in expected:
        found = table.schema.get_all_field_indices(field.name)
        if not found:
            return f"sample table column {field.name!r} is missing"
        if len(found) > 1:
            return f"sample table column {field.name!r} appears {len(found)} times"
        kind = table.schema.field(found[0]).type
        if kind != field.type:
            return f"sample table column {field.name!r} has type {kind}, expected {field.type}"
        if field.name != "path" and table.column(found[0]).null_count:  # null counts are metadata: no data read
            return f"sample table column {field.name!r} has {table.column(found[0]).null_count} empty (null) values"
    extra = [name for name in table.schema.names if name not in expected.names and name not in declared]
    if extra:
        return (f"sample table column {extra[0]!r} is not one of {', '.join(expected.names)}"
                f"{' nor a declared field' if declared else ''}")
    extension = [f.name for f in table.schema if isinstance(f.type, pa.ExtensionType)]
    if extension:
        return f"sample table column {extension[0]!r} has an extension type, which dataio never reads"
    return None  # columns are read by name: their order does not matter


# A single image member larger than this is a damaged table, not an image (and would be a MemoryError).
MAX_MEMBER_BYTES = 1 << 30


def table_faults(table: SampleTable, shard_bytes: list[int], num_classes: int) -> dict[int, str]:
    """Rows of ``table`` that do not agree with the manifest, each with the reason (vectorised, no reads).

    A shard index outside the manifest's shards (negative ones included), a
    label outside its classes (when it has classes), a member that does not
    lie inside its shard or is absurdly large, and bytes that overlap another
    row's (``row_overlaps``) are reported; reading such a row would otherwise
    read the wrong bytes (another sample's, without any error), allocate
    without bound, or fail with an IndexError that names nothing.
    """
    faults: dict[int, str] = {}

    def flag(mask: np.ndarray, reason) -> None:
        for row in np.flatnonzero(mask).tolist():
            faults.setdefault(row, reason(row))

    shard_ok = (table.shard >= 0) & (table.shard < len(shard_bytes))
    flag(~shard_ok, lambda r: f"shard index {int(table.shard[r])} is not in 0..{len(shard_bytes) - 1}")
    if num_classes and table.label is not None:
        flag((table.label < 0) | (table.label >= num_classes),
             lambda r: f"label {int(table.label[r])} is not in 0..{num_classes - 1}")
    flag(table.size > MAX_MEMBER_BYTES, lambda r: f"size {int(table.size[r])} bytes is absurd (> {MAX_MEMBER_BYTES})")
    limit = np.asarray(shard_bytes, dtype=np.int64)[np.where(shard_ok, table.shard, 0)]
    outside = shard_ok & ((table.offset < 0) | (table.size < 0) | (table.offset > limit - table.size))
    flag(outside, lambda r: f"bytes {int(table.offset[r])}+{int(table.size[r])} are not inside the shard "
                            f"({int(limit[r])} bytes)")
    inside = shard_ok & ~outside & (table.size <= MAX_MEMBER_BYTES)
    for row, reason in overlapping_rows(table.shard, table.offset, table.size, shard_bytes, inside, table.key).items():
        faults.setdefault(row, reason)
    return faults
