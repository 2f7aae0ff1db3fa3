"""The splice's scan for restart markers (jpeg_splice.c): AVX-512 and AVX2 compare blocks of bytes for the 0xFF
not followed by 0x00, plain C calls memchr from each 0xFF to the next; every tier must find the same intervals and
decline the same damaged files (a fill byte, a marker out of sequence, a truncation, a stray EOI or segment), also
where a marker straddles two blocks or ends the data."""

from __future__ import annotations

import io
import random

import numpy as np
import pytest

from dataio.formats.jpeg import cpu_tier
from dataio.images.turbo_decode import REGION_DECODE
from dataio.formats.images.synthetic import synthetic_image

pytestmark = pytest.mark.skipif(not REGION_DECODE, reason="dataio.formats.jpeg._jpeg_codec not built")
from dataio.formats.jpeg import _jpeg_codec  # noqa: E402  (after the skip mark: absent when not built)

HERE_TIERS = cpu_tier.TIERS[: cpu_tier.TIERS.index(cpu_tier.cpu_tier()) + 1]


def damaged(data: bytes, rnd: random.Random, kind: int) -> bytes:
    """``data`` with one kind of damage after its headers (kind 0: none)."""
    b, body = bytearray(data), len(data) // 8
    if kind == 1:  # stray 0xFF bytes: stuffing broken, markers invented
        for _ in range(rnd.randint(1, 8)):
            b[rnd.randrange(body, len(b))] = 0xFF
    elif kind == 2:  # fill bytes before whatever follows
        at = rnd.randrange(body, len(b))
        b[at:at] = b"\xff" * rnd.randint(1, 3)
    elif kind == 3:  # truncated
        del b[rnd.randrange(body, len(b)):]
    elif kind == 4:  # a marker of another kind, or out of sequence
        at = rnd.randrange(body, len(b) - 2)
        b[at], b[at + 1] = 0xFF, rnd.choice([0xD0, 0xD3, 0xD7, 0xD9, 0x00, 0xFF, 0xC4, 0xDD])
    elif kind == 5:
        for _ in range(rnd.randint(1, 20)):
            b[rnd.randrange(body, len(b))] = rnd.randrange(256)
    return bytes(b)


@pytest.mark.skipif(len(HERE_TIERS) < 2, reason="one tier on this CPU: nothing to compare")
def test_every_tier_finds_the_same_intervals_in_whole_and_damaged_files(restored_tier):
    rnd = random.Random(7)
    spliced = 0
    for seed in range(3):
        image = synthetic_image(seed, np.random.default_rng(seed)).resize((320, 240))
        buffer = io.BytesIO()
        image.save(buffer, format="JPEG", quality=85)
        data = _jpeg_codec.add_restart_markers(buffer.getvalue(), 2)
        for trial in range(120):
            bytes_ = damaged(data, rnd, trial % 6)
            x0, x1 = sorted(rnd.sample(range(321), 2))
            y0, y1 = sorted(rnd.sample(range(241), 2))
            answers = []
            for tier in HERE_TIERS:
                cpu_tier.use_tier(tier)
                answers.append(_jpeg_codec.splice(bytes_, x0, y0, x1, y1))
            assert all(a == answers[0] for a in answers), (seed, trial, [a is None for a in answers])
            spliced += answers[0] is not None
    assert spliced > 100  # the clean and mildly damaged files were cut: the comparison covers the scan's hits


def test_markers_at_every_offset_of_a_block_are_found(restored_tier):
    """Files whose restart markers fall on every byte of a 64-byte block (and so of a 32-byte one), the last
    bytes included: the same cut on every tier as in plain C, and a cut."""
    rng = np.random.default_rng(3)
    offsets, files = set(), []
    for quality in range(40, 100):
        buffer = io.BytesIO()
        synthetic_image(quality, rng).resize((96, 32)).save(buffer, format="JPEG", quality=quality)
        data = _jpeg_codec.add_restart_markers(buffer.getvalue(), 1)
        offsets |= {i % 64 for i in range(len(data) - 1) if data[i] == 0xFF and 0xD0 <= data[i + 1] <= 0xD9}
        files.append(data)
    assert offsets == set(range(64))
    for data in files:
        answers = []
        for tier in HERE_TIERS:
            cpu_tier.use_tier(tier)
            answers.append([_jpeg_codec.splice(data, x, 0, x + 8, 8) for x in (0, 40, 88)])
        assert all(a == answers[0] for a in answers)
        assert all(cut is not None for cut in answers[0])
