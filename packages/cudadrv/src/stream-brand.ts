/**
 * The brand a Stream carries on its prototype (stream/stream.ts sets it): `STREAM_BRAND in
 * value` tells a Stream of any loaded copy of the package (the key is `Symbol.for`, shared by
 * every copy) without importing the class, so the option checks and the current-stream lookup
 * below the stream layer can check one.
 */
export const STREAM_BRAND = Symbol.for('@cuda-tasks/Stream');
