#!/usr/bin/env bash
# The GPU run of issue 53 in one command, for a one-GPU machine with no network (bench/bench_gpu.py:
# EfficientNet-Lite0 and resnet50 at N = 1000 against their forward-only floor, and a small
# audit's images per minute). About 5 minutes; it stops itself at 9 (a 10-minute call).
#
#   bash bench/gpu.sh --fetch-wheels   # here, with network: the wheels that machine lacks, into .whl/
#   bash bench/gpu.sh                  # there (carry .whl): results into $OUT, else bench/results
#   bash bench/gpu.sh --dry            # anywhere: one tiny case on the CPU (the suite's smoke test)
#
# Extra arguments go to bench/bench_gpu.py (e.g. --audit-images 50).
set -euo pipefail
cd "$(dirname "$0")/.."

# What the GPU image lacks of what the engine and the audit import (torch, torchvision, timm,
# numpy, scipy, scikit-image, pillow, jinja2 and tqdm are there): pydantic and its own needs, at
# constraints.txt's versions.
WHEELS="pydantic==2.14.4 pydantic-core==2.50.5 annotated-types==0.8.0 typing-inspection==0.4.5"

if [ "${1:-}" = "--fetch-wheels" ]; then
    # shellcheck disable=SC2086
    python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
        --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
        --platform manylinux2014_x86_64 -d .whl $WHEELS
    exit 0
fi

if compgen -G ".whl/*.whl" >/dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/lc-site .whl/*.whl
    export PYTHONPATH="/tmp/lc-site${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONUNBUFFERED=1
exec timeout 540 python3 bench/bench_gpu.py --out "${OUT:-bench/results}" "$@"
