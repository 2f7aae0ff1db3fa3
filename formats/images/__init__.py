"""Image sources and their conversion: the folder walk, Hugging Face Parquet, existing tars
(``dataio index``), per-image preparation and validation, class names, synthetic photos."""
