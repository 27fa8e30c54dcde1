"""The GPU kit: every GPU promise measured in one short offline run (see benchmarks/gpu/README.md)."""
