"""One Parquet column chunk of byte strings read page by page, each value at most ``limit`` bytes held.

pyarrow decompresses a column chunk whole, page by page, before a value can be looked at: one caption of 10^9
bytes (a 35 KB zstd file) is a gigabyte in memory, and with it every row of its page (a dictionary page holds
all of them) is lost. This reader is the fallback for a chunk whose footer says it is larger than its values
may be (``chunk_over``): it parses each page's header (Thrift compact protocol) and streams the page body
through a decompressor (``pyarrow.CompressedInputStream``: zstd, gzip, brotli), keeping a value of at most
``limit`` bytes and skipping a longer one in 1 MiB steps (``TooLong`` says its size). Memory is bounded by the
row group's kept values (``rows * limit``), the page's compressed bytes and 1 MiB; a page compressed by a codec
that does not stream (snappy, lz4 raw) is decompressed whole only when its header says it is at most
``page_bound`` bytes, else its rows are one ``UnreadValue`` each, naming the page.

Only flat BYTE_ARRAY columns (no repetition), PLAIN or dictionary encoded, data pages v1 and v2, are read;
anything else is a ``ValuesUnread`` naming why, and the caller rejects the rows it cannot place.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import BinaryIO

import pyarrow as pa
import pyarrow.parquet as pq

SKIP_STEP = 1 << 20  # bytes of an over-long value read (and dropped) at a time
STREAMING = {"ZSTD": "zstd", "GZIP": "gzip", "BROTLI": "brotli"}  # Parquet codec -> pyarrow streaming codec
WHOLE = {"SNAPPY": "snappy", "LZ4": "lz4_raw", "LZ4_RAW": "lz4_raw"}  # whole only; pyarrow says "LZ4" for LZ4_RAW
_DATA, _DICTIONARY, _DATA_V2 = 0, 2, 3  # Parquet PageType
_PLAIN, _DICT_ENCODINGS = 0, (2, 8)  # Encoding: PLAIN; PLAIN_DICTIONARY, RLE_DICTIONARY


@dataclass(frozen=True)
class TooLong:
    """A value longer than the limit, never held: its size."""

    size: int


@dataclass(frozen=True)
class UnreadValue:
    """A value of a page not decompressed (see the module docstring): why."""

    reason: str


class ValuesUnread(Exception):
    """The chunk cannot be read this way (damaged, or an encoding this reader does not know): why, in one line."""


def chunk_over(metadata: pq.FileMetaData, group: int, column: int, limit: int) -> bool:
    """Whether the chunk's uncompressed size (from the footer, nothing decompressed) is more than its rows' values
    of at most ``limit`` bytes can take: PLAIN data (4-byte length + bytes each) and as much again for a
    dictionary, plus 1 MiB of headers and levels. Past it, some value is longer than ``limit``."""
    rows = metadata.row_group(group).num_rows
    return metadata.row_group(group).column(column).total_uncompressed_size > 2 * rows * (limit + 4) + (1 << 20)


def bounded_values(file: BinaryIO, metadata: pq.FileMetaData, group: int, column: int, limit: int,
                   page_bound: int) -> list[bytes | None | TooLong | UnreadValue]:
    """The chunk's values in row order: bytes, None (null), ``TooLong`` or ``UnreadValue``."""
    chunk = metadata.row_group(group).column(column)
    described = metadata.schema.column(column)
    if described.max_repetition_level != 0 or chunk.physical_type != "BYTE_ARRAY":
        raise ValuesUnread(f"column {described.path} is not flat byte strings")
    start = chunk.dictionary_page_offset if chunk.has_dictionary_page and chunk.dictionary_page_offset else \
        chunk.data_page_offset
    end, values, dictionary = start + chunk.total_compressed_size, [], []
    file.seek(start)
    while len(values) < chunk.num_values:
        if file.tell() >= end:
            raise ValuesUnread(f"its pages end after {len(values)} of {chunk.num_values} values")
        header = _struct(file)
        kind, raw_size, size = header.get(1), header.get(2, 0), header.get(3, -1)
        if not 0 <= size <= end - file.tell():
            raise ValuesUnread(f"a page header at byte {file.tell()} claims {size} bytes")
        body = file.read(size)
        if kind == _DICTIONARY:
            page = _opened(body, chunk.compression, raw_size, page_bound)
            if isinstance(page, str):
                raise ValuesUnread(page)
            count = header.get(7, {}).get(1, 0)
            dictionary = [_plain_value(page, limit) for _ in range(count)]
        elif kind in (_DATA, _DATA_V2):
            values += _data_page(header, body, chunk.compression, described.max_definition_level, dictionary,
                                 limit, page_bound, len(values))
    return values[:chunk.num_values]


def _data_page(header: dict, body: bytes, codec: str, max_def: int, dictionary: list, limit: int,
               page_bound: int, first: int) -> list:
    v2 = header.get(1) == _DATA_V2
    info = header.get(8 if v2 else 5, {})
    count, encoding = info.get(1, 0), info.get(4 if v2 else 2, -1)
    if v2:  # levels stand uncompressed before the values; the values may be stored uncompressed
        levels_size = info.get(5, 0) + info.get(6, 0)
        levels = pa.BufferReader(body[:levels_size])
        body = body[levels_size:]
        raw_size = header.get(2, 0) - levels_size
        page = _opened(body, codec if info.get(7, True) else "UNCOMPRESSED", raw_size, page_bound)
    else:
        page = _opened(body, codec, header.get(2, 0), page_bound)
        levels = page
    if isinstance(page, str):
        return [UnreadValue(f"{page} (rows {first}-{first + count - 1} of the row group)")] * count
    defined = [True] * count
    if max_def:
        width = max_def.bit_length()
        size = info.get(5, 0) if v2 else struct.unpack("<i", _exactly(levels, 4))[0]
        defined = [d == max_def for d in _hybrid(_exactly(levels, size), width, count)]
    present = sum(defined)
    if encoding == _PLAIN:
        found = [_plain_value(page, limit) for _ in range(present)]
    elif encoding in _DICT_ENCODINGS:
        width = _exactly(page, 1)[0]
        indices = _hybrid(page.read(present * 9 + 16), width, present)
        if any(i >= len(dictionary) for i in indices):
            raise ValuesUnread(f"a dictionary index past the {len(dictionary)} values of its dictionary page")
        found = [dictionary[i] for i in indices]
    else:
        raise ValuesUnread(f"values in encoding {encoding} (only PLAIN and dictionary pages are read page by page)")
    taken = iter(found)
    return [next(taken) if d else None for d in defined]


def _opened(body: bytes, codec: str, raw_size: int, page_bound: int):
    """A stream of the page's decompressed bytes, or why it is not decompressed."""
    if codec == "UNCOMPRESSED":
        return pa.BufferReader(body)
    if codec in STREAMING:
        return pa.CompressedInputStream(pa.BufferReader(body), STREAMING[codec])
    if codec in WHOLE and raw_size <= page_bound:
        return pa.BufferReader(pa.decompress(body, raw_size, codec=WHOLE[codec]))
    if codec in WHOLE:
        return f"a {codec} page of {raw_size:,} bytes, over the {page_bound:,} decompressed whole"
    return f"pages compressed by {codec}, which are not read page by page"


def _plain_value(page, limit: int) -> bytes | TooLong:
    size = struct.unpack("<I", _exactly(page, 4))[0]
    if size <= limit:
        return _exactly(page, size)
    left = size
    while left:  # read and dropped: never held whole
        step = len(page.read(min(left, SKIP_STEP)))
        if not step:
            raise ValuesUnread(f"a value of {size:,} bytes ends early")
        left -= step
    return TooLong(size)


def _exactly(stream, size: int) -> bytes:
    data = stream.read(size)
    if len(data) != size:
        raise ValuesUnread(f"a page ends {size - len(data)} bytes early")
    return bytes(data)


def _hybrid(data: bytes, width: int, count: int) -> list[int]:
    """``count`` values of Parquet's RLE / bit-packed hybrid encoding at ``width`` bits."""
    out: list[int] = []
    at, step = 0, (width + 7) // 8
    while len(out) < count:
        header, at = _varint(data, at)
        if header & 1:  # bit-packed: groups of 8 values, little-endian bit order
            size = (header >> 1) * width
            bits = int.from_bytes(data[at:at + size], "little")
            at += size
            out += [(bits >> (i * width)) & ((1 << width) - 1) for i in range((header >> 1) * 8)]
        else:  # one value repeated
            if at + step > len(data):
                raise ValuesUnread("levels or indices end early")
            out += [int.from_bytes(data[at:at + step], "little")] * (header >> 1)
            at += step
    return out[:count]


def _varint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if at >= len(data) or shift > 63:
            raise ValuesUnread("a varint ends early")
        byte = data[at]
        value |= (byte & 0x7F) << shift
        at, shift = at + 1, shift + 7
        if not byte & 0x80:
            return value, at


def _stream_varint(file: BinaryIO) -> int:
    value = shift = 0
    while True:
        byte = _exactly(file, 1)[0]
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value
        if shift > 63:
            raise ValuesUnread("a page header's varint is too long")


def _zigzag(value: int) -> int:
    return (value >> 1) ^ -(value & 1)


def _struct(file: BinaryIO, depth: int = 0) -> dict:
    """A Thrift compact-protocol struct: field id -> int, bool or nested dict (binaries and lists skipped)."""
    if depth > 8:
        raise ValuesUnread("a page header nests too deep")
    fields, last = {}, 0
    while True:
        byte = _exactly(file, 1)[0]
        if byte == 0:
            return fields
        kind, delta = byte & 0x0F, byte >> 4
        last = last + delta if delta else _zigzag(_stream_varint(file))
        fields[last] = _value(file, kind, depth)


def _value(file: BinaryIO, kind: int, depth: int):
    if kind in (1, 2):
        return kind == 1
    if kind == 3:
        return _exactly(file, 1)[0]
    if kind in (4, 5, 6):
        return _zigzag(_stream_varint(file))
    if kind == 7:
        return _exactly(file, 8)
    if kind == 8:  # statistics' min and max: skipped, never read (they may be as long as a value)
        file.seek(_stream_varint(file), 1)
        return None
    if kind in (9, 10):
        head = _exactly(file, 1)[0]
        size = head >> 4 if head >> 4 != 15 else _stream_varint(file)
        for _ in range(size):
            _value(file, head & 0x0F if head & 0x0F not in (1, 2) else 3, depth + 1)
        return None
    if kind == 11:
        size = _stream_varint(file)
        types = _exactly(file, 1)[0] if size else 0
        for _ in range(size):
            _value(file, types >> 4, depth + 1)
            _value(file, types & 0x0F, depth + 1)
        return None
    if kind == 12:
        return _struct(file, depth + 1)
    raise ValuesUnread(f"a page header holds Thrift type {kind}")
