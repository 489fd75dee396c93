// Conversions between number formats (PTX ISA 7.0, sm_80).
#include "common.cuh"

// cvt.rn.bf16x2.f32 d, a, b;   (PTX ISA 7.0, sm_80)
// Rounds a and b to bfloat16 (nearest, ties to even) and packs them into one 32-bit word: a in the
// upper half, b in the lower. One F2FP instruction for two values, where two scalar conversions and
// the packing would take four.
extern "C" __device__ unsigned ap_cvt_rn_bf16x2_f32(float a, float b) {
  unsigned d;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(a), "f"(b));
  return d;
}

// cvt.rn.f16x2.f32 d, a, b;   (PTX ISA 7.0, sm_80)
// As cvt.rn.bf16x2.f32, to float16 (nearest, ties to even; overflow to infinity): a upper, b lower.
extern "C" __device__ unsigned ap_cvt_rn_f16x2_f32(float a, float b) {
  unsigned d;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(a), "f"(b));
  return d;
}

// cvt.rn.satfinite.e4m3x2.f32 d, a, b;   (PTX ISA 7.8, sm_89)
// Rounds a and b to FP8 E4M3 (nearest, ties to even; beyond 448, infinities included, to +-448; NaN to the
// canonical NaN 0x7F) and packs them into 16 bits: a in the upper byte, b in the lower. One F2FP for two values.
extern "C" __device__ unsigned ap_cvt_rn_satfinite_e4m3x2_f32(float a, float b) {
  unsigned short d;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(d) : "f"(a), "f"(b));
  return d;
}

// cvt.rn.satfinite.e5m2x2.f32 d, a, b;   (PTX ISA 7.8, sm_89)
// Rounds a and b to FP8 E5M2 (nearest, ties to even; beyond 57344, infinities included, to +-57344; NaN to a
// NaN) and packs them into 16 bits: a in the upper byte, b in the lower. One F2FP for two values.
extern "C" __device__ unsigned ap_cvt_rn_satfinite_e5m2x2_f32(float a, float b) {
  unsigned short d;
  asm("cvt.rn.satfinite.e5m2x2.f32 %0, %1, %2;" : "=h"(d) : "f"(a), "f"(b));
  return d;
}
