// Prints a side-by-side table of two JSON-lines benchmark files: ours vs C.
// Usage: node scripts/compare.mjs ours.jsonl c.jsonl [name=cName ...]
import { readFileSync } from 'node:fs';

const read = (p) =>
  Object.fromEntries(
    readFileSync(p, 'utf8')
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l))
      .map((r) => [r.name, r]),
  );
const [ours, c] = [read(process.argv[2]), read(process.argv[3])];
const pairs = Object.fromEntries(process.argv.slice(4).map((a) => a.split('=')));
console.log(
  'operation'.padEnd(26),
  'ours us'.padStart(10),
  'C us'.padStart(10),
  'ours/C'.padStart(8),
);
for (const [name, r] of Object.entries(ours)) {
  const ref = c[pairs[name] ?? name];
  const ratio = ref ? (r.median_us / ref.median_us).toFixed(3) : '-';
  console.log(
    name.padEnd(26),
    r.median_us.toFixed(3).padStart(10),
    (ref ? ref.median_us.toFixed(3) : '-').padStart(10),
    ratio.padStart(8),
    ref && pairs[name] ? `(C ${pairs[name]})` : '',
    r.extra ? JSON.stringify(r.extra) : '',
  );
}
