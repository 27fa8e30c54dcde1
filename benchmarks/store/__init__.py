"""Benchmarks of the store: aggregation, queries, checkpoint traffic (see benchmarks/README.md)."""
