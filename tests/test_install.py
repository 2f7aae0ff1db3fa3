"""``pip install`` of a torch-dataio wheel into a user's training environment, offline.

The environment is a fresh venv that already holds torch 2.13.0 (CPU), pillow and matplotlib, installed
from the wheels that ``make venv`` fetched into ``.venv/wheelhouse`` (``--no-index``: nothing is
downloaded here). The checkout is built into a wheel twice, with the compiler and without one
(``CC=false``), then installed with its dependencies from the same wheelhouse. Checked: no CUDA stack and
no pillow-simd comes with it, torch is kept, exactly one distribution owns PIL, ``check_install`` says
what is in use, the ``dataio`` command packs real-size photos and ``ImageLoader`` reads them with a clean
stderr; without the C extensions the install succeeds too and each fallback is logged exactly once.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
WHEELHOUSE = Path(sys.prefix) / "wheelhouse"  # filled by `make venv`
NOT_COPIED = {".venv", ".git", "build", "demo-data", ".whl", "__pycache__", ".hypothesis", ".pytest_cache"}
TIMEOUT = 300

LOADER_EPOCH = """
import sys
from dataio import ImageLoader
from dataio.augment import RandAugmentConfig
loader = ImageLoader(sys.argv[1], batch_size=8, image_size=96, train=True, seed=0, num_workers=2,
                     randaugment=RandAugmentConfig(num_ops=2, magnitude=9))
seen = 0
for images, labels in loader:
    assert images.shape[1:] == (3, 96, 96) and len(images) == len(labels), images.shape
    seen += len(labels)
normalised = ImageLoader(sys.argv[1], batch_size=8, image_size=96, train=False, normalize=True, num_workers=2)
normalised_seen = 0
for images, labels in normalised:
    assert images.dtype.is_floating_point and images.shape[1:] == (3, 96, 96), images.dtype
    normalised_seen += len(labels)
assert normalised_seen == seen, normalised_seen
print(seen, loader.decoder)
"""


def _clean_env(**extra: str) -> dict[str, str]:
    """No pip configuration of this machine (its find-links, extra indexes, constraints), no user site."""
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.environ.get("HOME", "/tmp"),
            "PIP_CONFIG_FILE": os.devnull, "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PYTHONNOUSERSITE": "1", **extra}


def _run(args: list, cwd: Path, **extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(a) for a in args], cwd=cwd, env=_clean_env(**extra), capture_output=True, text=True,
                          timeout=TIMEOUT)


def _ok(args: list, cwd: Path, **extra: str) -> subprocess.CompletedProcess:
    done = _run(args, cwd, **extra)
    assert done.returncode == 0, f"{args[:4]}: exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done


class Venv:
    """A fresh venv, made without pip (ensurepip measured 3.6 s of CPU): this venv's pip installs into it."""

    def __init__(self, path: Path) -> None:
        self.path, self.python = path, path / "bin" / "python"

    def pip(self, *args, cwd: Path) -> subprocess.CompletedProcess:
        return _ok([sys.executable, "-m", "pip", "--python", self.python, *args], cwd)

    def install(self, *requirements, cwd: Path) -> None:
        self.pip("install", "-q", "--no-compile", "--no-index", "--find-links", WHEELHOUSE, *requirements, cwd=cwd)

    def installed(self, cwd: Path) -> dict[str, str]:
        listed = json.loads(self.pip("list", "--format", "json", cwd=cwd).stdout)
        return {row["name"].lower(): row["version"] for row in listed}


def _build(source: Path, out: Path, **extra: str) -> Path:
    """The wheel of ``source``, built by this venv's setuptools with no index and no build isolation."""
    _ok([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "--no-index", "-w", out,
         source], source, **extra)
    (wheel,) = out.glob("torch_dataio-*.whl")
    return wheel


@pytest.fixture(scope="module")
def wheels(tmp_path_factory) -> dict[str, Path]:
    """The checkout's wheel with its C extensions, and without (no compiler: ``CC=false``)."""
    if not list(WHEELHOUSE.glob("torch-*.whl")):
        pytest.fail(f"no wheels in {WHEELHOUSE}: run `make venv` (it fetches them while the index is reachable)")
    root = tmp_path_factory.mktemp("install")
    source = root / "checkout"  # a copy, so the build's build/ and egg-info stay out of the checkout
    shutil.copytree(ROOT, source, ignore=lambda folder, names: [
        n for n in names if n in NOT_COPIED or n.endswith((".so", ".egg-info"))])
    full = _build(source, root / "full")
    shutil.rmtree(source / "build")  # else the second build takes the first one's compiled extensions
    return {"full": full, "bare": _build(source, root / "bare", CC=shutil.which("false") or "/bin/false")}


@pytest.fixture(scope="module")
def user_env(tmp_path_factory) -> Venv:
    """A training environment as users have it: torch, pillow and matplotlib, before torch-dataio."""
    root = tmp_path_factory.mktemp("user_env")
    _ok([Path(sys.base_prefix) / "bin" / "python3", "-m", "venv", "--without-pip", root / "venv"], root)
    venv = Venv(root / "venv")
    venv.install("torch==2.13.0", "pillow", "matplotlib", cwd=root)
    assert venv.installed(root)["torch"] == "2.13.0+cpu"
    return venv


def _install(venv: Venv, wheel: Path, cwd: Path) -> dict[str, str]:
    """``wheel`` in place of any torch-dataio already there, its dependencies from the wheelhouse."""
    venv.pip("uninstall", "-q", "-y", "torch-dataio", cwd=cwd)  # a no-op the first time
    venv.install(wheel, cwd=cwd)
    after = venv.installed(cwd)
    assert after["torch"] == "2.13.0+cpu", "the environment's torch was replaced"
    assert after["torch-dataio"] == "0.1.0"
    assert not [name for name in after if name.startswith("nvidia")], f"a CUDA stack came along: {sorted(after)}"
    assert "pillow" in after and "pillow-simd" not in after, sorted(after)
    return after


def _convert(venv: Venv, photos: Path, cwd: Path) -> tuple[subprocess.CompletedProcess, Path]:
    """``dataio convert images``, by the venv's command."""
    return _ok([venv.path / "bin" / "dataio", "convert", "images", photos, cwd / "shards", "--workers", "2",
                "--no-progress"], cwd), cwd / "shards"


def test_wheel_requires_no_cuda_stack_nor_pillow_simd(wheels):
    with zipfile.ZipFile(wheels["full"]) as wheel:
        names = wheel.namelist()
        metadata = wheel.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    fields = [tuple(line.split(": ", 1)) for line in metadata.splitlines() if ": " in line]
    assert ("Name", "torch-dataio") in fields
    required = [value for key, value in fields if key == "Requires-Dist" and "extra ==" not in value]
    assert "pillow>=9" in required and not [r for r in required if r.startswith(("nvidia", "pillow-simd"))], required
    assert 'nvidia-dali-cuda120>=1.30; extra == "dali-cuda12"' in metadata
    assert 'nvidia-dali-cuda130>=1.51.2; extra == "dali-cuda13"' in metadata
    built = {n for n in names if n.endswith(".so")}
    assert {n.split(".")[0] for n in built} == {"dataio/formats/jpeg/_jpeg_codec", "dataio/augment/_randaugment_cpu",
                                                "dataio/augment/_normalize_cpu", "dataio/augment/_views_cpu",
                                                "dataio/mixtures/_blend", "dataio/text/_collate"}
    with zipfile.ZipFile(wheels["bare"]) as bare:
        assert not [n for n in bare.namelist() if n.endswith(".so")]


def test_pip_install_into_an_environment_with_torch_pillow_matplotlib(wheels, user_env, tmp_path):
    installed = _install(user_env, wheels["full"], tmp_path)
    assert "matplotlib" in installed
    check = _ok([user_env.python, "-m", "dataio.check_install"], tmp_path)
    assert check.stderr == ""
    assert "torch-dataio 0.1.0, torch 2.13.0+cpu (CPU build)" in check.stdout
    assert f"PIL is pillow {installed['pillow']}" in check.stdout and "PIL owned by pillow\n" in check.stdout
    assert "region decoder dataio.formats.jpeg._jpeg_codec: built" in check.stdout
    assert "crop-resize: PIL's" in check.stdout  # plain pillow rounds otherwise: its pixels are kept
    assert "RandAugment kernel dataio.augment._randaugment_cpu: built" in check.stdout
    assert "CPU normalisation dataio.augment._normalize_cpu: built" in check.stdout
    assert "multi-crop view ops dataio.augment._views_cpu: built" in check.stdout
    assert "NVIDIA DALI: not installed" in check.stdout and "pip install 'torch-dataio[dali-cuda13]'" in check.stdout
    photos = tmp_path / "photos"  # ImageNet-size (~110 KB)
    _ok([user_env.path / "bin" / "dataio", "synth", photos, "--classes", "2", "--per-class", "8", "--photo-class",
         "imagenet"], tmp_path)
    packed, shards = _convert(user_env, photos, tmp_path)
    assert packed.stderr == "" and "packed 16 images" in packed.stdout, packed.stdout + packed.stderr
    epoch = _ok([user_env.python, "-c", LOADER_EPOCH, shards], tmp_path)
    assert epoch.stdout.split() == ["16", "turbo"] and epoch.stderr == "", epoch.stderr


def test_without_a_compiler_the_install_works_and_each_fallback_is_said_once(wheels, user_env, real_photos, tmp_path):
    _install(user_env, wheels["bare"], tmp_path)
    check = _run([user_env.python, "-m", "dataio.check_install", "--strict"], tmp_path)
    assert check.returncode == 1, "--strict passed without pillow-simd or the C extensions"
    assert "dataio.formats.jpeg._jpeg_codec is not built" in check.stdout
    assert "dataio.augment._randaugment_cpu is not built" in check.stdout
    assert "dataio.augment._normalize_cpu is not built" in check.stdout
    assert "dataio.augment._views_cpu is not built" in check.stdout
    assert "dataio.mixtures._blend is not built" in check.stdout
    assert "dataio.text._collate is not built" in check.stdout
    assert [line.split(": ", 2)[2].split(" (")[0] for line in check.stderr.splitlines()] == [
        "PIL is not pillow-simd with libjpeg-turbo", "the region decoder dataio.formats.jpeg._jpeg_codec is not built",
        "the RandAugment kernel dataio.augment._randaugment_cpu is not built",
        "the CPU normalisation dataio.augment._normalize_cpu is not built",
        "the multi-crop view ops dataio.augment._views_cpu are not built",
        "the mixture blend dataio.mixtures._blend is not built",
        "the padded text batches dataio.text._collate is not built"], check.stderr
    packed, shards = _convert(user_env, real_photos, tmp_path)  # 12 ImageNet-size photos and 2 camera ones
    assert "packed 14 images" in packed.stdout, packed.stdout
    assert packed.stderr.count("\n") == 1 and "JPEGs are packed as they are" in packed.stderr, packed.stderr
    epoch = _ok([user_env.python, "-c", LOADER_EPOCH, shards], tmp_path)
    assert epoch.stdout.split() == ["14", "turbo"]
    lines = epoch.stderr.splitlines()  # two decode threads, two batches: each fallback said once
    assert len(lines) == 3, epoch.stderr
    assert sum("PIL decodes whole JPEGs" in line for line in lines) == 1
    assert sum("RandAugment on uint8 CPU batches uses torch ops" in line for line in lines) == 1
    assert sum("normalize=True on the CPU uses numpy" in line for line in lines) == 1
