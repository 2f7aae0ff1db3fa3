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
from dataio.formats.jpeg.cpu_tier import cpu_tier, tier_in_use
from dataio.images import turbo_decode


# The instruction sets that set a CPU's class for the loader (its crop-resize tiers), as /proc/cpuinfo names them.
CPU_FLAGS = ("avx2", "avx512f", "avx512bw", "avx512vl", "avx512vbmi", "avx512_vnni")


def cpu_class() -> tuple[str, str]:
    """(model name, class): the class is family/model and the instruction sets of ``CPU_FLAGS`` the CPU has, as
    a VM's model name ("Intel(R) Xeon(R) Processor") does not say which generation it is."""
    cpu, fields = platform.processor() or platform.machine(), {}
    try:
        for line in read_kernel_text("/proc/cpuinfo").splitlines():
            key, _, value = line.partition(":")
            fields.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    cpu = fields.get("model name", cpu)
    flags = set(fields.get("flags", "").split())
    has = [flag for flag in CPU_FLAGS if flag in flags]
    where = f"family {fields['cpu family']} model {fields['model']}" if "cpu family" in fields else platform.machine()
    return cpu, f"{where}: {' '.join(has) or 'no AVX2'}"


def machine_description() -> dict[str, Any]:
    """The facts a reader needs to compare figures: CPU model and class, the crop-resize tier (None where PIL
    does the crop-resize), cores, Python, torch."""
    cpu, kind = cpu_class()
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    in_c = turbo_decode.RESIZE_IN_C  # False: PIL crop-resizes, no tier runs (cpu_tier None)
    return {"cpu": cpu, "cpu_class": kind, "cpu_tier": tier_in_use() if in_c else None,
            "cpu_tier_highest": cpu_tier(),
            "cores": os.cpu_count(), "gpu": gpu, "python": platform.python_version(), "torch": torch.__version__,
            "platform": platform.platform()}


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

