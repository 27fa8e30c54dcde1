"""Benchmarks of ``sweep.run`` on Ray Tune: overheads, trials, concurrency (see benchmarks/README.md)."""
