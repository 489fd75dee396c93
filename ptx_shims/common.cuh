// Shared helpers for the asyncpipe shims. Each shim is `extern "C" __device__`, named ap_<python name>,
// and holds one inline-asm statement (a blocking wait may loop on its try form).
#pragma once

// A generic pointer to shared memory, as the 32-bit .shared::cta address PTX operands take.
static __device__ __forceinline__ unsigned ap_smem(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// A generic pointer to global memory, as a .global address.
static __device__ __forceinline__ unsigned long long ap_gmem(const void* p) {
  return static_cast<unsigned long long>(__cvta_generic_to_global(p));
}
