// Counter-based Philox4x32-10 generation for @cuda-tasks/curand (the 'philox' generator kind).
//
// The sequence: the j-th 32-bit output of (seed, offset 0) is lane j % 4 of
// Philox4x32-10(counter = (q lo, q hi, 0, 0), key = (seed lo, seed hi)), q = j / 4: the numbers
// of cuRAND's device API curand_init(seed, 0, j, &s); curand(&s). Output indices wrap modulo
// 2^64. A launch draws from `offset` on; nothing is kept on the device between launches.
//
// Every distribution but Poisson works in groups of four outputs: group g of a launch takes
// outputs offset + 4g .. offset + 4g + 3 and writes elements E*g .. E*g + E - 1 (E = 4 for bits,
// uniform float32 and normal float32; E = 2 for uniform float64 and normal float64), so the
// numbers do not depend on the launch geometry. Poisson element e draws from its own
// subsequence, apart from the main one: attempt t = 1, 2, ... takes the block
// Philox(counter = ((offset + e) lo, (offset + e) hi, t, 0)).
//
// Elements are in column-major order; element e lies at e when the target is contiguous
// (ld == rows), else at (e / rows) * ld + e % rows (a 2-D block of a larger matrix).
//
// Every kernel takes (out, n, rows, ld, offset, seed, a, b); a and b are the distribution's
// parameters (mean and stddev, or lambda), ignored where it has none.

typedef unsigned long long u64;

#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u
#define PHILOX_W1 0xBB67AE85u

__device__ __forceinline__ uint4 philox10(uint4 c, uint2 k) {
#pragma unroll
  for (int round = 0; round < 10; round++) {
    const unsigned hi0 = __umulhi(PHILOX_M0, c.x);
    const unsigned lo0 = PHILOX_M0 * c.x;
    const unsigned hi1 = __umulhi(PHILOX_M1, c.z);
    const unsigned lo1 = PHILOX_M1 * c.z;
    c = make_uint4(hi1 ^ c.y ^ k.x, lo1, hi0 ^ c.w ^ k.y, lo0);
    k.x += PHILOX_W0;
    k.y += PHILOX_W1;
  }
  return c;
}

__device__ __forceinline__ uint2 keyOf(u64 seed) {
  return make_uint2((unsigned)seed, (unsigned)(seed >> 32));
}

__device__ __forceinline__ uint4 block(u64 q, unsigned c2, uint2 key) {
  return philox10(make_uint4((unsigned)q, (unsigned)(q >> 32), c2, 0u), key);
}

// Outputs s .. s + 3 of the main sequence (one Philox block when s is a multiple of 4, else
// two). s % 4 is the same for every thread of a launch, so the branch does not diverge.
__device__ __forceinline__ uint4 window(u64 s, uint2 key) {
  const u64 q = s >> 2;
  const unsigned r = (unsigned)s & 3u;
  const uint4 a = block(q, 0u, key);
  if (r == 0) return a;
  // The next block, modulo 2^62 blocks: the offset counts outputs modulo 2^64.
  const uint4 b = block((q + 1) & 0x3fffffffffffffffull, 0u, key);
  if (r == 1) return make_uint4(a.y, a.z, a.w, b.x);
  if (r == 2) return make_uint4(a.z, a.w, b.x, b.y);
  return make_uint4(a.w, b.x, b.y, b.z);
}

__device__ __forceinline__ u64 at(u64 e, u64 rows, u64 ld) {
  return ld == rows ? e : (e / rows) * ld + e % rows;
}

// cuRAND's formulas (curand_uniform.h, curand_normal.h).
__device__ __forceinline__ float uniformFloat(unsigned x) {
  return x * 2.3283064365386963e-10f + 1.1641532182693481e-10f;  // x 2^-32 + 2^-33
}
__device__ __forceinline__ double uniformDouble(unsigned x, unsigned y) {
  const u64 z = (u64)x ^ ((u64)y << 21);  // 53 bits
  return z * 1.1102230246251565e-16 + 5.551115123125783e-17;  // z 2^-53 + 2^-54
}
// (s sin v, s cos v) of the pair (x, y).
__device__ __forceinline__ float2 boxMullerFloat(unsigned x, unsigned y) {
  const float u = uniformFloat(x);
  const float v = y * 1.4629180792671596e-09f + 7.3145903963357980e-10f;  // y 2^-32 2pi + 2^-32 pi
  const float s = sqrtf(-2.0f * logf(u));
  float sn, cs;
  sincosf(v, &sn, &cs);
  return make_float2(s * sn, s * cs);
}
__device__ __forceinline__ double2 boxMullerDouble(uint4 w) {
  const double u = uniformDouble(w.x, w.y);
  const u64 zy = (u64)w.z ^ ((u64)w.w << 21);
  const double v = zy * 2.220446049250313e-16 + 1.1102230246251565e-16;  // zy 2^-52 + 2^-53
  const double s = sqrt(-2.0 * log(u));
  double sn, cs;
  sincospi(v, &sn, &cs);
  return make_double2(s * sn, s * cs);
}

#define GROUPS(E)                                                                    \
  const uint2 key = keyOf(seed);                                                     \
  const u64 groups = (n + (E) - 1) / (E);                                            \
  for (u64 g = blockIdx.x * (u64)blockDim.x + threadIdx.x; g < groups;               \
       g += (u64)gridDim.x * blockDim.x)

#define STORE(E, values)                                                             \
  {                                                                                  \
    const u64 e0 = g * (E);                                                          \
    _Pragma("unroll") for (int i = 0; i < (E); i++) {                                \
      if (e0 + i < n) out[at(e0 + i, rows, ld)] = (values)[i];                       \
    }                                                                                \
  }

extern "C" __global__ void curand_philox_bits(unsigned *out, u64 n, u64 rows, u64 ld, u64 offset,
                                              u64 seed, double, double) {
  GROUPS(4) {
    const uint4 w = window(offset + 4 * g, key);
    const unsigned v[4] = {w.x, w.y, w.z, w.w};
    STORE(4, v);
  }
}

extern "C" __global__ void curand_philox_uniform_f32(float *out, u64 n, u64 rows, u64 ld,
                                                     u64 offset, u64 seed, double, double) {
  GROUPS(4) {
    const uint4 w = window(offset + 4 * g, key);
    const float v[4] = {uniformFloat(w.x), uniformFloat(w.y), uniformFloat(w.z),
                        uniformFloat(w.w)};
    STORE(4, v);
  }
}

extern "C" __global__ void curand_philox_uniform_f64(double *out, u64 n, u64 rows, u64 ld,
                                                     u64 offset, u64 seed, double, double) {
  GROUPS(2) {
    const uint4 w = window(offset + 4 * g, key);
    const double v[2] = {uniformDouble(w.x, w.y), uniformDouble(w.z, w.w)};
    STORE(2, v);
  }
}

extern "C" __global__ void curand_philox_normal_f32(float *out, u64 n, u64 rows, u64 ld,
                                                    u64 offset, u64 seed, double mean,
                                                    double stddev) {
  const float m = (float)mean;
  const float sd = (float)stddev;
  GROUPS(4) {
    const uint4 w = window(offset + 4 * g, key);
    const float2 p = boxMullerFloat(w.x, w.y);
    const float2 q = boxMullerFloat(w.z, w.w);
    const float v[4] = {m + sd * p.x, m + sd * p.y, m + sd * q.x, m + sd * q.y};
    STORE(4, v);
  }
}

extern "C" __global__ void curand_philox_normal_f64(double *out, u64 n, u64 rows, u64 ld,
                                                    u64 offset, u64 seed, double mean,
                                                    double stddev) {
  GROUPS(2) {
    const double2 p = boxMullerDouble(window(offset + 4 * g, key));
    const double v[2] = {mean + stddev * p.x, mean + stddev * p.y};
    STORE(2, v);
  }
}

extern "C" __global__ void curand_philox_log_normal_f32(float *out, u64 n, u64 rows, u64 ld,
                                                        u64 offset, u64 seed, double mean,
                                                        double stddev) {
  const float m = (float)mean;
  const float sd = (float)stddev;
  GROUPS(4) {
    const uint4 w = window(offset + 4 * g, key);
    const float2 p = boxMullerFloat(w.x, w.y);
    const float2 q = boxMullerFloat(w.z, w.w);
    const float v[4] = {expf(m + sd * p.x), expf(m + sd * p.y), expf(m + sd * q.x),
                        expf(m + sd * q.y)};
    STORE(4, v);
  }
}

extern "C" __global__ void curand_philox_log_normal_f64(double *out, u64 n, u64 rows, u64 ld,
                                                        u64 offset, u64 seed, double mean,
                                                        double stddev) {
  GROUPS(2) {
    const double2 p = boxMullerDouble(window(offset + 4 * g, key));
    const double v[2] = {exp(mean + stddev * p.x), exp(mean + stddev * p.y)};
    STORE(2, v);
  }
}

// Poisson: inversion by sequential search below POISSON_PTRS_LAMBDA (one uniform); at and
// above it, Hormann's transformed rejection with squeeze (PTRS, 1993; one block per attempt).
#define POISSON_PTRS_LAMBDA 10.0

__device__ unsigned poissonInversion(u64 j, uint2 key, double lambda) {
  const uint4 w = block(j, 1u, key);
  const double u = uniformDouble(w.x, w.y);
  double p = exp(-lambda);
  double cumulative = p;
  unsigned k = 0;
  while (u > cumulative) {
    k++;
    p *= lambda / k;
    const double next = cumulative + p;
    if (next == cumulative) break;  // the tail left is below double precision
    cumulative = next;
  }
  return k;
}

__device__ unsigned poissonPtrs(u64 j, uint2 key, double lambda) {
  const double slam = sqrt(lambda);
  const double loglam = log(lambda);
  const double b = 0.931 + 2.53 * slam;
  const double a = -0.059 + 0.02483 * b;
  const double invalpha = 1.1239 + 1.1328 / (b - 3.4);
  const double vr = 0.9277 - 3.6224 / (b - 2.0);
  for (unsigned t = 1;; t++) {
    const uint4 w = block(j, t, key);
    const double U = uniformDouble(w.x, w.y) - 0.5;
    const double V = uniformDouble(w.z, w.w);
    const double us = 0.5 - fabs(U);
    const double k = floor((2.0 * a / us + b) * U + lambda + 0.43);
    if (us >= 0.07 && V <= vr) return (unsigned)fmin(k, 4294967295.0);
    if (k < 0.0 || (us < 0.013 && V > us)) continue;
    if (log(V) + log(invalpha) - log(a / (us * us) + b) <= -lambda + k * loglam - lgamma(k + 1.0)) {
      return (unsigned)fmin(k, 4294967295.0);
    }
  }
}

extern "C" __global__ void curand_philox_poisson(unsigned *out, u64 n, u64 rows, u64 ld,
                                                 u64 offset, u64 seed, double lambda, double) {
  const uint2 key = keyOf(seed);
  for (u64 e = blockIdx.x * (u64)blockDim.x + threadIdx.x; e < n;
       e += (u64)gridDim.x * blockDim.x) {
    const u64 j = offset + e;
    out[at(e, rows, ld)] = lambda < POISSON_PTRS_LAMBDA ? poissonInversion(j, key, lambda)
                                                        : poissonPtrs(j, key, lambda);
  }
}
