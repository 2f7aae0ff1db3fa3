"""Conversion plans: a conversion or an index as deterministic items plus one merge, run by any engine."""
