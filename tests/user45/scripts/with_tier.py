"""``python with_tier.py TIERS SCRIPT ARGS...``: run SCRIPT unchanged, as ``__main__``, once per tier of the
comma-separated TIERS in turn (``default``: as the process starts, else capped by the Python API, ``use_tier``),
``{tier}`` in ARGS replaced by the tier's name; prints the tier of each run on stderr."""

import runpy
import sys

from dataio.formats.jpeg.cpu_tier import tier_in_use, use_tier

tiers, script, args = sys.argv[1].split(","), sys.argv[2], sys.argv[3:]
for tier in tiers:
    if tier != "default":
        use_tier(tier)
    sys.argv = [script, *(arg.replace("{tier}", tier) for arg in args)]
    runpy.run_path(script, run_name="__main__")
    print(f"with_tier: {tier}: ran {tier_in_use()}", file=sys.stderr)
