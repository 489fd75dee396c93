// Named barriers: a subset of the CTA's threads meets at barrier id a (PTX ISA 2.0, sm_20).
#include "common.cuh"

// bar.sync a, b;   (PTX ISA 2.0, sm_20)
// Barrier a (0..15) completes when b threads (a multiple of the warp size) have arrived; the caller
// waits for it. Every thread of a warp executes it together (bar.sync is barrier.sync.aligned).
// "memory": shared-memory accesses are not moved across it (it orders them among the b threads).
extern "C" __device__ void ap_bar_sync(unsigned a, unsigned b) {
  asm volatile("bar.sync %0, %1;" : : "r"(a), "r"(b) : "memory");
}

// bar.arrive a, b;   (PTX ISA 2.0, sm_20)
// Counts the calling warp's threads towards barrier a's b and goes on without waiting: the producer
// side of a producer/consumer hand-over whose consumers call bar.sync a, b.
extern "C" __device__ void ap_bar_arrive(unsigned a, unsigned b) {
  asm volatile("bar.arrive %0, %1;" : : "r"(a), "r"(b) : "memory");
}
