#!/usr/bin/env bash
# Builds the C baseline: ./build.sh [OUT_DIR]   (default /tmp/cuda-tasks-bench)
# Builds the bench binary and, beside it, libinproc.so (the same loops as a shared library,
# for src/paired.ts's same-process comparison). Prints the path of the binary.
# NVCC_FLAGS adds flags (e.g. -I/-L for a cuBLAS installed outside the toolkit). Run the
# binary with the PTX path:
#   "$(./build.sh)" ../../packages/examples/src/kernels/kernels.ptx
set -euo pipefail
OUT_DIR="${1:-/tmp/cuda-tasks-bench}"
mkdir -p "$OUT_DIR"
OUT_DIR="$(cd "$OUT_DIR" && pwd)"
cd "$(dirname "$0")"
NVCC="${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}"
# shellcheck disable=SC2086  # NVCC_FLAGS is a list of words
"$NVCC" -O2 -arch=sm_90 ${NVCC_FLAGS:-} -o "$OUT_DIR/bench" bench.cu -lcuda -lcublas >&2
# shellcheck disable=SC2086
"$NVCC" -O2 -arch=sm_90 ${NVCC_FLAGS:-} -shared -Xcompiler -fPIC -o "$OUT_DIR/libinproc.so" \
  inproc.cu -lcuda -lcublas >&2
echo "$OUT_DIR/bench"
