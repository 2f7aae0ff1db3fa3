"""Each crop-resize tier's single-thread stages over the Huffman floor, the tiers interleaved in one process.

``python -m dataio.bench.tier_floors SHARDS [SHARDS ...]``: for each packed folder, training crops and the eval
centre crop, every tier this CPU runs (``dataio.formats.jpeg.cpu_tier``) takes its turn at ``stage_limits``
(one thread, no loader), round after round, and each figure is the best of its rounds: on a shared machine,
drift then hits every tier alike, where one ``dataio bench images --cpu-tier`` run per tier sees the machine
at different moments. Prints ``huffman_floor``'s multiples per tier; ``--json`` writes them.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from dataio.bench.huffman_floor import over_floor
from dataio.bench.stage_limits import stage_limits
from dataio.formats.file_gate import write_atomic
from dataio.formats.jpeg.cpu_tier import TIERS, cpu_tier, use_tier


def tier_floors(folders: list[Path], *, count: int = 500, rounds: int = 2, size: int = 224) -> dict[str, dict]:
    """``{"FOLDER train|eval TIER": {huffman, read, decode, resize, path, copy_bound}}`` in us per image."""
    tiers = TIERS[: TIERS.index(cpu_tier()) + 1]
    found: dict[str, dict] = {}
    try:
        for _ in range(rounds):
            for folder in folders:
                for train in (True, False):
                    for tier in tiers:
                        use_tier(tier)
                        r = stage_limits(folder, size=size, train=train, count=count, passes=2)
                        u = r["us_per_image"]
                        now = {"huffman": r["entropy_us"], "read": u["read"] + r["checksum_us"],
                               "decode": u["decode"], "resize": u["resize"], "path": r["path_us"],
                               "copy_bound": r["copy_bound_us"]}
                        key = f"{folder.name} {'train' if train else 'eval'} {tier}"
                        last = found.get(key)
                        found[key] = now if last is None else {k: _least(last[k], now[k]) for k in now}
    finally:
        use_tier(TIERS[-1])
    return found


def _least(a: float | None, b: float | None) -> float | None:
    """The smaller figure; None (no Huffman time: a DCT-scaled decode) where either is."""
    return None if a is None or b is None else min(a, b)


def render(found: dict[str, dict]) -> str:
    """One line per folder, mode and tier: each stage as a multiple of the Huffman time (``huffman_floor``)."""
    lines = []
    for key, v in found.items():
        floor = over_floor({"entropy_us": v["huffman"], "copy_bound_us": v["copy_bound"], "cpu_us_per_image": v["path"],
                            "limit_us": {stage: v[stage] for stage in ("read", "decode", "resize")}})
        if floor is None:
            lines.append(f"{key:24s} no Huffman time (a DCT-scaled decode: stage_limits)")
            continue
        lines.append(f"{key:24s} huffman {floor['huffman_us']:6.0f} us  rest of decode {floor['rest_of_decode']:.2f}x  "
                     f"resize {v['resize']:5.0f} us {floor['resize']:.2f}x  read {floor['read']:.2f}x  copy "
                     f"{floor['copy']:.2f}x  decode+resize {floor['decode_resize']:.2f}x  path {v['path']:.0f} us "
                     f"{floor['process']:.2f}x")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dataio.bench.tier_floors", description=__doc__.splitlines()[0])
    parser.add_argument("shards", type=Path, nargs="+", help="folders packed by dataio convert images")
    parser.add_argument("--count", type=int, default=500, help="samples per pass (default: 500)")
    parser.add_argument("--rounds", type=int, default=2, help="rounds over every tier (default: 2)")
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args(argv)
    found = tier_floors(args.shards, count=args.count, rounds=args.rounds)
    print(render(found))
    if args.json:
        write_atomic(args.json, json.dumps(found, indent=1).encode())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
