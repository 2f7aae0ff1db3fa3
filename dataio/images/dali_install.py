"""Which NVIDIA DALI build is installed (``decoder="dali"``), and which extra fits this torch.

DALI is optional: ``pip install 'torch-dataio[dali-cuda12]'`` or ``[dali-cuda13]``, the CUDA major
of the environment's torch (``torch.version.cuda``). The two builds both install ``nvidia.dali``, so
they exclude each other. A CPU torch runs DALI's CPU pipelines with either; CUDA 13's is the smaller
(DALI 2.4: 270 MB of wheels with its dependencies, against 524 MB for CUDA 12's).
"""

from __future__ import annotations

import importlib.util
from importlib.metadata import PackageNotFoundError, version

import torch

BUILDS = {"nvidia-dali-cuda120": 12, "nvidia-dali-cuda130": 13}  # distribution -> CUDA major
EXTRAS = {12: "dali-cuda12", 13: "dali-cuda13"}


def dali_installed() -> bool:
    """Whether ``nvidia.dali`` can be imported (found without importing it: that costs about a second)."""
    try:
        return importlib.util.find_spec("nvidia.dali") is not None
    except ModuleNotFoundError:  # no ``nvidia`` package at all
        return False


def installed_builds() -> dict[str, str]:
    """The DALI distributions installed, with their versions (more than one is a broken install)."""
    found = {}
    for name in BUILDS:
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            continue
    return found


def torch_cuda_major() -> int | None:
    """The CUDA major version torch was built for; None for a CPU build."""
    return int(torch.version.cuda.split(".")[0]) if torch.version.cuda else None


def install_hint() -> str:
    """The install line for this torch's DALI, with the reason."""
    major = torch_cuda_major()
    if major is None:
        return (f"pip install 'torch-dataio[dali-cuda13]' (torch {torch.__version__} is a CPU build: either "
                "extra runs DALI's CPU pipelines, CUDA 13's is the smaller)")
    build = f"torch {torch.__version__} is a CUDA {torch.version.cuda} build"
    if major not in EXTRAS:
        return f"NVIDIA DALI for CUDA {major}: no torch-dataio extra ({build}), see DALI's install guide"
    return f"pip install 'torch-dataio[{EXTRAS[major]}]' ({build})"
