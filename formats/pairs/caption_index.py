"""What ``dataio index`` reads of an image-text pair beside its image: the ``.txt`` caption and the ``.json``.

img2dataset's tars (and LAION's) hold ``KEY.jpg`` (or ``.png``/``.webp``), ``KEY.txt`` and ``KEY.json`` per
sample and no ``.cls``. The policy for each awkward pair, one line each in ``rejected.jsonl`` naming
``TAR/KEY`` (nothing is dropped without a line, and nothing else is lost):

- no ``.txt``, a caption that is not text (``caption_text``: not UTF-8, NUL bytes, empty or only white space
  or control characters), or longer than
  ``MAX_CAPTION_BYTES``: the pair is not indexed (a caption is what a pair is for);
- no image member, or one whose header does not read: not indexed (as for classification);
- a ``.json`` that is not JSON (or not an object, or larger than ``MAX_META_BYTES``): the pair is indexed
  without its metadata (``json_offset`` -1), listed as kept; a missing ``.json`` is not listed (webdataset
  tars written by other tools often have none).

Members are read as bytes through explicit handlers: the caption decoded as UTF-8, the metadata parsed by
``json.loads``; nothing else is read.
"""

from __future__ import annotations

import json
import os

from dataio.formats.pairs.pair_fields import MAX_META_BYTES, caption_text, caption_too_long
from dataio.formats.dataset.shard_members import CAPTION_MEMBER, META_MEMBER
from dataio.formats.dataset.wds_shards import MemberLocation

CAPTION_NEEDED = f"a .{CAPTION_MEMBER} caption"
NO_META = [-1, 0]  # json_offset, json_size of a pair without usable metadata


def _read(handle, member: MemberLocation) -> bytes:
    return os.pread(handle.fileno(), member.size, member.offset)


def pair_text(handle, by_ext: dict[str, MemberLocation], where: str,
              max_caption: int) -> tuple[list | None, str | None, list[dict[str, str]]]:
    """``([caption, json_offset, json_size], None, notes)`` for an indexable pair, or ``(None, reason, notes)``;
    ``notes`` lists what was kept despite a fault (a ``.json`` that is not JSON)."""
    caption = by_ext.get(CAPTION_MEMBER)
    if caption is None:
        return None, f"lacks {CAPTION_NEEDED}", []
    if caption.size > max_caption:  # never read whole
        return None, caption_too_long(caption.size, max_caption), []
    data = _read(handle, caption)
    text, problem = caption_text(data, max_caption)
    if text is None:
        return None, problem, []
    meta, notes = NO_META, []
    member = by_ext.get(META_MEMBER)
    if member is not None:
        reason = _meta_problem(handle, member)
        if reason is None:
            meta = [member.offset, member.size]
        else:
            notes.append({"path": f"{where}.{META_MEMBER}", "reason": f"{reason}: the pair is indexed without its "
                                                                      "metadata"})
    return [text, *meta], None, notes


def _meta_problem(handle, member: MemberLocation) -> str | None:
    if member.size > MAX_META_BYTES:
        return f".json of {member.size:,} bytes is larger than metadata is ({MAX_META_BYTES:,} at most)"
    try:
        value = json.loads(_read(handle, member))
    except (ValueError, RecursionError) as e:  # UnicodeDecodeError is a ValueError
        return f".json is not JSON ({type(e).__name__}: {str(e)[:80]})"
    if not isinstance(value, dict):
        return f".json is a JSON {type(value).__name__}, not an object"
    return None
