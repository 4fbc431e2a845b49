#!/usr/bin/env bash
# GPU tests, the isolated-call experiment (free and pinned to one core), and the benchmark
# suite with alternating rounds, on the GPU machine (after `. .device/setup`). Files under
# $OUT; summaries last.
set -uo pipefail
out=${OUT:-/tmp/gpu-round}
mkdir -p "$out"
node=(node --conditions=@cuda-tasks/source --import tsx)
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
if [ "${SKIP_TESTS:-0}" != 1 ]; then
  timeout 240 node_modules/.bin/vitest run --project gpu "$@" > "$out/gpu.log" 2>&1
fi
e=packages/examples/bench/ts/experiments-gemm.ts
ROUNDS=2000 timeout 60 "${node[@]}" $e > "$out/free.log" 2>&1
ROUNDS=2000 timeout 60 taskset -c 3 "${node[@]}" $e > "$out/pinned.log" 2>&1
timeout 400 "${node[@]}" packages/examples/bench/run.ts --out /tmp/bench --rounds "${ROUNDS_BENCH:-3}" > "$out/bench.log" 2>&1
cp -r /tmp/bench/bench.json /tmp/bench/bench.svg /tmp/bench/raw "$out/" 2>/dev/null
echo "== GPU tests"; grep -E "✗|×|FAIL|Test Files|Tests  " "$out/gpu.log" 2>/dev/null | head -30
echo "== isolated calls: free | pinned (median p10)"
paste <(cut -c1-78 "$out/free.log") <(sed -E 's/.*"us":([0-9.]+).*"p10":([0-9.]+).*/\1 \2/' "$out/pinned.log")
echo "== benchmarks"; tail -n 42 "$out/bench.log"
