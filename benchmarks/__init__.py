"""seed-sweep's benchmarks, run as modules from the repository root (see benchmarks/README.md):

    python -m benchmarks.trainer.vs_reference --epochs 10 100 --repeats 2

Importing this package (or a group's) imports nothing else: the APEBench side of
``trainer.vs_apebench`` runs in another environment without seed-sweep.
"""
