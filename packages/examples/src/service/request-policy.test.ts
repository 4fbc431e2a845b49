import { EventEmitter } from 'node:events';
import {
  request as httpRequest,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  DEFAULT_DEADLINES_MS,
  requestPriority,
  requestSignal,
  SMALL_REQUEST_MAX_N,
} from './request-policy.js';
import { createServer } from './server.js';
import { RequestError } from './validation.js';

describe('requestPriority', () => {
  it('small solves and products, and every search, at high priority; the rest normal', () => {
    const small = SMALL_REQUEST_MAX_N;
    expect(requestPriority('/solve-random', { n: small, seed: 1 })).toBe('high');
    expect(requestPriority('/solve-random', { n: small + 1, seed: 1 })).toBe('normal');
    expect(requestPriority('/solve', { n: 2, a: [], b: [] })).toBe('high');
    expect(requestPriority('/solve', { n: 4096, a: [], b: [] })).toBe('normal');
    expect(requestPriority('/matmul', { m: 8, k: small, n: 8 })).toBe('high');
    expect(requestPriority('/matmul', { m: 8, k: small + 1, n: 8 })).toBe('normal');
    expect(requestPriority('/search', { query: [] })).toBe('high');
    expect(requestPriority('/elsewhere', {})).toBe('normal');
  });
});

/** A response stand-in: 'close' is what requestSignal listens for. */
function exchange() {
  const request = Object.assign(new EventEmitter(), { destroyed: false });
  const response = Object.assign(new EventEmitter(), { writableFinished: false, destroyed: false });
  return {
    request: request as unknown as IncomingMessage,
    response: response as unknown as ServerResponse & EventEmitter,
    finish() {
      response.writableFinished = true;
      response.emit('close');
    },
    disconnect() {
      response.emit('close');
    },
  };
}

describe('requestSignal', () => {
  it('aborts with a 499 RequestError when the client closes the connection before the answer', () => {
    const { request, response, disconnect } = exchange();
    const cancellation = requestSignal(request, response, 10_000, 'POST /solve');
    expect(cancellation.signal.aborted).toBe(false);
    disconnect();
    expect(cancellation.signal.aborted).toBe(true);
    const reason = cancellation.signal.reason as RequestError;
    expect(reason).toBeInstanceOf(RequestError);
    expect(reason.status).toBe(499);
    expect(reason.message).toBe('POST /solve: the client closed the connection before the answer');
    cancellation.done();
  });

  it('does not abort when the connection closes after the answer was sent', () => {
    const { request, response, finish } = exchange();
    const cancellation = requestSignal(request, response, 10_000, 'POST /solve');
    finish();
    expect(cancellation.signal.aborted).toBe(false);
    cancellation.done();
  });

  it('aborts with a 503 RequestError once the deadline has passed', async () => {
    const { request, response } = exchange();
    const cancellation = requestSignal(request, response, 15, 'POST /search');
    await sleep(5);
    expect(cancellation.signal.aborted).toBe(false);
    await sleep(30);
    const reason = cancellation.signal.reason as RequestError;
    expect(reason.status).toBe(503);
    expect(reason.message).toBe('POST /search ran past its deadline of 15 ms and was cancelled');
    cancellation.done();
  });

  it('done() clears the deadline and the listener: nothing aborts afterwards', async () => {
    const { request, response, disconnect } = exchange();
    const cancellation = requestSignal(request, response, 15, 'POST /solve');
    cancellation.done();
    expect(response.listenerCount('close')).toBe(0);
    disconnect();
    await sleep(30);
    expect(cancellation.signal.aborted).toBe(false);
  });

  it('without a finite deadline there is no timer; a connection already gone aborts at once', () => {
    const { request, response } = exchange();
    (response as unknown as { destroyed: boolean }).destroyed = true;
    const cancellation = requestSignal(request, response, Number.POSITIVE_INFINITY, 'POST /solve');
    expect((cancellation.signal.reason as RequestError).status).toBe(499);
    cancellation.done();
  });

  it('every GPU route has a default deadline', () => {
    for (const route of ['/solve', '/solve-random', '/matmul', '/search']) {
      expect(DEFAULT_DEADLINES_MS[route]).toBeGreaterThan(0);
    }
  });
});

describe('the server cancels a request past its deadline before its task runs any GPU work', () => {
  let server: Server;
  let port: number;
  const cancelled: { path: string; reason: RequestError }[] = [];
  const serverErrors: unknown[] = [];

  beforeAll(async () => {
    server = createServer({
      deadlinesMs: { '/solve': 20 },
      onCancelled: (path, reason) => cancelled.push({ path, reason }),
      onServerError: (error) => serverErrors.push(error),
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
  });

  afterAll(async () => {
    await new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    });
  });

  it('a body that arrives after the deadline: 503 naming the deadline; no GPU call, no server error', async () => {
    const body = JSON.stringify({ n: 2, a: [4, 1, 2, 3], b: [1, 2] });
    const answer = await new Promise<{ status: number; text: string }>((resolve, reject) => {
      const client = httpRequest(
        {
          port,
          host: '127.0.0.1',
          path: '/solve',
          method: 'POST',
          headers: { 'content-type': 'application/json', 'content-length': body.length },
        },
        (response) => {
          let text = '';
          response.on('data', (chunk) => {
            text += chunk;
          });
          response.on('end', () => resolve({ status: response.statusCode ?? 0, text }));
        },
      );
      client.on('error', reject);
      client.flushHeaders();
      // The body comes after the route's 20 ms: the task starts with its signal aborted.
      setTimeout(() => client.end(body), 60);
    });
    expect(answer.status).toBe(503);
    // Not the driver's message (where there is no GPU, a GPU call would have answered that).
    expect(JSON.parse(answer.text).error).toBe(
      'POST /solve ran past its deadline of 20 ms and was cancelled',
    );
    expect(cancelled).toEqual([{ path: '/solve', reason: expect.any(RequestError) }]);
    expect(serverErrors).toEqual([]);
  });

  it('refuses a bound on GPU work in flight that is not a positive integer', () => {
    expect(() => createServer({ gpuInFlight: { '/search': 0 } })).toThrow(
      /gpuInFlight\['\/search'\] must be a positive integer/,
    );
    expect(() =>
      createServer({ gpuInFlight: { '/search': Number.POSITIVE_INFINITY } }),
    ).not.toThrow();
  });

  it('refuses a deadline that is not a positive number', () => {
    expect(() => createServer({ deadlinesMs: { '/solve': 0 } })).toThrow(
      /deadlinesMs\['\/solve'\] must be a positive number of milliseconds/,
    );
  });
});
