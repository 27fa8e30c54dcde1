"""Benchmarks of the trainer: ``train_block`` and its compiled chunk (see benchmarks/README.md)."""
