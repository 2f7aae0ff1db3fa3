"""The benchmark charts (``make demo`` / ``dataio demo``, every ``dataio bench``) show every label whole."""

from __future__ import annotations

import matplotlib
import pytest
from matplotlib.figure import Figure
from matplotlib.text import Text
from PIL import Image

from dataio.bench.images import _RUNNERS
from dataio.bench.report import write_results

matplotlib.use("Agg")
LONG_CPU = "Intel(R) Xeon(R) Platinum 8480+ Processor @ 2.0GHz (Sapphire Rapids, 56 cores per socket)"


def _saved_figures(monkeypatch) -> list[tuple[list[str], str, tuple[int, int]]]:
    """For every figure ``savefig`` writes, as it is written: the texts outside the canvas, all the text, and
    the image size the canvas makes."""
    saved, save = [], Figure.savefig

    def keep(figure, *args, **kwargs):
        outside = _outside(figure)  # drawn first: tick labels get their text when drawn
        texts = " ".join(t.get_text() for t in figure.findobj(Text))
        dpi = kwargs.get("dpi", figure.dpi)  # the pixels written: the canvas at the saving dpi, nothing cropped
        saved.append((outside, texts, tuple(round(v * dpi) for v in figure.get_size_inches())))
        return save(figure, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", keep)
    return saved


def _outside(figure: Figure) -> list[str]:
    """The texts of ``figure`` whose drawn extent leaves the canvas, with their extents."""
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


@pytest.mark.parametrize("rows", [2, len(_RUNNERS)])
def test_every_label_of_the_demo_chart_lies_inside_the_saved_image(tmp_path, monkeypatch, rows):
    saved = _saved_figures(monkeypatch)
    bars = {label: 900.0 + 400 * i for i, (label, *_) in enumerate(list(_RUNNERS.values())[:rows])}
    paths = write_results(tmp_path, "images", {"machine": {"cpu": LONG_CPU, "cores": 2}}, bars, "images/s")
    assert [p.name for p in paths] == ["images.json", "images.png"] and len(saved) == 1
    outside, texts, size = saved[0]
    assert outside == []
    assert all(label in texts for label in bars) and "56 cores per socket" in texts.replace("\n", " ")
    with Image.open(paths[1]) as image:  # what was measured is what was written
        assert image.size == size
