"""Conversion across nodes: each rank's share of the input (pure functions) and the merge."""
