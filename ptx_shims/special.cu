// The special function unit (MUFU): approximate transcendentals, one instruction each.
#include "common.cuh"

// ex2.approx.ftz.f32 d, a;   (PTX ISA 1.4, sm_20)
// 2^a, at most 2 ulp off, subnormal inputs and results flushed to sign-preserving zero: one MUFU.EX2.
// Without .ftz (what numba's math.exp2 emits) ptxas wraps the MUFU in a range test and two multiplies so
// that subnormal results survive; an attention kernel's softmax computes one exponential per score.
extern "C" __device__ float ap_ex2_approx_ftz_f32(float a) {
  float d;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(d) : "f"(a));
  return d;
}
