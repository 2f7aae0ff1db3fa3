"""Loader and augmentation benchmarks, run as ``dataio bench ...``."""
