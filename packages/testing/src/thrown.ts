/** The error `fn` throws; fails the test when it throws nothing. */
export function thrown(fn: () => unknown): Error {
  try {
    fn();
  } catch (error) {
    return error as Error;
  }
  throw new Error('expected a throw');
}

/** What `fn` threw, or what its promise rejected with; undefined when it did neither. */
export async function failureOf(fn: () => unknown): Promise<unknown> {
  try {
    await fn();
  } catch (error) {
    return error;
  }
  return undefined;
}
