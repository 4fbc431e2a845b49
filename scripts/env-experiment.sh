#!/usr/bin/env bash
# Does CUDA_DEVICE_MAX_CONNECTIONS change launch and round-trip latency? C and ours, 8 vs 32.
set -uo pipefail
out=${OUT:-/tmp/env-exp}; mkdir -p "$out"
bash packages/examples/bench/c/build.sh /tmp/cbench >/dev/null
for n in 8 32; do
  CUDA_DEVICE_MAX_CONNECTIONS=$n /tmp/cbench/bench packages/examples/src/kernels/kernels.ptx > "$out/c$n.jsonl" 2>/dev/null
  CUDA_DEVICE_MAX_CONNECTIONS=$n node_modules/.bin/tsx --conditions=@cuda-tasks/source packages/examples/bench/ts/core.ts > "$out/ts$n.jsonl" 2>&1
  CUDA_DEVICE_MAX_CONNECTIONS=$n node_modules/.bin/tsx --conditions=@cuda-tasks/source packages/examples/bench/ts/breakdown.ts > "$out/bd$n.jsonl" 2>&1
  CUDA_DEVICE_MAX_CONNECTIONS=$n node_modules/.bin/tsx packages/examples/bench/ts/ffi-variants.ts >> "$out/bd$n.jsonl" 2>&1
  echo "== CUDA_DEVICE_MAX_CONNECTIONS=$n"; cat "$out/bd$n.jsonl"
  node scripts/compare.mjs "$out/ts$n.jsonl" "$out/c$n.jsonl" launch_sync_blocking=launch_sync withstream_launch=launch_switch
done
