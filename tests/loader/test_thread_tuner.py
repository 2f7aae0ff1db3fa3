"""num_workers="auto": the tuner's climb on fake throughput curves, the gate, the budget."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from dataio.pipeline.thread_tuner import ThreadGate, ThreadTuner, ladder, thread_budget


def run(tuner: ThreadTuner, rate, batches: int = 200, samples: int = 256, noise: float = 0.0, seed: int = 0) -> int:
    """Feed ``tuner`` batches finishing at ``rate(threads)`` img/s (times a noise factor) until it is done."""
    rng = np.random.default_rng(seed)
    clock = 0.0
    for _ in range(batches):
        if tuner.done:
            break
        speed = (rate(tuner.threads, clock) if rate.__code__.co_argcount == 2 else rate(tuner.threads)) * (
            1 + noise * rng.standard_normal())
        clock += samples / max(speed, 1e-6)
        tuner.observe(samples, clock)
    assert tuner.done
    return tuner.threads


def test_ladder_rises_by_about_half_and_ends_at_the_budget():
    assert ladder(1) == [1] and ladder(2) == [1, 2] and ladder(5) == [1, 2, 3, 4, 5]
    assert ladder(64) == [1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64]


def test_monotone_curve_climbs_to_the_top_of_the_budget():
    assert run(ThreadTuner(8), lambda t: 1000 * t) == 8
    assert run(ThreadTuner(16), lambda t: 1000 * t ** 0.9) == 16


def test_peaked_curve_steps_back_to_the_peak():
    # gains up to 6 threads, then oversubscription costs throughput
    tuner = ThreadTuner(16)
    assert run(tuner, lambda t: 1000 * min(t, 6) - 50 * max(0, t - 6)) == 6
    # each step interleaves the next count (B) with the one in use (A): B A B after A's window
    assert [t for t, _ in tuner.trials] == [1, 2, 1, 2, 3, 2, 3, 4, 3, 4, 6, 4, 6, 8, 6, 8]


def test_a_load_change_during_a_step_does_not_stop_the_climb():
    # another process takes half the machine just after the first window at 2 threads: measured
    # one after the other, 2 threads (halved) would look no faster than 1 (before); interleaved, they do
    tuner = ThreadTuner(2, settle=0, window=2)
    changed = []

    def rate(threads, clock):
        if len(tuner.trials) >= 2 and not changed:
            changed.append(clock)
        return 1000 * threads * (0.5 if changed else 1.0)

    assert run(tuner, rate) == 2 and changed


def test_flat_curve_keeps_one_thread():
    # the consumer is the bottleneck: more threads gain nothing, so none are taken from it
    assert run(ThreadTuner(8), lambda t: 900.0) == 1


def test_noisy_curve_lands_near_the_best():
    curve = lambda t: 1000 * min(t, 4)  # noqa: E731
    chosen = [run(ThreadTuner(8), curve, noise=0.05, seed=seed) for seed in range(20)]
    assert all(curve(c) >= 0.95 * curve(4) for c in chosen), chosen


def test_intervals_across_a_change_and_out_of_order_batches_are_not_measured():
    tuner = ThreadTuner(2, settle=0, window=1)
    tuner.observe(100, 1.0)  # no previous batch: nothing to measure
    assert tuner.trials == []
    tuner.observe(100, 2.0, now=3.0)  # 100 img/s at 1 thread; 2 threads from t=3 on
    assert tuner.trials == [(1, 100.0)] and tuner.threads == 2
    tuner.observe(100, 2.01)  # begun under the previous count: not measured
    tuner.observe(100, 3.5)  # previous (2.01) is before the change: straddles it, skipped
    tuner.observe(50, 3.4)  # out of order: carried into the next interval
    tuner.observe(50, 4.0)  # (50 + 50) / 0.5 s = 200 img/s at 2 threads
    assert tuner.trials[-1] == (2, 200.0) and not tuner.done and tuner.threads == 1  # then A again: 1 thread


def test_restart_skips_the_pause_between_epochs():
    tuner = ThreadTuner(4, settle=0, window=1)
    tuner.observe(100, 1.0)
    tuner.restart()
    tuner.observe(100, 100.0)  # after a long pause: not an interval
    assert tuner.trials == []


def test_budget_leaves_one_core_by_default():
    assert thread_budget(None, cores=8) == 7 and thread_budget(None, cores=1) == 1
    assert thread_budget(0.5, cores=8) == 4 and thread_budget(1.0, cores=8) == 8 and thread_budget(3, cores=8) == 3
    with pytest.raises(ValueError):
        ThreadTuner(0)


def test_gate_admits_at_most_its_limit_and_follows_changes():
    gate = ThreadGate(1)
    inside, most, lock = [0], [0], threading.Lock()

    def work():
        with gate:
            with lock:
                inside[0] += 1
                most[0] = max(most[0], inside[0])
            time.sleep(0.02)
            with lock:
                inside[0] -= 1

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert most[0] == 1
    gate.set_limit(3)
    most[0] = 0
    threads = [threading.Thread(target=work) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert 2 <= most[0] <= 3
