"""Print benchmark tables and write their JSON and PNG bar chart."""

from __future__ import annotations

import json
import os
import platform
import textwrap
from pathlib import Path
from typing import Any

import torch

from dataio.formats.file_gate import atomic_writer, read_kernel_text, write_atomic


def machine_description() -> dict[str, Any]:
    """The facts a reader needs to compare figures: CPU model, cores, Python, torch."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in read_kernel_text("/proc/cpuinfo").splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    return {"cpu": cpu, "cores": os.cpu_count(), "gpu": gpu, "python": platform.python_version(),
            "torch": torch.__version__, "platform": platform.platform()}


def load_average() -> list[float] | None:
    """The 1, 5 and 15 minute load averages now (None where the OS has none): how shared the machine was."""
    try:
        return [round(v, 2) for v in os.getloadavg()]
    except OSError:
        return None


def format_table(rows: list[dict[str, Any]], columns: list[tuple[str, str, str]]) -> str:
    """Fixed-width text table; ``columns`` are (key, header, format spec)."""
    cells = [[header for _, header, _ in columns]]
    for row in rows:
        cells.append([format(row[key], spec) if row.get(key) is not None else "-" for key, _, spec in columns])
    widths = [max(len(r[i]) for r in cells) for i in range(len(columns))]
    lines = ["  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True)))
             for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def write_results(out: Path, name: str, result: dict[str, Any], bars: dict[str, float], ylabel: str,
                  value_format: str = ",.0f") -> list[Path]:
    """Write ``out/name.json`` and, if matplotlib is installed, ``out/name.png`` (bars labelled ``value_format``)."""
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / f"{name}.json"]
    write_atomic(paths[0], (json.dumps(result, indent=1) + "\n").encode())
    try:  # deliberately lazy: matplotlib is optional (the bench extra) and slow to import
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return paths
    longest = max((len(label) for label in bars), default=0)
    # Sized for its labels (about 0.075 in per character at the tick font) and laid out by matplotlib's
    # constrained layout, which keeps every text (ticks, values, wrapped title) inside the canvas.
    fig, ax = plt.subplots(figsize=(max(7.0, 4.0 + 0.075 * longest), max(3.5, 1.4 + 0.4 * len(bars))),
                           layout="constrained")
    ax.barh(list(bars), list(bars.values()), color="#4878a8")
    for i, value in enumerate(bars.values()):
        ax.text(value, i, f" {value:{value_format}}", va="center")
    ax.invert_yaxis()
    ax.set_xlim(0, max(bars.values(), default=1) * 1.15)  # room for the value labels
    ax.set_xlabel(ylabel)
    machine = result.get("machine", {})
    title = f"{name}: {machine.get('cpu', '')}, {machine.get('cores')} cores"
    fig.suptitle(textwrap.fill(title, width=int(fig.get_figwidth() * 12)), fontsize=9)  # over the whole width
    with atomic_writer(out / f"{name}.png") as f:  # matplotlib given a path would write through a planted link
        fig.savefig(f, format="png", dpi=110)
    plt.close(fig)
    paths.append(out / f"{name}.png")
    return paths

