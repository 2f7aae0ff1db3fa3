"""Stage timing: thread-safe totals per epoch, nested laps, cheap enough to leave on."""

from __future__ import annotations

import json
import threading
import time

from dataio.pipeline.stage_times import StageTimes


def test_totals_from_many_threads_are_exact_and_per_epoch():
    times = StageTimes()

    def work():
        for _ in range(1000):
            times.add("decode", 0.001)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    times.begin(1)
    times.add("read", 0.5, calls=2)
    stats = times.as_dict()
    assert stats["0"]["decode"]["calls"] == 8000 and abs(stats["0"]["decode"]["seconds"] - 8.0) < 1e-6
    assert stats["1"] == {"read": {"seconds": 0.5, "calls": 2}}
    assert json.loads(json.dumps(stats)) == stats


def test_lap_nesting_excludes_inner_time_and_flushes_once():
    times = StageTimes()
    lap = times.lap()
    with lap("collate"):
        time.sleep(0.02)
        with lap("read"):
            time.sleep(0.05)
    lap.items = 4
    assert times.seconds() == {}  # nothing reaches the totals before the flush
    lap.flush()
    seconds = times.seconds()
    assert 0.045 < seconds["read"] < 0.2 and 0.015 < seconds["collate"] < 0.045  # collate excludes the read
    assert times.as_dict()["0"]["read"]["calls"] == 4 and lap.finished > 0


def test_range_and_lap_cost_microseconds():
    times = StageTimes()
    lap = times.lap()
    start = time.perf_counter()
    for _ in range(10000):
        with lap("decode"):
            pass
    per_lap = (time.perf_counter() - start) / 10000
    start = time.perf_counter()
    for _ in range(10000):
        with times.range("copy"):
            pass
    per_range = (time.perf_counter() - start) / 10000
    # decoding one image takes milliseconds; three laps per image must stay far below that
    assert per_lap < 20e-6 and per_range < 50e-6, (per_lap, per_range)


def test_a_cpu_clock_times_the_work_not_the_waiting():
    """``clock=time.thread_time`` (the benchmark's stage table): a thread asleep spends no CPU seconds."""
    wall, cpu = StageTimes(), StageTimes(clock=time.thread_time)
    for times in (wall, cpu):
        lap = times.lap()
        with lap("decode"):
            time.sleep(0.05)
        with lap("resize"):
            deadline = time.thread_time() + 0.02
            while time.thread_time() < deadline:  # busy for 20 ms of CPU time
                pass
        lap.flush()
        with times.range("wait"):
            time.sleep(0.05)
    assert wall.seconds()["decode"] >= 0.05 and wall.seconds()["wait"] >= 0.05
    assert cpu.seconds()["decode"] < 0.01 and cpu.seconds()["wait"] < 0.01
    assert 0.02 <= cpu.seconds()["resize"] < 0.03 and wall.seconds()["resize"] >= 0.02
