#!/usr/bin/env bash
# Exploration pass on the GPU machine (after `. .device/setup`): every GPU test, the hot-path
# experiments, the cuBLAS workspace comparison, and the C and TypeScript core benchmarks side by
# side. Files under $OUT; summaries last.
set -uo pipefail
out=${OUT:-/tmp/gpu-explore}
mkdir -p "$out"
tsx=(node_modules/.bin/tsx --conditions=@cuda-tasks/source)
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
if [ "${SKIP_TESTS:-0}" != 1 ]; then
  timeout 240 node_modules/.bin/vitest run --project gpu "$@" > "$out/gpu.log" 2>&1
fi
{
  timeout 120 "${tsx[@]}" packages/examples/bench/ts/experiments.ts
  timeout 60 "${tsx[@]}" packages/examples/bench/ts/cublas-workspace.ts
} > "$out/exp.log" 2>&1
{
  bin=$(packages/examples/bench/c/build.sh /tmp/cbench)
  timeout 120 "$bin" packages/examples/src/kernels/kernels.ptx
  ldd "$bin" | grep -i cublas
  timeout 120 "${tsx[@]}" packages/examples/bench/ts/core.ts
} > "$out/core.log" 2>&1
echo "== GPU tests"; grep -E "✗|×|FAIL|Test Files|Tests  " "$out/gpu.log" 2>/dev/null | head -30
echo "== experiments"; cat "$out/exp.log" | cut -c1-200
echo "== C and TS core"; grep -o '"name":"[a-z_0-9]*","median_us":[0-9.]*' "$out/core.log"; grep -i "cublas\|error" "$out/core.log" | head -5
