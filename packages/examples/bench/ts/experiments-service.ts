/**
 * Which step of the service's `POST /solve-random` holds the event loop: the synchronous part
 * of each call (until it returns, or returns its promise), and the wait, for one request
 * (n = 1024, float64) in a task of its own, as the service runs it. Prints one JSON line per
 * figure (medians over 30 requests after 5 warm-ups, microseconds).
 */
import { gemv, nrm2 } from '@cuda-tasks/cublas';
import { DeviceArray } from '@cuda-tasks/cudadrv';
import { defaultGenerator } from '@cuda-tasks/curand';
import { lu, solve } from '@cuda-tasks/cusolver';
import { synchronize, task } from '@cuda-tasks/task-runtime';
import { nowUs, Steps } from './harness.js';

const steps = new Steps();
const n = Number(process.argv[2] ?? 1024);

for (let i = 0; i < 35; i++) {
  const record = i >= 5;
  const mark = (name: string, us: number) => record && steps.mark(name, us);
  await task(async () => {
    const generator = defaultGenerator();
    generator.setSeed(i);
    let t = nowUs();
    const a = generator.uniform(DeviceArray.empty('float64', [n, n]));
    const b = generator.uniform(DeviceArray.empty('float64', [n, 1]));
    mark('uniform A and b (sync part)', nowUs() - t);
    await synchronize();
    t = nowUs();
    const solving = solve(a, b);
    mark('solve: sync part (getrf + getrs issued)', nowUs() - t);
    const x = await solving;
    mark('solve: until resolved', nowUs() - t);
    t = nowUs();
    const factoring = lu(a);
    mark('lu: sync part (getrf issued)', nowUs() - t);
    const factors = await factoring;
    mark('lu: until resolved', nowUs() - t);
    const r = b.copy();
    t = nowUs();
    gemv(a, x, r, { alpha: -1, beta: 1 });
    const norms = Promise.all([nrm2(r), nrm2(b)]);
    mark('gemv + 2 nrm2: sync part', nowUs() - t);
    await norms;
    mark('gemv + 2 nrm2: until resolved', nowUs() - t);
    for (const array of [a, b, x, r]) array.dispose();
    for (const value of Object.values(factors)) {
      if (value instanceof DeviceArray) value.dispose();
    }
  });
}
steps.report();
