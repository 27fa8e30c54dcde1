"""Modules every benchmark group shares: the workloads, timing, the machine's load, processes."""
