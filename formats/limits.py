"""Limits shared by the packer, the readers and the CLI (kept import-free, so parsing arguments stays fast)."""

# Decompression-bomb limit: PIL's default (~0.25 GB of RGBA). A header claiming more pixels is
# refused before anything is allocated, at pack time (``--max-pixels``) and by the readers' decoders.
MAX_PIXELS = 89_478_485

# Class labels given as integers without class names (Parquet, `dataio index`): the names "0".."K-1" are
# made up to the largest label, so one absurd label (10**12) would build a list of that many names. Labels
# at or past this bound are rejected per row instead. A million classes is past every public classification
# set (ImageNet-21k: 21,841); more takes a --classes FILE.
MAX_CLASSES = 1_000_000

# Largest source file the packer reads (``--max-file-size``): every image within the default MAX_PIXELS fits,
# even stored uncompressed at 16 bits a channel with alpha (8 bytes a pixel: 716 MB); it is also the largest
# image member the readers accept (``sample_table.MAX_MEMBER_BYTES``). A file past it (a 50 GB sparse file, a
# ``/proc`` file that reads on for ever) is rejected with its size, after reading at most one byte past it.
MAX_FILE_BYTES = 1 << 30

# A ``--classes FILE`` past this (a million names of 64 bytes) is refused instead of read on.
MAX_CLASSES_FILE_BYTES = 64 << 20

# A ``manifest.json`` past this is refused unread: a million shards' entries take about 200 MB; a tampered one
# (a 5 GB sparse file, a link to a ``/proc`` file that reads on for ever) was read whole, a MemoryError traceback.
MAX_MANIFEST_BYTES = 256 << 20

# Examples of each kind of skipped input a report keeps (``dataio convert text``'s ``rejected.json``, and the
# merge of a multi-node conversion's: both keep the first ones).
REPORT_EXAMPLES = 5

# The longest caption packed, in UTF-8 bytes: dense captions of recaptioned data sets are 1-4 KB; a page of
# scraped text pasted into an alt attribute is not a caption (and held in the table it costs every reader).
MAX_CAPTION_BYTES = 16 << 10

# A file dataio wrote into its own folders and reads back whole (a journal record, a rank's rejected list, a
# rank's tokenizer): read through the gate, never past this.
MAX_STATE_FILE_BYTES = 256 << 20
