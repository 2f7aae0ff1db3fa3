"""Issue 46, as a user on an AVX2-only EPYC (this CPU capped with ``dataio.use_tier("avx2")``): the crop-resize tier
in spawned and forkserver DataLoader workers, in ``torch.multiprocessing.spawn`` ranks handed a built loader, and
what the docs say of the tier functions."""
