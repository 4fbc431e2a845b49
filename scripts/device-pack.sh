#!/usr/bin/env bash
# A copy of ../shared/device/pack that also leaves out the formatter, the TypeScript compiler
# and other tools a GPU run does not use, to stay under the 64 MiB the device tool carries.
# Packs what a GPU run needs into .device/ at the project root, to travel with the sources:
#   .device/node.xz     this machine's Node.js binary (the GPU machine has no Node.js)
#   .device/tree.tar.xz node_modules (all workspace levels) and every packages/*/dist build output
#   .device/setup       sourced first on the GPU machine: unpacks both and puts node on PATH
# Usage, from the project root, after `pnpm install` and `pnpm build`:
#   ../shared/device/pack
# then, on the GPU machine, from the project root:
#   . .device/setup && node_modules/.bin/vitest run
set -euo pipefail
root=$(git rev-parse --show-toplevel)
cd "$root"
grep -qx '/.device/' .git/info/exclude 2>/dev/null || echo '/.device/' >> .git/info/exclude
mkdir -p .device
node_bin=$(command -v node)
stamp="$(node --version) $(stat -c %s "$node_bin")"
if [[ ! -f .device/node.xz || "$(cat .device/node.stamp 2>/dev/null)" != "$stamp" ]]; then
  echo "pack: compressing $node_bin ($(node --version)) once..." >&2
  xz -T2 -6 -c "$node_bin" > .device/node.xz
  echo "$stamp" > .device/node.stamp
fi
# Everything installed or built, less the large native tools that a test run does not need.
mapfile -t paths < <(find . -path ./.git -prune -o -path ./.device -prune -o \
  \( -name node_modules -o -path './packages/*/dist' -o -path './packages/*/build' \) -prune -print | sed 's#^\./##' | sort)
((${#paths[@]})) || { echo "pack: nothing installed; run pnpm install first" >&2; exit 1; }
tar -cf - \
  --exclude='node_modules/.pnpm/@turbo+*' --exclude='node_modules/.pnpm/turbo@*' \
  --exclude='node_modules/.pnpm/@typescript+native-preview*' --exclude='node_modules/.pnpm/@typescript+typescript-linux*' \
  --exclude='node_modules/.pnpm/@changesets+*' --exclude='node_modules/.cache' --exclude='node_modules/.pnpm/@biomejs+*' --exclude='node_modules/.pnpm/typescript@*' --exclude='node_modules/.pnpm/prettier@*' --exclude='node_modules/.pnpm/lightningcss*' --exclude='node_modules/.pnpm/@rolldown+*' \
  "${paths[@]}" | xz -T2 -1 > .device/tree.tar.xz
cat > .device/setup <<'SETUP'
# Sourced first on the GPU machine, from the project root: unpacks the carried Node.js
# binary and installed tree, and puts node on PATH for the rest of the command.
mkdir -p /tmp/devnode/bin
[[ -x /tmp/devnode/bin/node ]] || { xz -dc .device/node.xz > /tmp/devnode/bin/node && chmod +x /tmp/devnode/bin/node; }
tar -xJf .device/tree.tar.xz
export PATH=/tmp/devnode/bin:$PATH
echo "device setup: node $(node --version); $(nvidia-smi -L 2>/dev/null | head -1)"
SETUP
chmod +x .device/setup
total=$(du -cb .device/node.xz .device/tree.tar.xz .device/setup | tail -1 | cut -f1)
echo "pack: .device is $((total / 1048576)) MiB" >&2
echo "pack: on the GPU machine, from the project root, start the command with:" >&2
echo "  . .device/setup && node_modules/.bin/vitest run" >&2
