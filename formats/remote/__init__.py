"""Datasets on object storage and HTTP (fsspec): locations, retries, copies, uploads."""
