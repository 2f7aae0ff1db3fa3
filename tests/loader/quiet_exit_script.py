"""A user's script that ends with loaders in every state, run by test_quiet_exit.py; not a test module.

``python quiet_exit_script.py SOURCES_JSON MODE``, SOURCES_JSON holding
``images`` and ``text`` (folders or URLs) and ``storage_options`` (or null):

- ``states``: for each of ImageLoader, dataio.DataLoader and TextLoader, one
  loader closed after a pass, one left open after a pass and one broken out of
  after its first batch (its pass left suspended); then the script ends.
- ``interrupt:KIND`` (image, dropin, text): iterates KIND's loader epoch after
  epoch, printing ``started`` once a batch came; the test sends SIGINT.
"""

from __future__ import annotations

import json
import sys

import dataio

KEPT: list = []  # alive until the interpreter exits, as a script's module-level loaders are


def build(kind: str, sources: dict):
    remote = {"storage_options": sources["storage_options"]} if sources["storage_options"] else {}
    if kind == "image":
        return dataio.ImageLoader(sources["images"], batch_size=4, image_size=64, num_workers=2, **remote)
    if kind == "dropin":
        return dataio.DataLoader(sources["images"], batch_size=4, shuffle=True, image_size=64, num_workers=2,
                                 **remote)
    return dataio.TextLoader(sources["text"], mode="fixed", batch_size=4, **remote)


def main() -> None:
    sources, mode = json.loads(sys.argv[1]), sys.argv[2]
    if mode == "states":
        for kind in ("image", "dropin", "text"):
            with build(kind, sources) as closed:
                for _ in closed:
                    pass
            left_open = build(kind, sources)
            for _ in left_open:
                pass
            broken = build(kind, sources)
            passes = iter(broken)
            next(passes)  # the pass stays suspended, its batches in flight, until exit
            KEPT.extend([left_open, broken, passes])
        print("end", flush=True)
        return
    loader = build(mode.split(":")[1], sources)
    while True:
        for _ in loader:
            print("started", flush=True)


if __name__ == "__main__":
    main()
