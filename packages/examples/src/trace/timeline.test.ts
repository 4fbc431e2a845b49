import type { TraceEvent } from '@cuda-tasks/task-runtime';
import { describe, expect, it } from 'vitest';
import { escapeXml, formatTime, renderTimelineSvg, tickStep } from './timeline.js';

/** What the recorder writes for two tasks, each with an SGEMM and a sin on its own stream. */
function handMadeTrace(): { traceEvents: TraceEvent[] } {
  const gpu = (name: string, ts: number, dur: number, tid: number, task: string): TraceEvent => ({
    name,
    cat: 'gpu',
    ph: 'X',
    ts,
    dur,
    pid: 1,
    tid,
    args: { task, taskId: task === 'job 1' ? 1 : 2 },
  });
  return {
    traceEvents: [
      { name: 'thread_name', ph: 'M', pid: 1, tid: 1, args: { name: 'stream task-stream-1' } },
      gpu('cublas.sgemm', 1010, 55, 1, 'job 1'),
      { name: 'thread_name', ph: 'M', pid: 1, tid: 2, args: { name: 'stream task-stream-2' } },
      gpu('cublas.sgemm', 1020, 60, 2, 'job 2'),
      gpu('sin_inplace', 1066, 8, 1, 'job 1'),
      gpu('sin_inplace', 1081, 8, 2, 'job 2'),
      { name: 'process_name', ph: 'M', pid: 1, tid: 0, args: { name: 'GPU 0' } },
      { name: 'process_name', ph: 'M', pid: 0, tid: 0, args: { name: 'tasks (host)' } },
      { name: 'thread_name', ph: 'M', pid: 0, tid: 2, args: { name: 'job 1' } },
      { name: 'job 1', cat: 'task', ph: 'X', ts: 1000, dur: 90, pid: 0, tid: 2 },
      { name: 'thread_name', ph: 'M', pid: 0, tid: 3, args: { name: 'job 2' } },
      { name: 'job 2', cat: 'task', ph: 'X', ts: 1004, dur: 95, pid: 0, tid: 3 },
    ],
  };
}

/** Checks that every opened tag is closed in order (the SVG is XML). */
function assertBalanced(svg: string): void {
  const body = svg.replace(/<\?xml[^>]*\?>/, '');
  const stack: string[] = [];
  for (const match of body.matchAll(/<(\/?)([a-zA-Z][\w-]*)([^>]*?)(\/?)>/g)) {
    const [, closing, name, , selfClosing] = match;
    if (selfClosing) continue;
    if (closing) expect(stack.pop()).toBe(name);
    else stack.push(name!);
  }
  expect(stack).toEqual([]);
  // No stray angle brackets or ampersands in text.
  expect(body.replace(/<[^>]*>/g, '')).not.toMatch(/[<>]|&(?!(amp|lt|gt|quot|apos);)/);
}

const attribute = (tag: string, name: string) =>
  Number(new RegExp(`\\s${name}="([^"]*)"`).exec(tag)?.[1]);

describe('renderTimelineSvg', () => {
  const svg = renderTimelineSvg(handMadeTrace());

  it('is one balanced SVG document', () => {
    expect(svg.startsWith('<?xml')).toBe(true);
    expect(svg.match(/<svg\b/g)).toHaveLength(1);
    expect(svg.trim().endsWith('</svg>')).toBe(true);
    assertBalanced(svg);
    // The document's own title (its alternative text) repeats the heading, right after <svg>.
    const lines = svg.split('\n');
    expect(lines[1]!.startsWith('<svg ')).toBe(true);
    const heading = /<text x="16" y="26"[^>]*>([^<]*)<\/text>/.exec(svg)![1];
    expect(lines[2]).toBe(`<title>${heading}</title>`);
  });

  it('labels one row per stream and one per task', () => {
    const streamLabels = [...svg.matchAll(/<text class="row-label stream"[^>]*>([^<]*)</g)].map(
      (m) => m[1],
    );
    expect(streamLabels).toEqual(['stream task-stream-1', 'stream task-stream-2']);
    const taskLabels = [...svg.matchAll(/<text class="row-label task"[^>]*>([^<]*)</g)].map(
      (m) => m[1],
    );
    expect(taskLabels).toEqual(['job 1', 'job 2']);
    expect(svg).toContain('>GPU 0<');
    expect(svg).toContain('>tasks (host)<');
  });

  it('draws one bar per GPU operation, in time order, colored by task', () => {
    const bars = [...svg.matchAll(/<rect class="op"[^>]*>/g)].map((m) => m[0]);
    expect(bars).toHaveLength(4);
    const byStart = bars
      .map((tag) => ({
        x: attribute(tag, 'x'),
        width: attribute(tag, 'width'),
        start: attribute(tag, 'data-start-us'),
        fill: /fill="([^"]*)"/.exec(tag)![1],
      }))
      .sort((p, q) => p.start - q.start);
    expect(byStart.map((bar) => bar.start)).toEqual([10, 20, 66, 81]);
    for (let i = 1; i < byStart.length; i++) {
      expect(byStart[i]!.x).toBeGreaterThan(byStart[i - 1]!.x);
    }
    // Same task, same color; the two tasks differ.
    expect(byStart[0]!.fill).toBe(byStart[2]!.fill);
    expect(byStart[1]!.fill).toBe(byStart[3]!.fill);
    expect(byStart[0]!.fill).not.toBe(byStart[1]!.fill);
    // Duration maps to width: the 60 us SGEMM is wider than the 55 us one, both wider than a sin.
    expect(byStart[1]!.width).toBeGreaterThan(byStart[0]!.width);
    expect(byStart[0]!.width).toBeGreaterThan(byStart[2]!.width);
  });

  it('shows each task once in the legend and one host bar per task', () => {
    expect(svg.match(/class="legend-item"/g)).toHaveLength(2);
    expect(svg.match(/<rect class="task-bar"/g)).toHaveLength(2);
  });

  it('labels wide bars with the operation name and leaves narrow ones to the tooltip', () => {
    expect(svg).toMatch(/>cublas\.sgemm<\/text>|>sgemm<\/text>/);
    expect(svg).toContain('<title>sin_inplace (job 1): 8 µs from 66 µs</title>');
  });

  it('escapes names', () => {
    const trace = handMadeTrace();
    trace.traceEvents.push({
      name: 'a<b & "c"',
      ph: 'X',
      ts: 1100,
      dur: 1,
      pid: 1,
      tid: 1,
      args: { task: '<root>' },
    });
    const escaped = renderTimelineSvg(trace);
    assertBalanced(escaped);
    expect(escaped).toContain('a&lt;b &amp; &quot;c&quot;');
  });

  it('renders an empty trace as a valid SVG saying so', () => {
    const empty = renderTimelineSvg({ traceEvents: [] });
    assertBalanced(empty);
    expect(empty).toContain('empty trace');
  });
});

describe('axis helpers', () => {
  it('picks round tick steps', () => {
    expect(tickStep(100)).toBe(20);
    expect(tickStep(1000)).toBe(200);
    expect(tickStep(7)).toBe(1);
    expect(tickStep(35_000)).toBe(5000);
  });

  it('formats µs below 2 ms and ms above', () => {
    expect(formatTime(250, 1000)).toBe('250 µs');
    expect(formatTime(2.5, 10)).toBe('2.5 µs');
    expect(formatTime(2500, 5000)).toBe('2.5 ms');
  });

  it('escapes the five XML characters', () => {
    expect(escapeXml(`<a href="x">&'`)).toBe('&lt;a href=&quot;x&quot;&gt;&amp;&apos;');
  });
});
