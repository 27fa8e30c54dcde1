#!/usr/bin/env bash
# The trainer comparison on a GPU machine: reference filter_vmap vs train_block at 10, 128 and
# 1024 seeds; prints seed-epochs/s and peak device memory per member. Run unchanged on a GPU host:
#   bash benchmarks/gpu_trainer.sh            (installs seed-sweep with the cuda12 extra first)
set -euo pipefail
cd "$(dirname "$0")/.."
pip install -q -e ".[cuda12]"
python -c "import jax; print('devices:', jax.devices())"
for seeds in 10 128 1024; do
  python benchmarks/trainer_vs_reference.py --seeds "$seeds" --epochs 5 25
done
