"""Benchmarks of a stored ensemble's inference and scores (see benchmarks/README.md)."""
