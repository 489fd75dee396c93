// The SM's cycle counter: timestamps a kernel takes of its own pipeline.
#include "common.cuh"

// mov.u64 d, %clock64;   (PTX ISA 2.0, sm_20)
// The SM's 64-bit cycle counter (each SM has its own). volatile with a memory clobber: two readings are never
// merged, and the compiler keeps them in order with the kernel's memory operations and other asm around them.
extern "C" __device__ unsigned long long ap_clock64() {
  unsigned long long d;
  asm volatile("mov.u64 %0, %%clock64;" : "=l"(d) : : "memory");
  return d;
}
