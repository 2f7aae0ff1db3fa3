"""Issue 45 as a user meets it: the crop-resize's CPU tiers (scalar, avx2, avx512, vbmi) forced to AVX2, as on an
AVX2-only EPYC, through DATAIO_CPU_TIER, `dataio bench images --cpu-tier` and `use_tier`."""
