/**
 * The scores of a few queries against every embedding in one pass over the index: this
 * example's own kernel, loaded through the task runtime's compile cache.
 *
 * A search batch's scores are a tall, thin matrix product (rows x dim times dim x B, B small).
 * Reading the index is the whole cost, whatever B, and cuBLAS's SGEMM does not read it equally
 * fast at every small B (decision 0045 has the figures). This kernel reads each embedding once
 * for up to 16 queries: each thread keeps the scores of 4 rows for every query in registers,
 * the queries sit in shared memory, and each step reads one dimension of 4 rows per thread.
 * Where the rows are a multiple of 4 and the arrays 16-byte aligned (any index the service
 * makes), those 4 rows are consecutive and read as one float4, 512 bytes a warp; otherwise they
 * are a block apart, read one float each, 128 bytes a warp.
 */
import {
  assertApart,
  assertArray,
  assertDType,
  assertSameContext,
  type Context,
  CudaArgumentError,
  type DeviceArray,
  type Kernel,
  type KernelArgument,
  type KernelParameter,
  launchOn,
  type Module,
  matrixFootprint,
  newFootprint,
  resolveStream,
} from '@cuda-tasks/cudadrv';
import { loadCachedModule } from '@cuda-tasks/task-runtime';

/** The most queries one launch scores. */
export const MAX_SCORED_QUERIES = 16;
/** The largest dimension the kernel takes (its queries sit in shared memory). */
export const MAX_SCORED_DIM = 256;

const BLOCK = 256;
const ROWS_PER_THREAD = 4;
/** Enough blocks to cover 67 M rows in one step; the kernel loops over the rest. */
const MAX_GRID = 65_535;

const GROUPS = [1, 2, 3, 4] as const;

/** The kernels of `groups` groups of 4 queries: entry points of the two templates. */
function entry(groups: number): string {
  return `
extern "C" __global__ __launch_bounds__(SCORES_BLOCK) void search_scores_${groups}(
    const float* __restrict__ e, const float* __restrict__ queries, float* __restrict__ scores,
    unsigned long long rows, int dim, int batch) {
  search_scores<${groups}>(e, queries, scores, rows, dim, batch);
}
extern "C" __global__ __launch_bounds__(SCORES_BLOCK) void search_scores4_${groups}(
    const float4* __restrict__ e, const float* __restrict__ queries, float4* __restrict__ scores,
    unsigned long long rows4, int dim, int batch) {
  search_scores4<${groups}>(e, queries, scores, rows4, dim, batch);
}
`;
}

const SOURCE = `
#define SCORES_BLOCK ${BLOCK}
#define SCORES_ROWS ${ROWS_PER_THREAD}
#define SCORES_MAX_DIM ${MAX_SCORED_DIM}

// The queries into shared memory, dimension-major (q[j * WIDTH + b]), zero past the batch.
template <int WIDTH>
__device__ void load_queries(float* q, const float* __restrict__ queries, int dim, int batch) {
  for (int t = threadIdx.x; t < dim * WIDTH; t += SCORES_BLOCK) {
    int j = t / WIDTH;
    int b = t - j * WIDTH;
    q[t] = b < batch ? queries[j + (unsigned long long)b * dim] : 0.0f;
  }
  __syncthreads();
}

// Adds one dimension's products to a thread's scores: its SCORES_ROWS rows' values v times
// each query's value of that dimension (qj, WIDTH of them).
template <int WIDTH>
__device__ __forceinline__ void accumulate(float (&acc)[SCORES_ROWS][WIDTH],
                                           const float (&v)[SCORES_ROWS], const float* qj) {
#pragma unroll
  for (int b = 0; b < WIDTH; b++) {
    float w = qj[b];
#pragma unroll
    for (int r = 0; r < SCORES_ROWS; r++) acc[r][b] = fmaf(v[r], w, acc[r][b]);
  }
}

// scores[i + b * rows] = sum over j of e[i + j * rows] * queries[j + b * dim], b < batch <= 4 * GROUPS.
template <int GROUPS>
__device__ void search_scores(const float* __restrict__ e, const float* __restrict__ queries,
                              float* __restrict__ scores, unsigned long long rows, int dim,
                              int batch) {
  constexpr int WIDTH = 4 * GROUPS;
  __shared__ float q[SCORES_MAX_DIM * WIDTH];
  load_queries<WIDTH>(q, queries, dim, batch);
  const unsigned long long step = (unsigned long long)gridDim.x * SCORES_BLOCK * SCORES_ROWS;
  for (unsigned long long base = (unsigned long long)blockIdx.x * SCORES_BLOCK * SCORES_ROWS +
                                 threadIdx.x;
       base < rows; base += step) {
    float acc[SCORES_ROWS][WIDTH] = {};
    const float* column = e;
#pragma unroll 4
    for (int j = 0; j < dim; j++) {
      float v[SCORES_ROWS];
#pragma unroll
      for (int r = 0; r < SCORES_ROWS; r++) {
        unsigned long long i = base + (unsigned long long)r * SCORES_BLOCK;
        v[r] = i < rows ? column[i] : 0.0f;
      }
      column += rows;
      accumulate<WIDTH>(acc, v, q + j * WIDTH);
    }
#pragma unroll
    for (int r = 0; r < SCORES_ROWS; r++) {
      unsigned long long i = base + (unsigned long long)r * SCORES_BLOCK;
      if (i < rows) {
#pragma unroll
        for (int b = 0; b < WIDTH; b++) {
          if (b < batch) scores[i + (unsigned long long)b * rows] = acc[r][b];
        }
      }
    }
  }
}

// The same sums where rows is a multiple of 4 and e and scores are 16-byte aligned: each thread
// reads 4 consecutive rows of a dimension as one float4 (512 bytes a warp, marked streaming:
// the index is read once a batch) and writes its 4 scores of a query as one float4.
template <int GROUPS>
__device__ void search_scores4(const float4* __restrict__ e, const float* __restrict__ queries,
                               float4* __restrict__ scores, unsigned long long rows4, int dim,
                               int batch) {
  constexpr int WIDTH = 4 * GROUPS;
  __shared__ float q[SCORES_MAX_DIM * WIDTH];
  load_queries<WIDTH>(q, queries, dim, batch);
  const unsigned long long step = (unsigned long long)gridDim.x * SCORES_BLOCK;
  for (unsigned long long base = (unsigned long long)blockIdx.x * SCORES_BLOCK + threadIdx.x;
       base < rows4; base += step) {
    float acc[SCORES_ROWS][WIDTH] = {};
    const float4* column = e + base;
#pragma unroll 16
    for (int j = 0; j < dim; j++) {
      const float4 v4 = __ldcs(column);
      column += rows4;
      const float v[SCORES_ROWS] = {v4.x, v4.y, v4.z, v4.w};
      accumulate<WIDTH>(acc, v, q + j * WIDTH);
    }
#pragma unroll
    for (int b = 0; b < WIDTH; b++) {
      if (b < batch) {
        scores[base + (unsigned long long)b * rows4] =
            make_float4(acc[0][b], acc[1][b], acc[2][b], acc[3][b]);
      }
    }
  }
}

${GROUPS.map(entry).join('')}`;

/** The kernel source, for reading (and for the tests). */
export const searchScoresSource: string = SOURCE;

// The kernels of each context's module (the compile cache keeps the module loaded): per group
// of 4 queries, the scalar kernel and the float4 one.
const compiled = new Map<Context, { module: Module; scalar: Kernel[]; vector: Kernel[] }>();

const PARAMETERS: readonly KernelParameter[] = [
  'const float32*',
  'const float32*',
  'float32*',
  'uint64',
  'int32',
  'int32',
];

/** The kernels for `context`, loaded on first use. */
function scoresKernels(context: Context): { scalar: Kernel[]; vector: Kernel[] } {
  let loaded = compiled.get(context);
  if (loaded === undefined || loaded.module.disposed) {
    const module = loadCachedModule(SOURCE, context, 'search_scores.cu');
    loaded = {
      module,
      scalar: GROUPS.map((groups) => module.kernel(`search_scores_${groups}`, PARAMETERS)),
      vector: GROUPS.map((groups) => module.kernel(`search_scores4_${groups}`, PARAMETERS)),
    };
    compiled.set(context, loaded);
  }
  return loaded;
}

/** Whether the first element of `array` (float32) sits on a 16-byte boundary. */
function aligned16(array: DeviceArray): boolean {
  const base = array.buffer.address;
  return typeof base === 'number'
    ? (base + array.offset * 4) % 16 === 0
    : (base + BigInt(array.offset * 4)) % 16n === 0n;
}

/** Throws unless `value` is a usable, contiguous, 2-D float32 DeviceArray. */
function checkMatrix(call: string, name: string, value: unknown): void {
  assertArray(call, name, value);
  assertDType(call, name, value, ['float32']);
  if (value.shape.length !== 2 || !value.contiguous) {
    throw new CudaArgumentError(
      `${call}: ${name} must be a contiguous 2-D (column-major) array, got ${value}`,
    );
  }
}

// Reused by every call: the launch's arguments and the overlap check allocate nothing.
const args: KernelArgument[] = [0, 0, 0, 0, 0, 0];
const written = newFootprint();
const read = newFootprint();

/** Throws a CudaArgumentError where `scores` shares a byte with `input` (both contiguous). */
function checkApart(call: string, scores: DeviceArray, name: string, input: DeviceArray): void {
  assertApart(
    call,
    'scores',
    matrixFootprint(written, scores.buffer, scores.offset, 4, scores.length, 1, scores.length),
    name,
    matrixFootprint(read, input.buffer, input.offset, 4, input.length, 1, input.length),
  );
}

/**
 * How `searchScores` reads `embeddings` into `scores`: 'float4' (4 consecutive rows a load)
 * where the rows are a multiple of 4 and both arrays start on a 16-byte boundary, else 'float'.
 * @example scoresLoads(index.embeddings, scores); // 'float4' for a 1,000,000-row index
 */
export function scoresLoads(
  embeddings: DeviceArray<'float32'>,
  scores: DeviceArray<'float32'>,
): 'float4' | 'float' {
  return embeddings.shape[0]! % 4 === 0 && aligned16(embeddings) && aligned16(scores)
    ? 'float4'
    : 'float';
}

/**
 * `scores` = `embeddings` x `queries` on the current stream: `embeddings` rows x dim, `queries`
 * dim x B, `scores` rows x B, all float32, column-major and contiguous, B in 1..16 and dim in
 * 1..256. A CudaArgumentError, before any GPU call, for any other shape or dtype, arrays of
 * another context, or `scores` overlapping an input. Each score is a float32 sum of the dim
 * products in order (as an SGEMM's inner loop sums them).
 * @example searchScores(index.embeddings, queries, scores); // queries: DeviceArray [128, 8]
 */
export function searchScores(
  embeddings: DeviceArray<'float32'>,
  queries: DeviceArray<'float32'>,
  scores: DeviceArray<'float32'>,
): void {
  const call = 'searchScores';
  checkMatrix(call, 'embeddings', embeddings);
  checkMatrix(call, 'queries', queries);
  checkMatrix(call, 'scores', scores);
  const [rows, dim] = embeddings.shape as [number, number];
  const batch = queries.shape[1]!;
  if (queries.shape[0] !== dim) {
    throw new CudaArgumentError(
      `${call}: queries must have ${dim} rows (the embeddings' dimension), got ${queries}`,
    );
  }
  if (batch < 1 || batch > MAX_SCORED_QUERIES) {
    throw new CudaArgumentError(
      `${call}: queries must have 1..${MAX_SCORED_QUERIES} columns, got ${batch}`,
    );
  }
  if (dim < 1 || dim > MAX_SCORED_DIM) {
    throw new CudaArgumentError(
      `${call}: the embeddings' dimension must be in 1..${MAX_SCORED_DIM}, got ${dim}`,
    );
  }
  if (scores.shape[0] !== rows || scores.shape[1] !== batch) {
    throw new CudaArgumentError(`${call}: scores must be [${rows}, ${batch}], got ${scores}`);
  }
  const stream = resolveStream(undefined);
  assertSameContext(call, 'embeddings', embeddings, stream);
  assertSameContext(call, 'queries', queries, stream);
  assertSameContext(call, 'scores', scores, stream);
  checkApart(call, scores, 'embeddings', embeddings);
  checkApart(call, scores, 'queries', queries);
  if (rows === 0) return;
  const kernels = scoresKernels(stream.context);
  const group = Math.ceil(batch / 4) - 1;
  // Whole float4s of every column: the vector kernel (4 rows a float4), else the scalar one.
  const vector = scoresLoads(embeddings, scores) === 'float4';
  const length = vector ? rows / ROWS_PER_THREAD : rows;
  const grid = Math.min(Math.ceil(rows / (BLOCK * ROWS_PER_THREAD)), MAX_GRID);
  args[0] = embeddings;
  args[1] = queries;
  args[2] = scores;
  args[3] = length;
  args[4] = dim;
  args[5] = batch;
  try {
    launchOn((vector ? kernels.vector : kernels.scalar)[group]!, stream, grid, BLOCK, 0, args);
  } finally {
    args.fill(0, 0, 3);
  }
}
