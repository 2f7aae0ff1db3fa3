import time, sys, statistics
import dataio
budget = int(sys.argv[1])
loader = dataio.TextLoader("./shards-txt", mode="budget", max_tokens=budget, seed=0)
for _ in range(2):
    list(iter(loader)); loader.set_epoch(0)
rates = []
for r in range(7):
    t = time.process_time(); toks = 0; n = 0
    for b in iter(loader):
        toks += b["input_ids"].numel(); n += 1
    dt = time.process_time() - t
    loader.set_epoch(0)
    rates.append(toks / dt / 1e6)
print(f"{sys.argv[1]}: median {statistics.median(rates):.0f}M tok/cpu-s ({n} batches, {dt/n*1e6:.1f} us/batch)")
