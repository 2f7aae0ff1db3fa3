"""The loader skeleton's machinery: a sample source's batches read on decode threads, the error policy, stage timing,
the copy to the device (``docs/architecture.md``)."""
