"""Parquet files in the Hugging Face image-dataset layout, as a source of ``dataio convert images``.

This is how ImageNet-1k ships on the Hub: ``data/train-00000-of-00294.parquet`` ..., each with an
``image`` column (a struct of ``bytes`` and ``path``, HF's ``Image`` feature) and an integer
``label`` column, the class names in the schema's ``huggingface`` metadata (a ``ClassLabel``).
Columns are named by ``image_column``/``label_column``; a plain binary image column is taken too.

Only the label column is read to list the samples (a column projection: no image bytes), so the
conversion's fingerprint and resume position are known up front; image bytes are then streamed in
row order, one record batch of at most ``BATCH_BYTES`` at a time, so memory stays bounded whatever
the file and image sizes.

A row whose struct holds a ``path`` and no bytes (what ``datasets``' ``to_parquet`` writes for images
cast from files: it embeds the bytes only on ``push_to_hub``) is read from that file: an absolute path
as it is, a relative one from the Parquet file's folder, else from the current folder (``datasets``'
``Image.decode_example`` opens it relative to the current folder). Otherwise the row is rejected.
"""

from __future__ import annotations

import glob
import os
import json
import posixpath
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from dataio.formats.images.class_names import numbered_classes, read_class_names
from dataio.formats.errors import DataioError, UsageError
from dataio.formats.file_gate import open_input, open_parquet
from dataio.formats.remote.source_files import RemoteRoot, open_parquet_source as open_parquet_file
from dataio.formats.parquet_values import UnreadValue, ValuesUnread, bounded_values, chunk_over

# What pyarrow raises for a damaged file: its own errors, OSError, and UnicodeDecodeError for a footer whose
# column names are not UTF-8 (found by tests/test_fuzz.py); each is that file's one rejected row, never a traceback.
DAMAGED_PARQUET = (pa.ArrowException, OSError, UnicodeDecodeError)

BATCH_ROWS = 64  # most rows per streamed record batch: ~7 MB of ImageNet JPEGs ...
BATCH_BYTES = 16 << 20  # ... or fewer, by the row groups' bytes per row: 3 to 4 camera photos
PAGE_BOUND = 64 << 20  # most bytes of one snappy/lz4 page decompressed whole when its values are read page by page


@dataclass(frozen=True)
class LocalFile:
    """The image file a path-only row names, to be read where it is prepared."""

    path: str


@dataclass(frozen=True)
class ParquetRow:
    """One row: its id (``FILE#ROW``), label (None if missing) and image: bytes, the file its path names when
    the row holds no bytes, or None with ``missing`` saying why."""

    id: str
    label: int | None
    data: bytes | LocalFile | None
    path: str  # the image's own path from the struct, else the id
    missing: str = ""
    damaged: str = ""  # the row could not be read: its row group (or file) is damaged, and why
    value: object = None  # the second column's value as read: an image-text pair's caption


def parquet_files(src: Path) -> list[Path] | None:
    """The Parquet files of ``src``, or None if it is not a Parquet source (an image folder).

    ``src`` is a ``.parquet`` file, a glob of them (``data/train-*.parquet``), or a folder holding
    them directly or in ``data/`` (a Hub repository). A folder holding several splits (``train-…``,
    ``validation-…``) is refused, naming them: mixing splits is never what is wanted.
    """
    text = str(src)
    if any(c in text for c in "*?["):
        files = sorted(Path(p) for p in glob.glob(text) if p.endswith(".parquet"))
        if not files:
            raise UsageError(f"{src}: no .parquet files match")
        return files
    if src.is_file():
        return [src] if src.suffix == ".parquet" else None
    if not src.is_dir():
        return None
    files = sorted(src.glob("*.parquet")) or sorted((src / "data").glob("*.parquet"))
    if not files:
        return None
    refuse_mixed_splits(src, [f.name for f in files], str(files[0].parent))
    return files


def refuse_mixed_splits(src: object, names: list[str], folder: str) -> None:
    """UsageError when the file ``names`` (in ``folder``) hold several splits (``train-…``, ``validation-…``)."""
    splits = sorted({m[1] for name in names if (m := _SPLIT_FILE.fullmatch(name))})
    if len(splits) > 1:
        raise UsageError(f"{src} holds the splits {', '.join(splits)}: give one, e.g. "
                         f"'{folder}/{splits[0]}-*.parquet'")


# Hub file names: "{split}-{index}-of-{count}.parquet"
_SPLIT_FILE = re.compile(r"(.+?)-\d{5}-of-\d{5}\.parquet")


ParquetSource = Path | RemoteRoot  # a local file, or an object of a URL (read by range requests)
ParquetFiles = list[Path] | list[RemoteRoot]  # a source's files: all local, or all objects of one URL


def open_parquet_input(file: ParquetSource) -> pq.ParquetFile:
    """The file's reader: a local one through the gate (pyarrow given a path waits on a FIFO), an object by range
    requests, each read only the range pyarrow asks for (footers, the label column: no image bytes after it)."""
    return open_parquet_file(file, read_ahead=False) if isinstance(file, RemoteRoot) else open_parquet(file)


def _features(schema: pa.Schema, file: ParquetSource) -> dict:
    """HF's ``features`` from the schema's ``huggingface`` metadata ({} when absent or not HF's); DataioError
    naming ``file`` for JSON nested past what ``json`` reads (its class names would be lost unsaid)."""
    raw = (schema.metadata or {}).get(b"huggingface")
    try:
        features = json.loads(raw)["info"]["features"] if raw else {}
    except RecursionError:  # json's reader recurses per level: a few hundred KB of brackets exhaust it
        raise DataioError(f"{file}: its 'huggingface' schema metadata nests too deep to read (HF's features nest "
                          "a few levels); rewrite the file without it, or with the features datasets writes") from None
    except (ValueError, KeyError, TypeError):
        return {}
    return features if isinstance(features, dict) else {}


@dataclass(frozen=True)
class ParquetImages:
    """The files, columns and class names of a Parquet image source, and its rows' (id, label) list."""

    root: ParquetSource  # the files' common folder: the row ids are relative to it
    files: tuple[ParquetSource, ...]
    image_column: str
    label_column: str  # the second column streamed (labels, or an image-text pair's captions); "": none
    classes: tuple[str, ...]
    rows: tuple[tuple[str, int], ...]  # (id, label or -1 when missing), in file and row order
    value_limit: int = 0  # the second column's values are byte strings of at most this many bytes packed (0: any)

    def row_sizes(self) -> np.ndarray:
        """``(rows,)`` int64: each row's share of its row group's bytes (from the footers: no data read), to
        balance a multi-node conversion by bytes."""
        sizes = []
        for file in self.files:
            try:
                metadata = open_parquet_input(file).metadata
            except DAMAGED_PARQUET:  # a damaged file: its one rejected row
                sizes.append(np.zeros(1, dtype=np.int64))
                continue
            for group in range(metadata.num_row_groups):
                info = metadata.row_group(group)
                sizes.append(np.full(info.num_rows, info.total_byte_size // max(1, info.num_rows), dtype=np.int64))
        return np.concatenate(sizes) if sizes else np.zeros(0, dtype=np.int64)

    def stream(self, start: int = 0) -> Iterator[ParquetRow]:
        """Rows from number ``start`` on, in order, their image bytes read one batch at a time (row groups
        wholly before ``start`` are not read). A damaged row group's rows (a damaged file's one row) come as
        rows with ``damaged`` set, and the rest go on."""
        first = 0  # number of the file's first row
        for file in self.files:
            try:
                reader = open_parquet_input(file)
            except DAMAGED_PARQUET as e:  # listed as one row by scan_parquet_images
                if first >= start:
                    name = _name(self.root, file)
                    yield ParquetRow(name, None, None, name, damaged=f"not a readable Parquet file ({plain(e)})")
                first += 1
                continue
            count = reader.metadata.num_rows
            if first + count > start:
                yield from self._file_rows(reader, file, start - first)
            first += count

    def _columns(self) -> list[str]:
        """The columns streamed: the image's, and the second one (labels, captions) unless there is none."""
        return [self.image_column, self.label_column] if self.label_column else [self.image_column]

    def _file_rows(self, reader: pq.ParquetFile, file: ParquetSource, skip: int) -> Iterator[ParquetRow]:
        """The file's rows from ``skip`` on, one row group at a time, so a damaged one costs only its own rows; a
        row group that fails is read again one row at a time, so only the rows from the failing one on are lost."""
        name, row = _name(self.root, file), 0
        for group in range(reader.metadata.num_row_groups):
            end = row + reader.metadata.row_group(group).num_rows
            if end <= skip:
                row = end
                continue
            done = max(row, skip)  # the first row not yet given
            for batch_rows in dict.fromkeys((_batch_rows(reader.metadata, [group]), 1)):  # once if already 1
                try:
                    for number, parquet_row in self._group_rows(reader, file, group, row, batch_rows):
                        if number >= done:
                            yield parquet_row
                            done = number + 1
                    break
                except DAMAGED_PARQUET as e:
                    if batch_rows > 1:
                        continue
                    reason = (f"row group {group} (rows {row}-{end - 1}) is damaged"
                              f"{f' from row {done}' if done > row else ''}: {plain(e)}")
                    yield from (ParquetRow(f"{name}#{lost}", None, None, f"{name}#{lost}", damaged=reason)
                                for lost in range(done, end))
                    break
            row = end

    def _group_rows(self, reader: pq.ParquetFile, file: ParquetSource, group: int, first: int, batch_rows: int
                    ) -> Iterator[tuple[int, ParquetRow]]:
        """(row number, row) for each row of the group, ``batch_rows`` at a time; the second column's byte strings
        read page by page (``parquet_values``) when its footer says some value is over ``value_limit``."""
        name, columns = _name(self.root, file), self._columns()
        values: list | None = None
        if self.value_limit and len(columns) > 1:
            chunk_column = _leaf_index(reader.metadata, columns[1])
            if chunk_column is not None and chunk_over(reader.metadata, group, chunk_column, self.value_limit):
                values = self._bounded_values(reader, file, group, chunk_column)
                columns = columns[:1]
        number = first
        for batch in reader.iter_batches(batch_size=batch_rows, row_groups=[group], columns=columns):
            images = batch.column(0).to_pylist()
            if values is not None:
                labels = values[number - first:number - first + len(images)]
            elif batch.num_columns > 1:
                labels = _as_bytes(batch.column(1)).to_pylist() if self.value_limit else batch.column(1).to_pylist()
            else:
                labels = [None] * len(images)
            for image, label in zip(images, labels, strict=True):
                yield number, _row(f"{name}#{number}", image, label, _folder(file))
                number += 1

    def _bounded_values(self, reader: pq.ParquetFile, file: ParquetSource, group: int, column: int) -> list:
        """The group's values of the second column, each of at most ``value_limit`` bytes held (longer ones are
        ``TooLong``); a chunk this reader cannot read is an ``UnreadValue`` per row naming why."""
        rows = reader.metadata.row_group(group).num_rows
        try:
            with _open_bytes(file) as handle:
                return bounded_values(handle, reader.metadata, group, column, self.value_limit, PAGE_BOUND)
        except (ValuesUnread, OSError) as e:
            size = reader.metadata.row_group(group).column(column).total_uncompressed_size
            reason = (f"row group {group}: column {self.label_column!r} holds {size:,} bytes uncompressed, more "
                      f"than {rows} values of at most {self.value_limit:,} bytes can, and was not read page by "
                      f"page ({e}): its rows are not read")
            return [UnreadValue(reason)] * rows


def plain(error: BaseException) -> str:
    """An Arrow/Parquet error as one line of plain text: control bytes escaped, lines joined."""
    text = " ".join(str(error).split("\n")).strip() or type(error).__name__
    return re.sub(r"[\x00-\x1f\x7f]", lambda m: f"\\x{ord(m[0]):02x}", text)


def _open_bytes(file: ParquetSource):
    """The file as bytes, for a column read page by page: an object's each read its own range (no read-ahead)."""
    if isinstance(file, RemoteRoot):
        remote_file: RemoteRoot = file
        return remote_file.open(read_ahead=False)
    return open_input(file)


def _common_root(files: ParquetFiles) -> ParquetSource:
    """The folder the row ids are relative to: the files' common folder (a single file's own folder); for URLs the
    same (``s3://b/data/train-*.parquet``'s rows are ``train-00000-of-00002.parquet#ROW``, as a local copy's)."""
    if files and isinstance(files[0], RemoteRoot):
        scheme = files[0].url.split("://", 1)[0]
        folders = [f.url.split("://", 1)[1].rsplit("/", 1)[0] for f in files if isinstance(f, RemoteRoot)]
        return RemoteRoot(f"{scheme}://{posixpath.commonpath(folders)}", files[0].storage_options)
    return Path(os.path.commonpath([str(f.parent) for f in files]))


def _name(root: ParquetSource, file: ParquetSource) -> str:
    if isinstance(file, RemoteRoot) and isinstance(root, RemoteRoot):
        return file.url[len(root.url) + 1:]
    return str(Path(str(file)).relative_to(str(root)))


def _folder(file: ParquetSource) -> Path | None:
    """Where a path-only row's relative path is looked for: the local file's folder; None for an object of a URL."""
    return None if isinstance(file, RemoteRoot) else file.parent


def _batch_rows(metadata: pq.FileMetaData, groups: list[int]) -> int:
    """Rows per record batch: ``BATCH_ROWS``, fewer where the groups' rows are large (``BATCH_BYTES``)."""
    row_bytes = max((metadata.row_group(g).total_byte_size // max(1, metadata.row_group(g).num_rows)
                     for g in groups), default=1)
    return max(1, min(BATCH_ROWS, BATCH_BYTES // max(1, row_bytes)))


def _leaf_index(metadata: pq.FileMetaData, name: str) -> int | None:
    """The column chunk index of the top-level leaf column ``name``, or None (a nested column)."""
    return next((i for i in range(metadata.num_columns) if metadata.schema.column(i).path == name), None)


def _as_bytes(column: pa.Array) -> pa.Array:
    """A string column as binary (no copy, no UTF-8 check): a value that is not UTF-8 is its own row's problem, not
    a ``UnicodeDecodeError`` that rejects the row group."""
    if pa.types.is_string(column.type):
        return column.cast(pa.binary())
    if pa.types.is_large_string(column.type):
        return column.cast(pa.large_binary())
    return column


def _row(row_id: str, image, value, folder: Path | None) -> ParquetRow:
    label = value if isinstance(value, int) and not isinstance(value, bool) else None
    if not isinstance(image, dict):
        return ParquetRow(row_id, label, image or None, row_id, "" if image else "no image bytes in the row",
                          value=value)
    data, path = image.get("bytes"), image.get("path")
    if data:
        return ParquetRow(row_id, label, data, path or row_id, value=value)
    if not path:
        return ParquetRow(row_id, label, None, row_id, "no image bytes and no path in the row", value=value)
    if folder is None:  # a URL's row: a path it names is never read from this machine's disk
        return ParquetRow(row_id, label, None, path, f"no image bytes in the row (its path {path!r} is not read: a "
                          "Parquet file given as a URL must hold its images' bytes)", value=value)
    file = local_image_file(path, folder)
    if file is None:
        return ParquetRow(row_id, label, None, path, f"no image bytes in the row, and its path {path!r} is not a "
                          "file (absolute, or relative to the Parquet file's folder or the current folder)",
                          value=value)
    return ParquetRow(row_id, label, LocalFile(file), path, value=value)


def local_image_file(path: str, folder: Path) -> str | None:
    """The file a path-only row names: ``path`` if absolute, else under ``folder`` (the Parquet file's), else
    under the current folder (where ``datasets`` opens it); None if none is a file (URLs included)."""
    if "://" in path or "::" in path:  # hf://, zip://...::: remote or archived, not a local file
        return None
    candidates = [path] if os.path.isabs(path) else [os.path.join(folder, path), path]
    return next((os.path.abspath(c) for c in candidates if os.path.isfile(c)), None)


def scan_parquet_images(files: ParquetFiles, *, image_column: str = "image", label_column: str = "label",
                        classes_file: Path | None = None) -> ParquetImages:
    """List a Parquet image source (``parquet_files``): class names and rows (labels only are read)."""
    src = _common_root(files)
    class_names: tuple[str, ...] | None = None
    rows: list[tuple[str, int]] = []
    for file in files:
        reader = open_parquet_source(file, image_column, label_column, "label columns")
        if reader is None:  # a damaged footer: the file is one rejected row, the rest go on
            rows.append((_name(src, file), -1))
            continue
        schema = reader.schema_arrow
        if not pa.types.is_integer(schema.field(label_column).type):
            raise UsageError(f"{file}: column {label_column!r} is {schema.field(label_column).type}, not integer labels")
        names = _features(schema, file).get(label_column, {}).get("names")
        if isinstance(names, list) and all(isinstance(n, str) for n in names):
            if class_names is not None and tuple(names) != class_names:
                raise UsageError(f"{file}: its class names differ from those of {files[0]}")
            class_names = tuple(names)
        name = _name(src, file)
        labels: list[int | None] = []
        for group in range(reader.metadata.num_row_groups):  # a damaged group: its rows are rejected when streamed
            try:
                labels += reader.read_row_group(group, columns=[label_column]).column(0).to_pylist()
            except DAMAGED_PARQUET:
                labels += [None] * reader.metadata.row_group(group).num_rows
        rows += [(f"{name}#{row}", label if label is not None else -1) for row, label in enumerate(labels)]
    if classes_file is not None:
        class_names = read_class_names(classes_file)
    if class_names is None:
        class_names = numbered_classes([label for _, label in rows])
    return ParquetImages(src, tuple(files), image_column, label_column, class_names, tuple(rows))


def open_parquet_source(file: ParquetSource, image_column: str, other_column: str, other: str) -> pq.ParquetFile | None:
    """``file`` opened, with ``image_column`` holding image bytes and ``other_column`` present (a UsageError naming
    the file and the columns it has, with ``other`` saying which flag names the second one); None when its
    footer is damaged (that file is then one rejected row of its source)."""
    try:
        reader = open_parquet_input(file)
        schema = reader.schema_arrow
    except DAMAGED_PARQUET:
        return None
    for column in (image_column, other_column):
        if column not in schema.names and "objects" in schema.names:  # HF's detection layout: not classes
            raise UsageError(f"{file}: no column {column!r}, and an 'objects' column: a detection Parquet, which "
                             "dataio convert hub-detection packs")
        if column not in schema.names:
            raise UsageError(f"{file}: no column {column!r} (columns: {', '.join(schema.names)}); name the image "
                             f"and {other}")
    check_image_column(file, schema, image_column)
    return reader


def check_image_column(file: ParquetSource, schema: pa.Schema, image_column: str) -> None:
    """UsageError naming the file unless ``image_column`` holds image bytes (HF's struct, or binary)."""
    image_type = schema.field(image_column).type
    if not (pa.types.is_binary(image_type) or pa.types.is_large_binary(image_type)
            or (pa.types.is_struct(image_type) and image_type.get_field_index("bytes") >= 0)):
        raise UsageError(f"{file}: column {image_column!r} is {image_type}, not image bytes "
                         "(a struct of bytes and path, or binary)")
