"""Benchmarks of ``sweep.serve`` under HTTP load (see benchmarks/README.md)."""
