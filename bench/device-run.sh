#!/usr/bin/env bash
# The one command of a device call for issue 9's measured set, run in the repository root there:
#   run(command="bash bench/device-run.sh", carry=[".whl"], timeout_s=560)
# after `bash bench/device-wheels.sh` here. Installs the carried wheels to /tmp/site (nothing is
# fetched there), runs gpuplan from src/, and leaves the report, the CSV and the log under $OUT.
set -uo pipefail
: "${OUT:?OUT is the device call's output folder}"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  || { echo "the carried wheels did not install (run bench/device-wheels.sh here first)"; exit 3; }
export PYTHONPATH="/tmp/site:$PWD/src" PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv | tee "$OUT/nvidia-smi.csv"
python3 -c "import torch, transformers, peft, bitsandbytes; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'transformers', transformers.__version__, 'peft', peft.__version__, 'bitsandbytes', bitsandbytes.__version__)"
python3 bench/gpu_validation.py --out "$OUT/measured-h200.json" --budget-s "${BUDGET_S:-400}" 2>&1 | tee "$OUT/log.txt"
