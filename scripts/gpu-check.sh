#!/usr/bin/env bash
# Runs on the GPU machine (after `. .device/setup`): the GPU test suite, the C baseline and
# our benchmarks side by side. Usage: scripts/gpu-check.sh [vitest filters...]
# Writes logs under $OUT (or /tmp/gpu-check) and prints a short summary last.
set -uo pipefail
out=${OUT:-/tmp/gpu-check}
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
node_modules/.bin/vitest run --project gpu "$@" 2>&1 | tee "$out/gpu.log" | grep -E "✓|✗|×|FAIL|Error|passed|failed|skipped|expected|received|❯ .*test.ts:" | head -150
if [ "${SKIP_BENCH:-0}" != 1 ]; then
  bash packages/examples/bench/c/build.sh /tmp/cbench >/dev/null && /tmp/cbench/bench packages/examples/src/kernels/kernels.ptx > "$out/c.jsonl" 2> "$out/c.err"
  node_modules/.bin/tsx --conditions=@cuda-tasks/source packages/examples/bench/ts/breakdown.ts 2>&1 | tee "$out/breakdown.jsonl"
  node_modules/.bin/tsx --conditions=@cuda-tasks/source packages/examples/bench/ts/core.ts > "$out/ts.jsonl" 2> "$out/ts.err"
  echo "== benchmark (median us; ours vs C in the same command)"
  node scripts/compare.mjs "$out/ts.jsonl" "$out/c.jsonl" launch_sync=launch_sync launch_sync_blocking=launch_sync withstream_launch=launch_switch launch_args2=launch_args2
  tail -n 3 "$out/c.err" "$out/ts.err"
fi
echo "== summary"
grep -E "Test Files|Tests  " "$out/gpu.log"
