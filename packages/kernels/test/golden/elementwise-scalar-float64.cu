// @cuda-tasks/kernels elementwise: a: T, x: T -> y: T
// ct_p0: a, ct_p1: x, ct_p2: y
__device__ __forceinline__ void ct_body(const double a, const double x, double &y, const unsigned long long i, const unsigned long long n) {
y = a * x + i;
}

extern "C" __global__ void ct_elementwise(const double ct_p0, const double *ct_p1, double *ct_p2, const unsigned long long ct_n) {
  const unsigned long long ct_stride = (unsigned long long)blockDim.x * gridDim.x;
  unsigned long long ct_i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
  for (; ct_i + 3 * ct_stride < ct_n; ct_i += 4 * ct_stride) {
    const unsigned long long ct_i1 = ct_i + ct_stride, ct_i2 = ct_i1 + ct_stride, ct_i3 = ct_i2 + ct_stride;
    const double ct_p1_0 = ct_p1[ct_i], ct_p1_1 = ct_p1[ct_i1], ct_p1_2 = ct_p1[ct_i2], ct_p1_3 = ct_p1[ct_i3];
    ct_body(ct_p0, ct_p1_0, ct_p2[ct_i], ct_i, ct_n);
    ct_body(ct_p0, ct_p1_1, ct_p2[ct_i1], ct_i1, ct_n);
    ct_body(ct_p0, ct_p1_2, ct_p2[ct_i2], ct_i2, ct_n);
    ct_body(ct_p0, ct_p1_3, ct_p2[ct_i3], ct_i3, ct_n);
  }
  for (; ct_i < ct_n; ct_i += ct_stride) {
    ct_body(ct_p0, ct_p1[ct_i], ct_p2[ct_i], ct_i, ct_n);
  }
}
