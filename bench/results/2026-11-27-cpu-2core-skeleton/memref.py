import sys
from pathlib import Path
from dataio.bench.text_reference import memory_reference
out = memory_reference(Path("./shards-txt"), (8192, 65536), rounds=7, log=lambda *a: None)
print(" ".join(f"{r['budget']}:{r['dataio_tok_s']/1e6:.0f}M/{r['numpy_tok_s']/1e6:.0f}M" for r in out))
