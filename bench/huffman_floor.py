"""Each stage of dataio's image path as a fraction of its floor: the Huffman decoding of the same bytes.

The entropy decoding of the restart intervals a crop reads (``stage_limits``' ``entropy_us``) is the one part
of the work no kernel can shrink: it is serial bit-by-bit work, the same bytes whatever decodes them. Set
beside it, per image: the rest of the decode (IDCT, upsampling and colour conversion of the region: the decode
limit less the Huffman time), the crop-resize, the read (with the per-sample checksum) and the copy (the memory
bound of an image's bytes), each as a multiple of the Huffman time, from the same single-thread limits; then
the path (decode and resize, the issue's "CPU per image of the train path") and the loader's whole process
CPU per image, over the same floor. A row decoded at reduced DCT size has no Huffman time (``stage_limits``).
"""

from __future__ import annotations

from typing import Any

from dataio.bench.report import format_table


def over_floor(limits: dict[str, Any]) -> dict[str, float] | None:
    """Per image, each stage over the Huffman time of ``stage_limits.compare``'s result; None without one."""
    huffman = limits.get("entropy_us")
    if not huffman:
        return None
    limit = limits["limit_us"]  # read already holds the checksum where the loader checks one
    rest = max(0.0, limit["decode"] - huffman)
    out = {"huffman_us": huffman, "rest_of_decode": rest / huffman, "resize": limit["resize"] / huffman,
           "read": limit["read"] / huffman, "copy": limits["copy_bound_us"] / huffman,
           "decode_resize": (limit["decode"] + limit["resize"]) / huffman}
    if limits.get("cpu_us_per_image"):
        out["process"] = limits["cpu_us_per_image"] / huffman
    return out


def render(rows: list[tuple[str, dict[str, Any]]]) -> list[str]:
    """The table of ``over_floor`` for each dataio row that has a Huffman time."""
    table = []
    for label, limits in rows:
        floor = over_floor(limits)
        if floor is None:
            continue
        table.append({"label": label, "huffman": f"{floor['huffman_us']:,.0f}",
                      **{key: f"{floor[key]:.2f}x" for key in ("rest_of_decode", "resize", "read", "copy",
                                                                "decode_resize")},
                      "process": f"{floor['process']:.2f}x" if "process" in floor else "-"})
    if not table:
        return []
    columns = [("label", "dataio per image over its Huffman floor", "s"), ("huffman", "Huffman us", "s"),
               ("rest_of_decode", "rest of decode", "s"), ("resize", "resize", "s"), ("read", "read", "s"),
               ("copy", "copy", "s"), ("decode_resize", "decode + resize", "s"), ("process", "process CPU", "s")]
    return [format_table(table, columns),
            "(each stage's single-thread CPU per image over the Huffman decoding of the same restart intervals: "
            "rest of decode = IDCT, upsampling and colour conversion of the region; read with the checksum; copy "
            "at the measured copy bandwidth; decode + resize: the path's CPU over its floor; process CPU: the "
            "loader's threads per image over the same floor)"]
