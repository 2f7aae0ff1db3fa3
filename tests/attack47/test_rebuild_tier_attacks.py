"""Attack 47 on `rebuilt_on_unpickle.rebuild` putting back the crop-resize tier when a rebuild fails.

Found: a rebuild that failed in one thread put back the tier it found, undoing the lower cap a rebuild in another
thread had taken meanwhile for a loader it returned (fixed: it puts the tier back only while it is still the one
it set); two rebuilds that carried the same cap, one failing, left the other's loader uncapped (fixed: a failing
rebuild keeps the tier where another returned a capped loader meanwhile).
Held: every kind of exception (KeyboardInterrupt, SystemExit, GeneratorExit), nested unpickling, a cap that
raised nothing."""

from __future__ import annotations

import pickle
import threading

import pytest

from dataio.formats.jpeg import cpu_tier
from dataio.loader.rebuilt_on_unpickle import rebuild

HERE_TIERS = cpu_tier.TIERS[: cpu_tier.TIERS.index(cpu_tier.cpu_tier()) + 1]
needs_three = pytest.mark.skipif(len(HERE_TIERS) < 3, reason="needs two tiers below this CPU's")


class Waits:
    """A stand-in loader whose constructor waits for ``go`` and then raises ``error`` (or returns)."""

    def __init__(self, go: threading.Event | None = None, error: BaseException | None = None) -> None:
        if go is not None:
            go.wait(10)
        if error is not None:
            raise error


def _in_thread(*args):
    out: dict = {}

    def run():
        try:
            out["loader"] = rebuild(Waits, *args)
        except BaseException as e:  # noqa: BLE001 (the test reads it)
            out["error"] = e

    thread = threading.Thread(target=run)
    thread.start()
    return thread, out


@pytest.mark.parametrize("error", [KeyboardInterrupt(), SystemExit(3), GeneratorExit(), MemoryError(),
                                   RecursionError(), ValueError("x")])
@pytest.mark.skipif(len(HERE_TIERS) < 2, reason="needs a tier below this CPU's")
def test_every_kind_of_exception_puts_the_tier_back(restored_tier, error):
    with pytest.raises(type(error)):
        rebuild(Waits, (None, error), {}, None, HERE_TIERS[0])
    assert cpu_tier.tier_in_use() == HERE_TIERS[-1]


@pytest.mark.skipif(len(HERE_TIERS) < 2, reason="needs a tier below this CPU's")
def test_a_failing_rebuild_inside_a_working_one_leaves_the_outer_cap(restored_tier):
    inner = pickle.dumps(_Failing())
    outer = rebuild(_Unpickles, (inner,), {}, None, HERE_TIERS[0])
    assert isinstance(outer.error, RuntimeError)
    assert cpu_tier.tier_in_use() == HERE_TIERS[0]  # the outer loader was returned: its cap stays


class _Failing:
    def __reduce__(self):
        return rebuild, (Waits, (None, RuntimeError("inner")), {}, None, HERE_TIERS[1])


class _Unpickles:
    def __init__(self, blob: bytes) -> None:
        try:
            pickle.loads(blob)
        except RuntimeError as e:
            self.error = e


@needs_three
def test_a_failure_in_one_thread_leaves_the_cap_another_thread_took(restored_tier):
    go = threading.Event()
    failing, failed = _in_thread((go, RuntimeError("no folder")), {}, None, HERE_TIERS[1])
    while cpu_tier.tier_in_use() != HERE_TIERS[1]:
        pass  # the failing rebuild has taken its cap and waits in its constructor
    rebuild(Waits, (), {}, None, HERE_TIERS[0])  # a loader returned, capped lower
    go.set()
    failing.join()
    assert isinstance(failed["error"], RuntimeError)
    assert cpu_tier.tier_in_use() == HERE_TIERS[0]


@pytest.mark.skipif(len(HERE_TIERS) < 2, reason="needs a tier below this CPU's")
def test_a_failure_in_one_thread_leaves_the_same_cap_another_loader_carried(restored_tier):
    go = threading.Event()
    failing, failed = _in_thread((go, RuntimeError("no folder")), {}, None, HERE_TIERS[0])
    while cpu_tier.tier_in_use() != HERE_TIERS[0]:
        pass
    rebuild(Waits, (), {}, None, HERE_TIERS[0])  # returned: its process runs at its cap
    go.set()
    failing.join()
    assert cpu_tier.tier_in_use() == HERE_TIERS[0]
