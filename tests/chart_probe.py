"""The ``dataio`` command, with every matplotlib figure it saves measured as it is saved; run by
test_chart_layout.py as a subprocess, not a test module.

``python chart_probe.py OUT.json ARGS...`` runs ``dataio ARGS...`` on a machine whose CPU is named at length
(``/proc/cpuinfo`` unread, ``platform.processor()`` a long name), and writes for each saved figure: the drawn
texts whose window extent (matplotlib's renderer) leaves the canvas, all the text, and the size in pixels the
canvas makes at the saving dpi.
"""

from __future__ import annotations

import json
import os
import pathlib
import platform
import sys

import matplotlib

matplotlib.use("Agg")
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.text import Text  # noqa: E402

LONG_CPU = "Intel(R) Xeon(R) Platinum 8480+ Processor @ 2.0GHz (Sapphire Rapids, 56 cores per socket)"


def outside(figure: Figure) -> list[str]:
    """The drawn texts of ``figure`` whose extent leaves the canvas, each with its extent."""
    figure.canvas.draw()
    renderer = figure.canvas.get_renderer()
    width, height = figure.bbox.width, figure.bbox.height
    undrawn = set()  # the labels of ticks past an axis's view limits: kept by matplotlib, not drawn
    for axes in figure.axes:
        for axis in (axes.xaxis, axes.yaxis):
            low, high = sorted(axis.get_view_interval())
            undrawn |= {id(label) for tick in axis.get_major_ticks() if not low <= tick.get_loc() <= high
                        for label in (tick.label1, tick.label2)}
    out = []
    for text in figure.findobj(Text):
        if not text.get_visible() or not text.get_text().strip() or id(text) in undrawn:
            continue
        box = text.get_window_extent(renderer)
        if box.x0 < -0.5 or box.y0 < -0.5 or box.x1 > width + 0.5 or box.y1 > height + 0.5:
            out.append(f"{text.get_text()!r} at {[round(v) for v in box.extents]} on {width:.0f}x{height:.0f}")
    return out


def saved_name(target) -> str:
    """The chart's file name. dataio hands ``savefig`` the gate's temp file (``.NAME.tmp-HOST-PID``, issue 42),
    open: its name is read back from the descriptor."""
    if isinstance(target, (str, os.PathLike)):
        return pathlib.Path(target).name
    from dataio.formats.file_gate import TEMP_INFIX

    temp = pathlib.Path(os.readlink(f"/proc/self/fd/{target.fileno()}")).name
    return temp[1:].split(TEMP_INFIX)[0]


def main() -> int:
    report, saved, save = pathlib.Path(sys.argv[1]), {}, Figure.savefig

    def measured(figure: Figure, path, *args, **kwargs):
        leaving = outside(figure)  # drawn first: tick labels get their text when drawn
        dpi = kwargs.get("dpi", figure.dpi)
        saved[saved_name(path)] = {"outside": leaving, "text": " ".join(t.get_text() for t in
                                                                               figure.findobj(Text)),
                                          "size": [round(v * dpi) for v in figure.get_size_inches()]}
        return save(figure, path, *args, **kwargs)

    def read_text(path: pathlib.Path, *args, **kwargs) -> str:
        if str(path) == "/proc/cpuinfo":
            raise OSError("not read: the CPU is named by platform.processor()")
        return plain_read_text(path, *args, **kwargs)

    from dataio.formats import file_gate

    plain_kernel_text = file_gate.read_kernel_text

    def read_kernel_text(path: str, *args, **kwargs) -> str:  # the gate's read of /proc (issue 42)
        if path == "/proc/cpuinfo":
            raise OSError("not read: the CPU is named by platform.processor()")
        return plain_kernel_text(path, *args, **kwargs)

    plain_read_text = pathlib.Path.read_text
    Figure.savefig, pathlib.Path.read_text = measured, read_text
    file_gate.read_kernel_text = read_kernel_text  # before bench/report.py imports it, when the command runs
    platform.processor = lambda: LONG_CPU
    from dataio.cli import main as dataio

    code = dataio(sys.argv[2:])
    report.write_text(json.dumps(saved))
    return code


if __name__ == "__main__":
    sys.exit(main())
