// @cuda-tasks/kernels elementwise: x: float16, s: float32 -> y: bfloat16, w: float16
__device__ __forceinline__ float ct_f16_to_f32(unsigned short h) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
}
__device__ __forceinline__ unsigned short ct_f32_to_f16(float f) {
  unsigned short h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
}
__device__ __forceinline__ float ct_bf16_to_f32(unsigned short h) {
  return __uint_as_float(((unsigned int)h) << 16);
}
__device__ __forceinline__ unsigned short ct_f32_to_bf16(float f) {
  unsigned int x = __float_as_uint(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((x >> 16) | 0x40u);
  return (unsigned short)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

__device__ __forceinline__ void ct_body(const float x, const float s, float &y, float &w, const unsigned long long i, const unsigned long long n) {
y = x * s; w += x;
}

extern "C" __global__ void ct_elementwise(const unsigned short *ct_x, const float ct_s, unsigned short *ct_y, unsigned short *ct_w, const unsigned long long ct_n) {
  const unsigned long long ct_stride = (unsigned long long)blockDim.x * gridDim.x;
  unsigned long long ct_i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
  for (; ct_i + 3 * ct_stride < ct_n; ct_i += 4 * ct_stride) {
    const unsigned long long ct_i1 = ct_i + ct_stride, ct_i2 = ct_i1 + ct_stride, ct_i3 = ct_i2 + ct_stride;
    const float ct_x_0 = ct_f16_to_f32(ct_x[ct_i]), ct_x_1 = ct_f16_to_f32(ct_x[ct_i1]), ct_x_2 = ct_f16_to_f32(ct_x[ct_i2]), ct_x_3 = ct_f16_to_f32(ct_x[ct_i3]);
    {
      float ct_o_y = 0.0f;
      float ct_o_w = ct_f16_to_f32(ct_w[ct_i]);
      ct_body(ct_x_0, ct_s, ct_o_y, ct_o_w, ct_i, ct_n);
      ct_y[ct_i] = ct_f32_to_bf16(ct_o_y);
      ct_w[ct_i] = ct_f32_to_f16(ct_o_w);
    }
    {
      float ct_o_y = 0.0f;
      float ct_o_w = ct_f16_to_f32(ct_w[ct_i1]);
      ct_body(ct_x_1, ct_s, ct_o_y, ct_o_w, ct_i1, ct_n);
      ct_y[ct_i1] = ct_f32_to_bf16(ct_o_y);
      ct_w[ct_i1] = ct_f32_to_f16(ct_o_w);
    }
    {
      float ct_o_y = 0.0f;
      float ct_o_w = ct_f16_to_f32(ct_w[ct_i2]);
      ct_body(ct_x_2, ct_s, ct_o_y, ct_o_w, ct_i2, ct_n);
      ct_y[ct_i2] = ct_f32_to_bf16(ct_o_y);
      ct_w[ct_i2] = ct_f32_to_f16(ct_o_w);
    }
    {
      float ct_o_y = 0.0f;
      float ct_o_w = ct_f16_to_f32(ct_w[ct_i3]);
      ct_body(ct_x_3, ct_s, ct_o_y, ct_o_w, ct_i3, ct_n);
      ct_y[ct_i3] = ct_f32_to_bf16(ct_o_y);
      ct_w[ct_i3] = ct_f32_to_f16(ct_o_w);
    }
  }
  for (; ct_i < ct_n; ct_i += ct_stride) {
    {
      float ct_o_y = 0.0f;
      float ct_o_w = ct_f16_to_f32(ct_w[ct_i]);
      ct_body(ct_f16_to_f32(ct_x[ct_i]), ct_s, ct_o_y, ct_o_w, ct_i, ct_n);
      ct_y[ct_i] = ct_f32_to_bf16(ct_o_y);
      ct_w[ct_i] = ct_f32_to_f16(ct_o_w);
    }
  }
}
