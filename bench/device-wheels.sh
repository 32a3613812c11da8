#!/usr/bin/env bash
# Wheels the lent GPU machine lacks for bench/gpu_validation.py (its image has torch, transformers,
# peft, numpy, scipy, PyYAML, typer, rich, huggingface_hub): gpuplan's pydantic stack and
# bitsandbytes (QLoRA). Run once here, in the repository root; the device call carries .whl.
# Versions: the ones gpuplan is tested with here; Python 3.12, x86-64 as on the device machine.
set -euo pipefail
cd "$(dirname "$0")/.."
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >> .git/info/exclude
rm -rf .whl && mkdir -p .whl
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_24_x86_64 \
  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform any -d .whl \
  pydantic==2.14.4 pydantic-core==2.50.5 annotated-types==0.7.0 typing-inspection==0.4.5 \
  typing-extensions==4.16.0 bitsandbytes==0.50.2
ls -la .whl
du -sh .whl
