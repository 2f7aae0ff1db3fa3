"""A training loop's view of the fork fix: dataio's training loader beside a validation DataLoader with 2
worker processes, CPU us per image, images/s and page faults per image of each training epoch after a
validation pass. Run as ``python val_loader_fork.py wipe|plain transient|persistent SHARDS`` (plain: the
pool in ordinary memory, as before the fix)."""

import resource
import sys
import time

import torch

from dataio.images import buffer_pool

buffer_pool.WIPE_ON_FORK = sys.argv[1] == "wipe"
from dataio import ImageLoader  # noqa: E402

loader = ImageLoader(sys.argv[3], batch_size=256, image_size=224, num_workers=2, train=True)
val = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.arange(64)), batch_size=8, num_workers=2,
                                  persistent_workers=sys.argv[2] == "persistent")


def faults() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


for _ in loader:  # warm
    pass
_ = None  # the last batch is not held across the fork (a held batch stays copy-on-write, as it must)
rows = []
for epoch in range(4):
    for _ in val:  # validation: starts its workers (each time unless persistent)
        pass
    f0, c0, t0 = faults(), time.process_time(), time.perf_counter()
    n = sum(len(labels) for _, labels in loader)
    rows.append(((time.process_time() - c0) / n * 1e6, n / (time.perf_counter() - t0), (faults() - f0) / n))
print(sys.argv[1], sys.argv[2], " | ".join(f"{c:.0f} us {r:.0f} img/s {f:.1f} faults" for c, r, f in rows))
