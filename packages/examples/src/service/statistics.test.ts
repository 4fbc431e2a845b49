import { describe, expect, it } from 'vitest';
import { formatNumber, formatTable, percentile, summarize, throughput } from './statistics.js';

describe('percentile', () => {
  const hundred = Array.from({ length: 100 }, (_, i) => i + 1);

  it('interpolates linearly between the closest ranks', () => {
    expect(percentile([1, 2, 3, 4], 50)).toBe(2.5);
    expect(percentile(hundred, 50)).toBeCloseTo(50.5, 12);
    expect(percentile(hundred, 99)).toBeCloseTo(99.01, 12);
    expect(percentile([10, 20], 25)).toBeCloseTo(12.5, 12);
  });

  it('gives the extremes at 0 and 100, and the value itself for one value', () => {
    expect(percentile(hundred, 0)).toBe(1);
    expect(percentile(hundred, 100)).toBe(100);
    expect(percentile([7], 99)).toBe(7);
  });

  it('is NaN for no values and refuses p outside [0, 100]', () => {
    expect(percentile([], 50)).toBeNaN();
    expect(() => percentile([1], 101)).toThrow(RangeError);
    expect(() => percentile([1], Number.NaN)).toThrow(RangeError);
  });
});

describe('summarize', () => {
  it('sorts a copy and reports count, mean, min, p50, p99, max', () => {
    const values = [5, 1, 4, 2, 3];
    expect(summarize(values)).toEqual({ count: 5, mean: 3, min: 1, p50: 3, p99: 4.96, max: 5 });
    expect(values).toEqual([5, 1, 4, 2, 3]);
  });

  it('sorts numerically, not as strings', () => {
    expect(summarize([10, 9, 100]).p50).toBe(10);
  });

  it('is all NaN with count 0 for no values', () => {
    const summary = summarize([]);
    expect(summary.count).toBe(0);
    expect(summary.mean).toBeNaN();
    expect(summary.p99).toBeNaN();
  });
});

describe('throughput and formatting', () => {
  it('divides by the duration, 0 for none', () => {
    expect(throughput(2000, 4)).toBe(500);
    expect(throughput(10, 0)).toBe(0);
  });

  it('formats numbers, with "-" for NaN', () => {
    expect(formatNumber(1.23456, 2)).toBe('1.23');
    expect(formatNumber(1.25)).toBe('1.3');
    expect(formatNumber(Number.NaN)).toBe('-');
  });

  it('aligns a table: the first column left, the others right', () => {
    expect(
      formatTable(
        ['mode', 'req/s'],
        [
          ['task', '812.0'],
          ['shared stream', '95.5'],
        ],
      ),
    ).toBe(
      [
        'mode           req/s',
        '-------------  -----',
        'task           812.0',
        'shared stream   95.5',
      ].join('\n'),
    );
  });
});
