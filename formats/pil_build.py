"""Which PIL is installed, and what it costs: pillow-simd (the Makefile's venv) or plain pillow.

pillow-simd is pillow with SIMD resize kernels, under another distribution name. Both install the
``PIL`` package, so an environment should hold exactly one of them: with both, whichever was installed
last owns the files, silently. That is why pillow-simd is not a dependency, nor an extra, of
torch-dataio: plain pillow is (matplotlib and most environments hold it already), and pillow-simd is a
swap (``pip uninstall -y pillow && pip install --no-deps pillow-simd``; it compiles against the
libjpeg-turbo headers).
"""

from __future__ import annotations

from importlib.metadata import packages_distributions

import PIL
from PIL import features

# ImageLoader, train crops at 224 of ImageNet-size photos (~110 KB), one decode thread, region decoder
# built: 1,490 us of CPU per image with pillow 13.0.0 against 990 with pillow-simd 12.1.1.post0 (the
# crop-and-resize is the part SIMD speeds up; best of 8 epochs each, 2-core VM).
PILLOW_CPU_COST = 1.5
SWAP = "pip uninstall -y pillow && pip install --no-deps pillow-simd"


def pil_build() -> dict[str, object]:
    """The PIL in use: its version, whether it is pillow-simd, and its JPEG library's version."""
    turbo = bool(features.check_feature("libjpeg_turbo"))
    return {
        "version": PIL.__version__,
        "simd": ".post" in PIL.__version__,  # pillow-simd versions carry a .postN suffix
        "libjpeg_turbo": turbo,
        "jpeg": features.version("libjpeg_turbo") if turbo else features.version("jpg"),  # "jpg": the API, 6.2
    }


def pil_owners() -> list[str]:
    """The installed distributions that ship the ``PIL`` package: one, unless pillow and pillow-simd clash.

    Reads every distribution's file list (about 0.5 s in the Makefile's venv): for ``check_install``."""
    return sorted(set(packages_distributions().get("PIL", [])), key=str.lower)


def describe_pil(build: dict[str, object] | None = None) -> str:
    """One line: the PIL in use and, for plain pillow, what it costs against pillow-simd."""
    build = build or pil_build()
    jpeg = f"libjpeg-turbo {build['jpeg']}" if build["libjpeg_turbo"] else f"libjpeg {build['jpeg']} (not turbo)"
    if build["simd"]:
        return f"PIL is pillow-simd {build['version']} with {jpeg}"
    return (f"PIL is pillow {build['version']} with {jpeg}, not pillow-simd: about {PILLOW_CPU_COST}x the CPU "
            f"time per image in ImageLoader (the crop-and-resize); to swap: {SWAP}")
