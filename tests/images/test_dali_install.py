"""DALI is an extra: without it, decoder="dali" is one clear error, "auto" decodes on the CPU and says so once,
and `dataio bench images` leaves out its DALI rows
(asked for, they are one line). The extra named fits torch's CUDA build."""

from __future__ import annotations

import logging
import sys

import pytest
import torch

from dataio import ImageLoader
from dataio.cli import main
from dataio.formats import fallback_log
from dataio.formats.errors import ConfigError
from dataio.images import dali_install
from dataio.images.config import ImageLoaderConfig


@pytest.fixture
def without_dali(monkeypatch):
    """NVIDIA DALI not importable, as after a plain `pip install torch-dataio`; fallbacks not said yet."""
    monkeypatch.setitem(sys.modules, "nvidia.dali", None)  # find_spec then finds nothing, import fails
    monkeypatch.setattr(fallback_log, "_said", set())
    assert not dali_install.dali_installed()


def test_dali_is_found_where_the_extra_is_installed():
    assert dali_install.dali_installed()  # the Makefile's venv installs the dali-cuda13 extra
    assert list(dali_install.installed_builds()) == ["nvidia-dali-cuda130"]


def test_asking_for_dali_without_it_is_one_line_naming_the_extra(without_dali, image_shards):
    with pytest.raises(ConfigError, match=r"^decoder 'dali' needs NVIDIA DALI, which is not installed: "
                                          r"pip install 'torch-dataio\[dali-cuda13\]' \(torch .* is a CPU build"):
        ImageLoader(image_shards, decoder="dali", batch_size=4, image_size=32)


def test_auto_on_a_gpu_without_dali_decodes_on_the_cpu_and_says_so_once(without_dali, monkeypatch, caplog):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    config = ImageLoaderConfig(device="cuda:0")
    with caplog.at_level(logging.WARNING, logger="dataio"):
        assert [config.resolved_decoder for _ in range(3)] == ["turbo"] * 3
    said = [r.getMessage() for r in caplog.records if r.name == "dataio"]
    assert len(said) == 1 and "NVIDIA DALI is not installed" in said[0] and "dali-cuda13" in said[0], said


@pytest.mark.parametrize(("cuda", "extra"), [("12.8", "dali-cuda12"), ("13.0", "dali-cuda13"), (None, "dali-cuda13")])
def test_the_extra_named_follows_torch_cuda_major(monkeypatch, cuda, extra):
    monkeypatch.setattr(torch.version, "cuda", cuda)
    assert f"pip install 'torch-dataio[{extra}]'" in dali_install.install_hint()
    monkeypatch.setattr(torch.version, "cuda", "11.8")
    assert "no torch-dataio extra" in dali_install.install_hint()


def test_bench_rows_of_dali_without_dali_are_one_line(without_dali, image_folder, tmp_path, capsys):
    src, _ = image_folder
    assert main(["bench", "images", str(src), "--out", str(tmp_path), "--loaders", "dataio,dali_cpu"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("dataio bench: error: loaders ['dali_cpu'] need NVIDIA DALI, which is not installed: "
                          "pip install 'torch-dataio[dali-cuda13]'") and err.count("\n") == 1, err
