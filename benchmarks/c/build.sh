#!/usr/bin/env bash
# Builds the C baseline: ./build.sh [OUT_DIR] [TARGET]   (default /tmp/cuda-tasks-bench, all)
#   TARGET bench:   the bench binary and, beside it, libinproc.so (the same loops as a shared
#                   library, for src/paired.ts's same-process comparison); prints the binary's path
#   TARGET scaling: the scaling binary (c/scaling.cu, needs cuRAND too); prints its path
#   TARGET all:     both; a scaling build that fails is reported on stderr and leaves the rest
#                   standing; prints the bench binary's path
# NVCC_FLAGS adds flags (e.g. -I/-L for a cuBLAS installed outside the toolkit). Run the
# binaries with the PTX path:
#   "$(./build.sh)" ../../packages/examples/src/kernels/kernels.ptx
set -euo pipefail
OUT_DIR="${1:-/tmp/cuda-tasks-bench}"
TARGET="${2:-all}"
mkdir -p "$OUT_DIR"
OUT_DIR="$(cd "$OUT_DIR" && pwd)"
cd "$(dirname "$0")"
NVCC="${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}"

build_bench() {
  # shellcheck disable=SC2086  # NVCC_FLAGS is a list of words
  "$NVCC" -O2 -arch=sm_90 ${NVCC_FLAGS:-} -o "$OUT_DIR/bench" bench.cu -lcuda -lcublas >&2
  # shellcheck disable=SC2086
  "$NVCC" -O2 -arch=sm_90 ${NVCC_FLAGS:-} -shared -Xcompiler -fPIC -o "$OUT_DIR/libinproc.so" \
    inproc.cu -lcuda -lcublas >&2
}

build_scaling() {
  # shellcheck disable=SC2086
  "$NVCC" -O2 -arch=sm_90 ${NVCC_FLAGS:-} -o "$OUT_DIR/scaling" scaling.cu \
    -lcuda -lcublas -lcurand -lpthread >&2
}

case "$TARGET" in
  bench)
    build_bench
    echo "$OUT_DIR/bench"
    ;;
  scaling)
    build_scaling
    echo "$OUT_DIR/scaling"
    ;;
  all)
    build_bench
    rm -f "$OUT_DIR/scaling"
    build_scaling || echo "build.sh: the scaling binary (scaling.cu) was not built" >&2
    echo "$OUT_DIR/bench"
    ;;
  *)
    echo "build.sh: TARGET must be bench, scaling or all, got $TARGET" >&2
    exit 2
    ;;
esac
