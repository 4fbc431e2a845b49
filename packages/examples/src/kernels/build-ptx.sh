#!/usr/bin/env bash
# Builds kernels.ptx from kernels.cu (PTX for compute_90, JIT-compiled by the
# driver at module load). Run from anywhere; NVCC overrides the compiler path.
set -euo pipefail
cd "$(dirname "$0")"
NVCC="${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}"
"$NVCC" -ptx -arch=compute_90 -o kernels.ptx kernels.cu
echo "$(pwd)/kernels.ptx"
