"""Pack: converters, dataset files and storage (``dataio.formats``), the lowest layer of dataio.

- ``jpeg/``: the JPEG codec in C (damage checks, lossless restart markers, region decode, splicing).
- ``dataset/``: the files of a converted dataset (manifest, sample table, shard writers, journal, lock, verify).
- ``images/``: image sources (folder walk, Hugging Face Parquet, existing tars) and their conversion.
- ``text/``: text sources, the tokenizer set-up and their conversion to token shards.
- ``remote/``: datasets on object storage and HTTP (fsspec).
- ``ranks/``: conversion across nodes (each rank's share, the merge).
- here: what every stage uses (errors, limits, sizes, atomic files, progress, the worker pool, fallback notes).
"""
