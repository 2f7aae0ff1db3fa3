"""``python -m dataio.check_install``: what this install of torch-dataio uses, and what each missing piece costs.

One line each for the PIL in use (pillow-simd or plain pillow, and the distributions that own ``PIL``),
the six optional C extensions (the region decoder ``dataio.formats.jpeg._jpeg_codec``, the RandAugment kernel
``dataio.augment._randaugment_cpu``, the CPU normalisation ``dataio.augment._normalize_cpu``, the multi-crop view ops
``dataio.augment._views_cpu``, the mixture blend ``dataio.mixtures._blend``, the padded text batches
``dataio.text._collate``; a ``pip install`` without a compiler or libjpeg headers succeeds without them) and NVIDIA DALI (which build, or which extra fits this torch). Exits 1 on a broken install
(two distributions owning ``PIL``, or two DALI builds); with ``--strict`` (the Makefile's venv), also when
a fast CPU path is missing: pillow-simd with libjpeg-turbo and all six extensions.
"""

from __future__ import annotations

import argparse
import sys
from importlib.metadata import PackageNotFoundError, version

import torch

from dataio.augment import host_normalize, views_kernel
from dataio.augment.cpu_kernel import AVAILABLE, WITHOUT_KERNEL
from dataio.cli.flags import cpu_tier_applied
from dataio.formats.errors import UsageError
from dataio.formats.images import image_prepare
from dataio.formats.jpeg import cpu_tier
from dataio.formats.pil_build import SWAP, describe_pil, pil_build, pil_owners
from dataio.images import turbo_decode
from dataio.mixtures import blend
from dataio.text import collate
from dataio.images.dali_install import BUILDS, install_hint, installed_builds, torch_cuda_major

DISTRIBUTION = "torch-dataio"  # the name on the package index; the import name is dataio


def _distribution() -> str:
    try:
        return f"{DISTRIBUTION} {version(DISTRIBUTION)}"
    except PackageNotFoundError:
        return f"{DISTRIBUTION} not installed (dataio imported from a source folder)"


def report() -> tuple[list[str], list[str], list[str]]:
    """``(lines, broken, slow)``: what is in use, what makes the install broken, which fast path is missing."""
    build, owners = pil_build(), pil_owners()
    cuda = torch_cuda_major()
    lines = [f"{_distribution()}, torch {torch.__version__} ({f'CUDA {torch.version.cuda}' if cuda else 'CPU'} build)",
             f"{describe_pil(build)}; PIL owned by {', '.join(owners) or 'no distribution'}"]
    broken, slow = [], []
    if len(owners) > 1:
        broken.append(f"{' and '.join(owners)} each install PIL: the last one installed silently owns it. Keep one: "
                      f"pip uninstall -y {' '.join(owners)} && pip install pillow (or, for SIMD, {SWAP})")
    if not (build["simd"] and build["libjpeg_turbo"]):
        slow.append(f"PIL is not pillow-simd with libjpeg-turbo ({build['version']}, jpeg {build['jpeg']}): {SWAP}")
    if cpu_tier.stale():
        slow.append(cpu_tier.STALE)
    if turbo_decode.REGION_DECODE:
        lines.append("region decoder dataio.formats.jpeg._jpeg_codec: built; crop-resize: "
                     + (f"the extension's (pillow-simd's pixels), {cpu_tier.describe_tier()}"
                        if turbo_decode.RESIZE_IN_C else "PIL's (the extension's gives pillow-simd's pixels, not this PIL's)"))
    else:
        lines += [turbo_decode.WITHOUT_CODEC, image_prepare.WITHOUT_CODEC]
        slow.append("the region decoder dataio.formats.jpeg._jpeg_codec is not built")
    if AVAILABLE:
        lines.append("RandAugment kernel dataio.augment._randaugment_cpu: built")
    else:
        lines.append(WITHOUT_KERNEL)
        slow.append("the RandAugment kernel dataio.augment._randaugment_cpu is not built")
    if host_normalize.AVAILABLE:
        lines.append("CPU normalisation dataio.augment._normalize_cpu: built")
    else:
        lines.append(host_normalize.WITHOUT_KERNEL)
        slow.append("the CPU normalisation dataio.augment._normalize_cpu is not built")
    if views_kernel.AVAILABLE:
        lines.append("multi-crop view ops dataio.augment._views_cpu: built")
    else:
        lines.append(views_kernel.WITHOUT_KERNEL)
        slow.append("the multi-crop view ops dataio.augment._views_cpu are not built")
    if blend._blend is not None:
        lines.append("mixture blend dataio.mixtures._blend: built")
    else:
        lines.append(blend.WITHOUT_EXTENSION)
        slow.append("the mixture blend dataio.mixtures._blend is not built")
    if collate._collate is not None:
        lines.append("padded text batches dataio.text._collate: built")
    else:
        lines.append(collate.WITHOUT_EXTENSION)
        slow.append("the padded text batches dataio.text._collate is not built")
    dali = installed_builds()
    if not dali:
        lines.append(f"NVIDIA DALI: not installed (decoder='dali' unavailable, 'auto' decodes on the CPU); "
                     f"for it: {install_hint()}")
    for name, dali_version in dali.items():
        lines.append(f"NVIDIA DALI: {name} {dali_version} (CUDA {BUILDS[name]})")
        if cuda is not None and BUILDS[name] != cuda:
            lines.append(f"  {name} brings a CUDA {BUILDS[name]} stack beside torch's CUDA {cuda}: "
                         f"pip uninstall -y {name} && {install_hint()}")
    if len(dali) > 1:
        broken.append(f"{' and '.join(dali)} both install nvidia.dali: keep one, pip uninstall -y {' '.join(dali)} "
                      f"&& {install_hint()}")
    return lines, broken, slow


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m dataio.check_install", description=__doc__.splitlines()[0],
        epilog="environment: DATAIO_CPU_TIER=scalar|avx2|avx512|vbmi runs the crop-resize at that CPU tier, or the "
        "CPU's highest where that is lower, as the dataio command does; a Python script calls "
        "dataio.use_tier(name) instead (docs/read.md, CPU tiers)")
    parser.add_argument("--strict", action="store_true",
                        help="exit 1 unless pillow-simd with libjpeg-turbo and the six C extensions are in use")
    args = parser.parse_args(argv)
    try:
        with cpu_tier_applied(None) as notice:  # DATAIO_CPU_TIER, as the dataio command reads it
            if notice:
                print(notice, file=sys.stderr)
            lines, broken, slow = report()
    except UsageError as error:
        print(f"dataio: {error}", file=sys.stderr)
        return 2
    for line in lines:
        print(f"dataio: {line}")
    for line in broken:
        print(f"dataio: broken install: {line}", file=sys.stderr)
    if args.strict:
        for line in slow:
            print(f"dataio: --strict: {line}", file=sys.stderr)
    return 1 if broken or (args.strict and slow) else 0


if __name__ == "__main__":
    sys.exit(main())
