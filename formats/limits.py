"""Limits shared by the packer, the readers and the CLI (kept import-free, so parsing arguments stays fast)."""

# Decompression-bomb limit: PIL's default (~0.25 GB of RGBA). A header claiming more pixels is
# refused before anything is allocated, at pack time (``--max-pixels``) and by the readers' decoders.
MAX_PIXELS = 89_478_485

# Class labels given as integers without class names (Parquet, `dataio index`): the names "0".."K-1" are
# made up to the largest label, so one absurd label (10**12) would build a list of that many names. Labels
# at or past this bound are rejected per row instead. A million classes is past every public classification
# set (ImageNet-21k: 21,841); more takes a --classes FILE.
MAX_CLASSES = 1_000_000
