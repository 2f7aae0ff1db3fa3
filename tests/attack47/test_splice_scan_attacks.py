"""Attack 47 on the splice's block scan for restart markers (jpeg_splice.c find_intervals: AVX-512 / AVX2 blocks,
memchr in plain C and past the last block). Entropy data crafted after real headers: fill bytes before markers,
runs of 0xFF, 0xFF as the last byte, scan data of exactly 31..65 bytes, RST after EOI, no EOI, markers out of
sequence or past the header's count, a DRI that lies; every tier must answer as plain C. Also many threads splicing
while another changes the tier, and a 20 MB scan of 0xFF (time linear). All held; the same corpus under a C harness
built with -fsanitize=address,undefined over exact-size malloc'd buffers read nothing outside data[0:size]."""

from __future__ import annotations

import io
import random
import threading
import time

import numpy as np
import pytest

from dataio.formats.images.synthetic import synthetic_image
from dataio.formats.jpeg import cpu_tier
from dataio.images.turbo_decode import REGION_DECODE

pytestmark = pytest.mark.skipif(not REGION_DECODE, reason="dataio.formats.jpeg._jpeg_codec not built")
from dataio.formats.jpeg import _jpeg_codec  # noqa: E402  (after the skip mark: absent when not built)

HERE_TIERS = cpu_tier.TIERS[: cpu_tier.TIERS.index(cpu_tier.cpu_tier()) + 1]
BOXES = [(0, 0, 8, 8), (8, 0, 16, 8), (16, 16, 40, 40), (40, 0, 96, 8), (88, 24, 96, 32)]


def _file(width: int, height: int, interval: int, seed: int = 0) -> tuple[bytes, int, int]:
    """A JPEG with restart markers, where its scan starts, and its interval count."""
    buffer = io.BytesIO()
    synthetic_image(seed, np.random.default_rng(seed)).resize((width, height)).save(buffer, format="JPEG")
    data = _jpeg_codec.add_restart_markers(buffer.getvalue(), interval)
    i = 2
    while data[i + 1] != 0xDA:
        i += 2 + (data[i + 2] << 8 | data[i + 3])
    start = i + 2 + (data[i + 2] << 8 | data[i + 3])
    count = 1 + sum(data[k] == 0xFF and 0xD0 <= data[k + 1] <= 0xD7 for k in range(start, len(data) - 1))
    return data, start, count


def _scan(head: bytes, count: int, rnd: random.Random, *, fill: int = 0, longest: int = 70) -> bytes:
    """``head`` + ``count`` intervals of random stuffed bytes, ``fill`` 0xFF before each marker, RSTs, EOI."""
    out = bytearray(head)
    for i in range(count):
        for _ in range(rnd.randrange(longest)):
            byte = 0xFF if rnd.random() < 0.2 else rnd.randrange(255)
            out += bytes([byte, 0]) if byte == 0xFF else bytes([byte])
        out += b"\xff" * fill + (bytes([0xFF, 0xD0 + i % 8]) if i + 1 < count else b"\xff\xd9")
    return bytes(out)


def _crafted(seed: int) -> list[bytes]:
    rnd = random.Random(seed)
    files = []
    for data, start, count in (_file(96, 32, 1), _file(96, 48, 2, 1)):
        head = data[:start]
        files.append(data)
        for trial in range(12):
            whole = _scan(head, count, rnd, fill=rnd.choice([0, 0, 1, 2, 31, 63, 64, 65]),
                          longest=rnd.choice([1, 3, 70]))
            files += [whole, whole[:-1], whole[:-2] + b"\xff", whole + b"\xff", whole + b"\xff\xd0\xff\xd1",
                      whole[:-2] + b"\xff\xd0\xff\xd9", whole[:-2]]
            for n in (31, 32, 33, 63, 64, 65):
                files += [head + b"\xff" * n, head + b"\xff" * n + b"\xd9",
                          head + bytes(rnd.randrange(256) for _ in range(n))]
            moved = bytearray(whole)
            marks = [k for k in range(start, len(moved) - 1) if moved[k] == 0xFF and 0xD0 <= moved[k + 1] <= 0xD7]
            moved[rnd.choice(marks) + 1] = 0xD0 + rnd.randrange(8)  # out of sequence (or by chance in it)
            files.append(bytes(moved))
            lying = bytearray(whole)
            dri = lying.find(b"\xff\xdd")
            lying[dri + 5] = rnd.choice([1, 2, 3, 4, 6, 12, 255])
            files.append(bytes(lying))
    return files


def _answers(data: bytes) -> list:
    return [_jpeg_codec.splice(data, *box) for box in BOXES]


@pytest.mark.skipif(len(HERE_TIERS) < 2, reason="one tier on this CPU: nothing to compare")
def test_crafted_entropy_data_gives_plain_cs_answer_on_every_tier(restored_tier):
    files, cuts = _crafted(47), 0
    for data in files:
        answers = []
        for tier in HERE_TIERS:
            cpu_tier.use_tier(tier)
            answers.append(_answers(data))
        assert all(a == answers[0] for a in answers), data[-80:].hex()
        cuts += sum(cut is not None for cut in answers[0])
    assert cuts > 200  # the whole crafted files were cut: the comparison covers the scan's hits


@pytest.mark.skipif(len(HERE_TIERS) < 2, reason="one tier on this CPU: nothing to compare")
def test_threads_splicing_while_the_tier_changes_all_get_plain_cs_answer(restored_tier):
    files = _crafted(3)[:120]
    cpu_tier.use_tier("scalar")
    expected = [_answers(data) for data in files]
    stop, wrong = threading.Event(), []

    def splice():
        for _ in range(3):
            for data, want in zip(files, expected):
                if _answers(data) != want:
                    wrong.append(len(data))

    def flip():
        rnd = random.Random(0)
        while not stop.is_set():
            cpu_tier.use_tier(rnd.choice(HERE_TIERS))

    flipper = threading.Thread(target=flip)
    workers = [threading.Thread(target=splice) for _ in range(4)]
    flipper.start()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    stop.set()
    flipper.join()
    assert wrong == []


def test_a_scan_of_twenty_megabytes_of_0xff_is_declined_in_linear_time(restored_tier):
    data, start, _ = _file(4096, 2048, 1)
    for tier in HERE_TIERS:
        cpu_tier.use_tier(tier)
        began = time.perf_counter()
        assert _jpeg_codec.splice(data[:start] + b"\xff" * 20_000_000, 100, 100, 200, 200) is None
        assert _jpeg_codec.splice(data[:start] + b"\xff\x00" * 10_000_000, 100, 100, 200, 200) is None
        assert time.perf_counter() - began < 2.0, tier
