"""The files of a converted dataset: manifest, sample table, shard members and writers (WebDataset
tar, Arrow images, token shards), the conversion journal, the output lock, and verify."""
