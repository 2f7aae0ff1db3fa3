"""Check that the imported PIL is pillow-simd built with libjpeg-turbo (run by the Makefile)."""

from __future__ import annotations

import sys


def pillow_build() -> dict[str, object]:
    import PIL
    from PIL import features

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
    print(f"dataio: pillow-simd {build['version']} with libjpeg-turbo {build['jpeg']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
