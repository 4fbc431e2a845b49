import { describe, expect, it, vi } from 'vitest';

// SearchIndex.open without a GPU: the options it opens the shared embeddings with.
const seen = vi.hoisted(() => [] as unknown[]);
vi.mock('@cuda-tasks/cudadrv', async (importOriginal) => ({
  ...(await importOriginal<typeof import('@cuda-tasks/cudadrv')>()),
  openSharedMemory: (_handle: unknown, options: unknown) => {
    seen.push(options);
    throw new Error('stop: no GPU here');
  },
}));

import { SearchIndex } from './search.js';

describe('SearchIndex.open', () => {
  it('opens the embeddings read-only whatever options a JavaScript caller passes', () => {
    const options = { access: 'readwrite', onExporterExit: () => {} };
    expect(() => SearchIndex.open('{}', options as never)).toThrow(/stop/);
    expect(seen).toEqual([{ access: 'read', onExporterExit: options.onExporterExit }]);
  });
});
