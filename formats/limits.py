"""Limits shared by the packer, the readers and the CLI (kept import-free, so parsing arguments stays fast)."""

# Decompression-bomb limit: PIL's default (~0.25 GB of RGBA). A header claiming more pixels is
# refused before anything is allocated, at pack time (``--max-pixels``) and by the readers' decoders.
MAX_PIXELS = 89_478_485
