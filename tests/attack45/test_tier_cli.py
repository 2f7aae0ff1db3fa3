"""Issue 45 attack: DATAIO_CPU_TIER and ``dataio bench images --cpu-tier`` as a user meets them: bad values, the
flag beside the variable, a tier above the CPU's, check_install, and a machine whose crop-resize is PIL's (plain
Pillow or no extension: the tiers then change nothing, and nothing may say they do)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from dataio.cli.flags import apply_cpu_tier
from dataio.formats.errors import UsageError
from dataio.formats.jpeg import cpu_tier
from dataio.images import turbo_decode


CODEC = cpu_tier._jpeg_codec  # the real extension (some tests put a stand-in in its place)
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def bench_view(stand_in: str | None, resize_in_c: bool | None = None) -> dict:
    """What ``dataio bench``'s report says of the tier (``machine_description()["cpu_tier"]`` and the first line
    of ``bench images``' report), in a fresh process with ``stand_in`` (a class of this module) as the extension
    and ``RESIZE_IN_C`` set: only the CLI imports ``dataio.bench`` in-process (tests/test_layout.py)."""
    code = "\n".join([
        "import json",
        "from dataio.formats.jpeg import cpu_tier",
        "from dataio.images import turbo_decode",
        *([f"from tests.attack45.test_tier_cli import {stand_in}", f"cpu_tier._jpeg_codec = {stand_in}()"]
          if stand_in else []),
        *([f"turbo_decode.RESIZE_IN_C = {resize_in_c}"] if resize_in_c is not None else []),
        "from dataio.bench import images_report, report",
        "machine = report.machine_description()",
        "result = {'machine': machine, 'config': {'batch_size': 8, 'image_size': 224, 'num_workers': 2,"
        " 'epochs': 1}, 'date': '2026-12-07', 'num_images': 10, 'rows': [], 'checks': {},"
        " 'machine_limit': {'single_thread_img_s': 100.0, 'cores': 2, 'img_s': 200.0}}",
        "print(json.dumps({'tier': machine['cpu_tier'], 'head': images_report.render(result).splitlines()[0]}))"])
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(autouse=True)
def process_tier_restored(monkeypatch):
    monkeypatch.delenv("DATAIO_CPU_TIER", raising=False)
    yield
    if CODEC is not None:
        CODEC.resize_tier(len(cpu_tier.TIERS) - 1)


def run(*args: str, tier: str | bytes) -> subprocess.CompletedProcess:
    env = {**os.environb, b"DATAIO_CPU_TIER": tier if isinstance(tier, bytes) else tier.encode()}
    return subprocess.run([sys.executable, *args], env=env, capture_output=True, text=True, timeout=120,
                          errors="replace")


def one_line(result: subprocess.CompletedProcess) -> str:
    err = result.stderr.strip()
    assert result.returncode == 2, (result.returncode, err[-2000:])
    assert "Traceback" not in err and len(err.splitlines()) == 1, err[-2000:]
    return err


@pytest.mark.parametrize("value", ["AVX2", "avx2\n", b"\xff\xfeavx2"])
def test_a_bad_tier_in_the_environment_is_one_line_and_exit_2(value, tmp_path):
    line = one_line(run("-m", "dataio", "verify", str(tmp_path), tier=value))
    assert "DATAIO_CPU_TIER" in line and "scalar, avx2, avx512, vbmi" in line


@pytest.mark.parametrize("value", [" avx2", "avx2 ", "2", "-1", "Vbmi", "none", "avx-512"])
def test_near_miss_tiers_are_refused_not_guessed(value, monkeypatch):
    monkeypatch.setenv("DATAIO_CPU_TIER", value)
    with pytest.raises(UsageError, match="is not a tier: one of scalar, avx2, avx512, vbmi"):
        apply_cpu_tier(None)
    with pytest.raises(UsageError, match="--cpu-tier="):  # the flag's own value is named, not the variable's
        apply_cpu_tier(value)


def test_check_install_refuses_a_bad_tier_and_prints_a_good_one():
    line = one_line(run("-m", "dataio.check_install", tier="Vbmi"))
    assert line.startswith("dataio: DATAIO_CPU_TIER='Vbmi' is not a tier")
    from dataio.check_install import report

    cpu_tier.use_tier("scalar")  # as check_install's own apply_cpu_tier does for DATAIO_CPU_TIER=scalar
    lines = "\n".join(report()[0])
    if turbo_decode.RESIZE_IN_C and cpu_tier.cpu_tier() != "scalar":
        assert f"tier scalar (any CPU, capped below this CPU's {cpu_tier.cpu_tier()})" in lines


def test_a_very_long_bad_tier_is_named_in_a_short_line(monkeypatch):
    """A 1 MB value (a script that pasted a file into the variable). Now: the line repeats the whole megabyte.
    Should: the line names the variable and the tiers, with the value cut short."""
    monkeypatch.setenv("DATAIO_CPU_TIER", "a" * 1_000_000)
    with pytest.raises(UsageError) as refused:
        apply_cpu_tier(None)
    assert len(str(refused.value)) < 300 and "DATAIO_CPU_TIER" in str(refused.value)


def test_the_flag_wins_over_the_variable_and_the_empty_variable_is_unset(monkeypatch):
    monkeypatch.setenv("DATAIO_CPU_TIER", "not-a-tier")
    assert apply_cpu_tier("avx2") is None and cpu_tier.tier_in_use() == "avx2"
    monkeypatch.setenv("DATAIO_CPU_TIER", "")
    cpu_tier.use_tier("vbmi")
    assert apply_cpu_tier(None) is None and cpu_tier.tier_in_use() == cpu_tier.cpu_tier()


class AVX2Only:
    """The extension on a CPU whose highest tier is AVX2 (this machine has all four)."""

    def __init__(self) -> None:
        self.tier = 1

    def resize_simd(self) -> int:
        return 1

    def resize_tier(self, tier: int = -1) -> int:
        if tier >= 0:
            self.tier = min(tier, 3)
        return min(self.tier, 1)


def test_a_tier_above_the_cpus_says_which_runs(monkeypatch):
    monkeypatch.setattr(cpu_tier, "_jpeg_codec", AVX2Only())
    monkeypatch.setattr(turbo_decode, "RESIZE_IN_C", True)
    line = apply_cpu_tier("vbmi")
    assert line == "dataio: --cpu-tier=vbmi: this CPU's highest tier is avx2; the crop-resize runs avx2"
    assert cpu_tier.describe_tier() == "tier avx2 (AVX2)"
    assert bench_view("AVX2Only", resize_in_c=True)["tier"] == "avx2"


def test_a_tier_asked_where_pil_resizes_says_it_changes_nothing(monkeypatch):
    """Plain Pillow (pyproject's dependency; pillow-simd is a swap) or no extension: the loader resizes with PIL,
    RESIZE_IN_C. Now: `--cpu-tier avx2` is taken in silence and the bench report's first line says "crop-resize
    tier avx2", though no tier ran. Should: one line saying the tier has no effect here, and the report saying
    PIL resizes."""
    monkeypatch.setattr(turbo_decode, "RESIZE_IN_C", False)
    line = apply_cpu_tier("avx2")
    assert line is not None and "PIL" in line and "--cpu-tier=avx2" in line
    head = bench_view(None, resize_in_c=False)["head"]
    assert "crop-resize tier" not in head and "PIL" in head, head


def test_main_called_in_process_puts_the_tier_back(monkeypatch, tmp_path):
    """dataio.cli.main run in-process (a script, a notebook, these tests) with DATAIO_CPU_TIER=scalar, then again
    without it. Now: the second run still resizes at scalar, the first one's cap kept for the process's life
    (bench images' help says its default is the CPU's highest). Should: each run's cap ends with it; the same for
    check_install's main."""
    from dataio.check_install import main as check_install
    from dataio.cli import main

    monkeypatch.setenv("DATAIO_CPU_TIER", "scalar")
    assert main(["verify", str(tmp_path)]) == 1  # no manifest: refused after the tier was applied
    assert check_install([]) in (0, 1)
    assert cpu_tier.tier_in_use() == cpu_tier.cpu_tier()
    monkeypatch.setenv("DATAIO_CPU_TIER", "bogus")
    assert main(["verify", str(tmp_path)]) == 2 and check_install([]) == 2
    assert cpu_tier.tier_in_use() == cpu_tier.cpu_tier()


class BeforeTheTiers:
    """The extension as built before issue 45 (an editable install not rebuilt after a pull): resize_rgbx and
    resize_simd (2 meant AVX-512 with VBMI), no resize_tier."""

    def resize_simd(self) -> int:
        return 2

    def resize_rgbx(self, *args) -> None:
        raise AssertionError("not called here")


def test_a_stale_extension_is_named_not_a_traceback(monkeypatch, tmp_path):
    """Now: check_install, every `dataio bench` report (machine_description) and DATAIO_CPU_TIER all end in
    AttributeError: module ... has no attribute 'resize_tier' (a traceback), and cpu_tier() calls the old build's
    VBMI "avx512". Should: check_install says to rebuild (and --strict fails), the reports say the tier is unknown,
    and a tier asked is one line, exit 2, saying to rebuild."""
    from dataio.check_install import report as check_report
    from dataio.cli import main

    monkeypatch.setattr(cpu_tier, "_jpeg_codec", BeforeTheTiers())
    assert cpu_tier.cpu_tier() == cpu_tier.tier_in_use() == "unknown"
    lines, broken, slow = check_report()
    assert cpu_tier.STALE in slow and not broken
    assert bench_view("BeforeTheTiers")["tier"] in ("unknown", None)
    with pytest.raises(UsageError, match="rebuild it"):
        apply_cpu_tier("avx2")
    monkeypatch.setenv("DATAIO_CPU_TIER", "avx2")
    assert main(["verify", str(tmp_path)]) == 2
