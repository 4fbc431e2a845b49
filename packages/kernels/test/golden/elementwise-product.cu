// @cuda-tasks/kernels elementwise: x: float32, y: T -> z: T
// ct_p0: x, ct_p1: y, ct_p2: z
__device__ __forceinline__ void ct_body(const float x, const float y, float &z, const unsigned long long i, const unsigned long long n) {
z = sinf(x) * y;
}

extern "C" __global__ void ct_elementwise(const float *ct_p0, const float *ct_p1, float *ct_p2, const unsigned long long ct_n) {
  const unsigned long long ct_stride = (unsigned long long)blockDim.x * gridDim.x;
  unsigned long long ct_i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
  for (; ct_i + 3 * ct_stride < ct_n; ct_i += 4 * ct_stride) {
    const unsigned long long ct_i1 = ct_i + ct_stride, ct_i2 = ct_i1 + ct_stride, ct_i3 = ct_i2 + ct_stride;
    const float ct_p0_0 = ct_p0[ct_i], ct_p0_1 = ct_p0[ct_i1], ct_p0_2 = ct_p0[ct_i2], ct_p0_3 = ct_p0[ct_i3];
    const float ct_p1_0 = ct_p1[ct_i], ct_p1_1 = ct_p1[ct_i1], ct_p1_2 = ct_p1[ct_i2], ct_p1_3 = ct_p1[ct_i3];
    ct_body(ct_p0_0, ct_p1_0, ct_p2[ct_i], ct_i, ct_n);
    ct_body(ct_p0_1, ct_p1_1, ct_p2[ct_i1], ct_i1, ct_n);
    ct_body(ct_p0_2, ct_p1_2, ct_p2[ct_i2], ct_i2, ct_n);
    ct_body(ct_p0_3, ct_p1_3, ct_p2[ct_i3], ct_i3, ct_n);
  }
  for (; ct_i < ct_n; ct_i += ct_stride) {
    ct_body(ct_p0[ct_i], ct_p1[ct_i], ct_p2[ct_i], ct_i, ct_n);
  }
}
