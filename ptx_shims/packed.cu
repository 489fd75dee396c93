// Packed arithmetic on a 32-bit register seen as two 16-bit lanes (PTX ISA 7.0 / 8.0, sm_80 / sm_90).
#include "common.cuh"

// fma.rn.bf16x2 d, a, b, c;   (PTX ISA 7.0, sm_80)
// Per 16-bit lane, a * b + c on bfloat16 values, rounded once to nearest even (subnormals kept; a NaN result is
// the canonical NaN). One HFMA2.BF16 for two elements, on the FMA pipe.
extern "C" __device__ unsigned ap_fma_rn_bf16x2(unsigned a, unsigned b, unsigned c) {
  unsigned d;
  asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}

// min.u16x2 d, a, b;   (PTX ISA 8.0, sm_90)
// Per 16-bit lane, the smaller unsigned integer. On the bit patterns of non-negative floats it is the float minimum.
extern "C" __device__ unsigned ap_min_u16x2(unsigned a, unsigned b) {
  unsigned d;
  asm("min.u16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  return d;
}

// max.u16x2 d, a, b;   (PTX ISA 8.0, sm_90)
// Per 16-bit lane, the larger unsigned integer: the largest bf16 magnitude of a block, two lanes at a time.
extern "C" __device__ unsigned ap_max_u16x2(unsigned a, unsigned b) {
  unsigned d;
  asm("max.u16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  return d;
}
