"""Check the fast CPU paths (run by the Makefile): pillow-simd with libjpeg-turbo and the two C extensions.

``dataio.formats._jpeg_codec`` (region decoding) and ``dataio.dataio.augment._randaugment_cpu``
(RandAugment on uint8 CPU batches) are optional for a plain ``pip install``:
without a compiler or libjpeg headers, PIL decodes whole images and RandAugment
uses torch ops. ``make`` installs the headers, so there their absence is an error.
"""

from __future__ import annotations

import sys

import PIL
from PIL import features

from dataio.augment.cpu_kernel import AVAILABLE
from dataio.images.turbo_decode import REGION_DECODE


def pillow_build() -> dict[str, object]:
    return {
        "version": PIL.__version__,
        "simd": ".post" in PIL.__version__,  # pillow-simd versions carry a .postN suffix
        "libjpeg_turbo": bool(features.check_feature("libjpeg_turbo")),
        "jpeg": features.version("jpg"),
    }


def main() -> int:
    build = pillow_build()
    if not (build["simd"] and build["libjpeg_turbo"]):
        print(f"dataio: PIL is not pillow-simd with libjpeg-turbo: {build}. "
              "Reinstall with: pip uninstall -y pillow pillow-simd && pip install --no-deps pillow-simd",
              file=sys.stderr)
        return 1
    if not REGION_DECODE:
        print("dataio: the region decoder dataio.formats._jpeg_codec was not built (needs a C compiler and libjpeg "
              "headers, e.g. apt-get install libjpeg62-turbo-dev); reinstall dataio", file=sys.stderr)
        return 1
    if not AVAILABLE:
        print("dataio: the RandAugment kernel dataio.dataio.augment._randaugment_cpu was not built (needs a C compiler); "
              "reinstall dataio", file=sys.stderr)
        return 1
    print(f"dataio: pillow-simd {build['version']} with libjpeg-turbo {build['jpeg']}; region decoder and "
          "RandAugment kernel built")
    return 0


if __name__ == "__main__":
    sys.exit(main())
