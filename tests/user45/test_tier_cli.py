"""Issue 45 from the command line, forced to the tier of an AVX2-only EPYC: `DATAIO_CPU_TIER=avx2` for
`python -m dataio.check_install` and `dataio bench images`, and `--cpu-tier` over the variable. Each output has to
let the user tell which tier ran and what the CPU has."""

from __future__ import annotations

from .conftest import ROOT, ok, run


def test_check_install_under_avx2_names_the_tier_and_the_cpus(cpu_highest, tmp_path):
    done = ok(run(["-m", "dataio.check_install"], tmp_path, env={"DATAIO_CPU_TIER": "avx2"}))
    line = next(line for line in done.stdout.splitlines() if "crop-resize" in line)
    if cpu_highest in ("avx2", "avx512", "vbmi"):
        assert "tier avx2 (AVX2" in line, line
        if cpu_highest != "avx2":
            assert f"capped below this CPU's {cpu_highest}" in line, line
    assert done.stderr == ""


def _bench_head(tmp_path, coloured_folder, coloured_shards, env, *flags) -> str:
    done = ok(run(["-m", "dataio", "bench", "images", coloured_folder, "--shards", coloured_shards, "--epochs", "1",
                   "--warmup", "0", "--batch-size", "32", "--workers", "1", "--loaders", "dataio",
                   "--limit-images", "20", "--image-size", "64", "--out", tmp_path / "out", *flags], ROOT, env=env))
    return next(line for line in done.stdout.splitlines() if line.startswith("dataio bench images, "))


def test_bench_images_head_names_the_cpu_class_and_the_tier_and_the_flag_wins(cpu_highest, coloured_folder,
                                                                               coloured_shards, tmp_path):
    head = _bench_head(tmp_path, coloured_folder, coloured_shards, {"DATAIO_CPU_TIER": "scalar"}, "--cpu-tier", "avx2")
    if cpu_highest in ("avx512", "vbmi"):
        assert "crop-resize tier avx2 (capped below " + cpu_highest + ")" in head, head
        assert " avx2 avx512f" in head, head  # the instruction sets the CPU has, as /proc/cpuinfo names them
    elif cpu_highest == "avx2":
        assert "crop-resize tier avx2," in head, head
