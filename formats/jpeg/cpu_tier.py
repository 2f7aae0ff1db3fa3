"""The crop-resize's CPU tier: which of the extension's kernels this process runs (formats/jpeg/resize_kernels.h).

The tiers, lowest first: ``scalar`` (plain C, any CPU), ``avx2`` (AVX2 without AVX-512: Intel Haswell to Comet
Lake and the desktop and laptop chips from Alder Lake on; AMD Zen 1-3), ``avx512`` (AVX-512 F/BW/VL without VBMI:
Skylake-SP, Cascade Lake, Cooper Lake) and ``vbmi`` (AVX-512 with VBMI and VNNI: Ice Lake, Tiger Lake, the Xeons
from Ice Lake-SP on; AMD Zen 4 and later). Every tier gives the same pixels (tests/images/test_rgbx_resize.py); a
lower one is chosen to measure it, or to compare machines, on a CPU that has a higher one. The process runs
the highest its CPU has unless ``use_tier`` caps it; a cap above the CPU's is the CPU's, as oneDNN's
``ONEDNN_MAX_CPU_ISA`` is. The cap is the process's: the loader's decode threads run under it, worker processes
forked after it inherit it, and ones started by spawn or forkserver (Python 3.14's default on Linux; a DataLoader's
``multiprocessing_context``, Lightning's ``ddp_spawn``) begin at the CPU's, except where a pickled ``ShardDataset``
or dataio loader arrives: each carries a cap below the CPU's (``carried_tier``) and sets it where it is unpickled
(``take_tier``), so the workers reading it resize as the process that built it. Only the CLI reads ``DATAIO_CPU_TIER`` (and ``dataio bench images
--cpu-tier``); a script's own processes ignore the variable.
"""

from __future__ import annotations

from dataio.formats.errors import ConfigError

try:
    from dataio.formats.jpeg import _jpeg_codec
except ImportError:  # built without libjpeg headers: PIL resizes, no tier
    _jpeg_codec = None

TIERS = ("scalar", "avx2", "avx512", "vbmi")
NEEDS = {"scalar": "any CPU", "avx2": "AVX2", "avx512": "AVX-512 F/BW/VL", "vbmi": "AVX-512 VBMI and VNNI"}


# An editable install whose extension was not rebuilt since the tiers came (a `git pull` without `pip install -e .`):
# it resizes with its own kernels and has no resize_tier; its resize_simd numbers them otherwise (2 was VBMI).
STALE = ("the extension dataio.formats.jpeg._jpeg_codec was built before its CPU tiers: rebuild it "
         "(pip install --no-deps --no-build-isolation -e ., or make)")


def stale() -> bool:
    """Whether the extension is a build from before the tiers: no tier can then be read or chosen."""
    return _jpeg_codec is not None and not hasattr(_jpeg_codec, "resize_tier")


def cpu_tier() -> str:
    """The highest tier this CPU runs: ``"scalar"``, ``"avx2"``, ``"avx512"`` or ``"vbmi"`` (``dataio.cpu_tier``).

    ``"scalar"`` without the extension (PIL resizes there), ``"unknown"`` with a stale one (``STALE``)."""
    if _jpeg_codec is None:
        return "scalar"
    return "unknown" if stale() else TIERS[_jpeg_codec.resize_simd()]


def tier_in_use() -> str:
    """The tier this process's crop-resizes run: the CPU's highest, or the cap ``use_tier`` set
    (``dataio.tier_in_use``).

    ``"unknown"`` with a stale extension (``STALE``). Where PIL does the crop-resize instead of the extension (the
    extension not built, or plain Pillow rather than pillow-simd, whose pixels the extension's kernels give), no
    tier runs: this still names the extension's, and a cap changes nothing. ``python -m dataio.check_install``
    says which resizes (``crop-resize: the extension's ... tier avx2`` or ``crop-resize: PIL's``)."""
    if _jpeg_codec is None:
        return "scalar"
    return "unknown" if stale() else TIERS[_jpeg_codec.resize_tier()]


def use_tier(name: str) -> str:
    """Cap this process's crop-resize at tier ``name``; returns the tier then in use (the CPU's where it is
    lower: ``use_tier("vbmi")`` on an AVX2-only CPU returns ``"avx2"``). ``dataio.use_tier``.

    ``name`` is ``"scalar"``, ``"avx2"``, ``"avx512"`` or ``"vbmi"``, in lower case; every tier gives the same
    pixels, so a lower one only measures it or stands in for another machine's CPU. Call it at the top level of the
    script, before any loader runs; a later call sets the cap again (up to the CPU's highest). The cap is the
    process's, not read from ``DATAIO_CPU_TIER`` (only the ``dataio`` command reads that): the loaders' decode
    threads and forked workers run under it; a process started by spawn or forkserver begins at its CPU's highest
    and takes the cap that a pickled ``ShardDataset`` or dataio loader carries (a torch DataLoader's workers,
    ``torch.multiprocessing.spawn``, Lightning's ``ddp_spawn``). Where PIL does the crop-resize (see
    ``tier_in_use``) the cap changes nothing. An unknown name, or a stale extension (``STALE``), is a
    ``ConfigError``."""
    if name not in TIERS:
        raise ConfigError(f"dataio.use_tier: {{0}} must be one of {', '.join(TIERS)} (lower case), got {name!r}",
                          "name")
    if _jpeg_codec is None:
        return "scalar"
    if stale():
        raise ConfigError(f"dataio.use_tier: {{0}} {name!r} cannot be chosen: {STALE}", "name")
    return TIERS[_jpeg_codec.resize_tier(TIERS.index(name))]


def describe_tier() -> str:
    """The tier in use, what it needs, and the CPU's where it is capped below it: ``tier avx2 (AVX2, ...)``."""
    used, highest = tier_in_use(), cpu_tier()
    if _jpeg_codec is None:
        return "tier none (the extension is not built: PIL resizes)"
    if stale():
        return f"tier unknown ({STALE})"
    capped = f", capped below this CPU's {highest}" if used != highest else ""
    return f"tier {used} ({NEEDS[used]}{capped})"


def carried_tier() -> str | None:
    """The cap a pickled data set or loader carries to the process it is unpickled in: this process's tier where
    it is below the CPU's, else None (nothing to carry: a new process starts at its CPU's)."""
    used = tier_in_use()
    return used if used in TIERS and used != cpu_tier() else None


def take_tier(carried: str | None) -> None:
    """Cap this process at ``carried`` (``carried_tier``'s answer where the object was pickled; None: nothing), where
    that is below the tier it runs: a cap never raises a lower one this process chose (``use_tier("scalar")`` at the
    top of a script that then unpickles a data set capped at avx2). A value this build does not know, or a stale
    extension, leaves the tier as it is: the pixels are the same."""
    if carried in TIERS and _jpeg_codec is not None and not stale():
        if TIERS.index(carried) < _jpeg_codec.resize_tier():
            _jpeg_codec.resize_tier(TIERS.index(carried))
