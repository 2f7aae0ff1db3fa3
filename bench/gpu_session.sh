#!/usr/bin/env bash
# The GPU checks in one device call, for a session that is lent a GPU (see the README's "GPU runs").
#
#   bench/gpu_session.sh fetch   # here, with network: wheels the GPU image lacks, into .whl/
#   bench/gpu_session.sh run     # on the device (carry .whl): GPU tests, augment bench, a GPU training run
#
# The device image has CUDA torch, numpy, pillow, pyarrow, tokenizers, pytest and matplotlib, but
# no kornia or webdataset, and nothing can be fetched there. DALI's wheel (~790 MB installed) is
# far over the 64 MiB one call can carry: it would have to travel in pieces over several calls to
# a machine kept warm, so this script leaves the DALI GPU rows out. Results go to $OUT (one folder
# down, as the device tool returns them); copy them to bench/results/<date>-<device>/.
set -euo pipefail
cd "$(dirname "$0")/.."
WHEELS=".whl"
PY=${PYTHON:-python3}

fetch() {
    mkdir -p "$WHEELS"  # ignored by .gitignore
    "$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
        -d "$WHEELS" kornia==0.9.0 kornia-rs==0.2.0 webdataset braceexpand
    du -sh "$WHEELS"
}

run() {
    : "${OUT:?run this on the device machine, where OUT is set}"
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$WHEELS"/*.whl
    # dataio installs augment/, formats/ and bench/ as dataio.augment, ...: an editable install where
    # setuptools is there, else the same package tree assembled in /tmp/src (pure Python, no C extensions).
    if "$PY" -m pip install -q --no-index --no-deps --no-build-isolation -e . >/dev/null 2>&1; then
        export PYTHONPATH="/tmp/site" PYTHONUNBUFFERED=1
    else
        rm -rf /tmp/src && mkdir -p /tmp/src && cp -r dataio /tmp/src/dataio
        for folder in augment formats bench; do cp -r "$folder" "/tmp/src/dataio/$folder"; done
        export PYTHONPATH="/tmp/site:/tmp/src" PYTHONUNBUFFERED=1
    fi
    mkdir -p "$OUT/gpu"
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/gpu/device.txt"
    "$PY" -m pytest -q -p no:cacheprovider -m gpu tests 2>&1 | tee "$OUT/gpu/tests.txt" || true
    "$PY" -m dataio bench augment --device cuda --out "$OUT/gpu" 2>&1 | tee "$OUT/gpu/augment.txt" || true
    "$PY" -m dataio synth /tmp/images --classes 10 --per-class 200 && \
        "$PY" -m dataio convert images /tmp/images /tmp/shards --no-progress 2>&1 | tail -1 || true
    "$PY" -m dataio train --train /tmp/shards --model resnet18 --epochs 2 --batch-size 128 --image-size 160 \
        --amp bf16 --randaugment 9 --mixup 0.2 --device cuda --out /tmp/run 2>&1 | tee "$OUT/gpu/train.txt" || true
    cp /tmp/run/log.json "$OUT/gpu/train-log.json" 2>/dev/null || true
}

case "${1:-}" in
    fetch) fetch ;;
    run) run ;;
    *) echo "usage: $0 fetch|run" >&2; exit 2 ;;
esac
