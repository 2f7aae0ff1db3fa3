"""Text sources and their conversion: documents from .txt/.jsonl/.parquet, the tokenizer set-up,
pre-tokenised Arrow shards, synthetic corpora."""
