import sys
import dataio
mode, passes = sys.argv[1], int(sys.argv[2])
cases = {"bucket": dict(mode="bucket", batch_size=32), "budget-8k": dict(mode="budget", max_tokens=8192),
         "pack": dict(mode="pack", block_size=1024, batch_size=16), "fixed": dict(mode="fixed", batch_size=32)}
loader = dataio.TextLoader("./shards-txt", seed=0, **cases[mode])
for _ in range(passes):
    loader.set_epoch(0)
    for b in loader:
        pass
