"""`python -m dataio.check_install`: what is in use, and a broken install (two PIL owners, two DALI builds)
is exit 1 with the command that repairs it. A plain install's report is in tests/test_install.py."""

from __future__ import annotations

import logging
import subprocess
import sys

import pytest

from dataio import ImageLoader, check_install
from dataio.formats import fallback_log


def test_the_makefile_venv_passes_strict():
    done = subprocess.run([sys.executable, "-m", "dataio.check_install", "--strict"], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("dataio: torch-dataio 0.1.0, torch ")
    assert "PIL owned by pillow-simd" in lines[1] and "libjpeg-turbo" in lines[1]
    assert "dataio: NVIDIA DALI: nvidia-dali-cuda130 2.4.0 (CUDA 13)" in lines


def test_pillow_beside_pillow_simd_is_a_broken_install(monkeypatch, capsys):
    monkeypatch.setattr(check_install, "pil_owners", lambda: ["pillow", "pillow-simd"])
    assert check_install.main([]) == 1
    err = capsys.readouterr().err
    assert err.startswith("dataio: broken install: pillow and pillow-simd each install PIL") and err.count("\n") == 1
    assert "pip uninstall -y pillow pillow-simd && pip install pillow" in err


def test_two_dali_builds_are_a_broken_install(monkeypatch, capsys):
    monkeypatch.setattr(check_install, "installed_builds",
                        lambda: {"nvidia-dali-cuda120": "2.4.0", "nvidia-dali-cuda130": "2.4.0"})
    assert check_install.main([]) == 1
    out, err = capsys.readouterr()
    assert "NVIDIA DALI: nvidia-dali-cuda120 2.4.0 (CUDA 12)" in out
    assert "nvidia-dali-cuda120 and nvidia-dali-cuda130 both install nvidia.dali" in err


@pytest.mark.parametrize(("cuda", "says"), [("12.8", "brings a CUDA 13 stack beside torch's CUDA 12"), (None, None)])
def test_a_dali_build_for_another_cuda_than_torch_is_named(monkeypatch, capsys, cuda, says):
    monkeypatch.setattr(check_install.torch.version, "cuda", cuda)
    assert check_install.main([]) == 0
    out = capsys.readouterr().out
    assert (says in out) if says else "stack beside" not in out, out


def test_the_image_loader_logs_what_it_uses_once(image_shards, monkeypatch, caplog):
    monkeypatch.setattr(fallback_log, "_said", set())
    with caplog.at_level(logging.INFO, logger="dataio"):
        for _ in range(2):
            ImageLoader(image_shards, batch_size=4, image_size=32)
    said = [r.getMessage() for r in caplog.records if r.name == "dataio" and "decodes with" in r.getMessage()]
    assert len(said) == 1 and said[0].startswith("dataio: ImageLoader decodes with turbo; PIL is pillow-simd "), said
    assert said[0].endswith("; region decoder built"), said
