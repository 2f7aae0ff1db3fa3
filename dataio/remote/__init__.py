"""Reading shards from object storage and HTTP: byte ranges with retries, their local cache, readahead, whole copies."""
