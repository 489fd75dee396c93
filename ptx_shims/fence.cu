// Fences: proxy fences between the generic proxy (ld/st by threads) and the async proxy (TMA and
// bulk copies) or the tensormap proxy, and cluster-scope memory fences (PTX ISA 7.8 to 8.3, sm_90).
#include "common.cuh"

// fence.proxy.async.shared::cta;   (PTX ISA 8.0, sm_90)
extern "C" __device__ void ap_fence_proxy_async_shared_cta() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

// fence.proxy.async;   (PTX ISA 8.0, sm_90; every state space)
extern "C" __device__ void ap_fence_proxy_async() { asm volatile("fence.proxy.async;" ::: "memory"); }

// fence.proxy.tensormap::generic.acquire.gpu [addr], 128;   (PTX ISA 8.3, sm_90)
// The address is generic, unconditionally (the ISA says so), and must point into .global: no cvta.
extern "C" __device__ void ap_fence_proxy_tensormap_generic_acquire_gpu(const void* tmap_addr) {
  const unsigned long long generic = reinterpret_cast<unsigned long long>(tmap_addr);
  asm volatile("fence.proxy.tensormap::generic.acquire.gpu [%0], 128;" ::"l"(generic) : "memory");
}

// fence.proxy.tensormap::generic.acquire.sys [addr], 128;   (PTX ISA 8.3, sm_90; a map the host wrote)
extern "C" __device__ void ap_fence_proxy_tensormap_generic_acquire_sys(const void* tmap_addr) {
  const unsigned long long generic = reinterpret_cast<unsigned long long>(tmap_addr);
  asm volatile("fence.proxy.tensormap::generic.acquire.sys [%0], 128;" ::"l"(generic) : "memory");
}

// fence.acq_rel.cluster;   (PTX ISA 7.8, sm_90)
extern "C" __device__ void ap_fence_acq_rel_cluster() { asm volatile("fence.acq_rel.cluster;" ::: "memory"); }

// fence.acq_rel.gpu;   (PTX ISA 6.0, sm_70)
extern "C" __device__ void ap_fence_acq_rel_gpu() { asm volatile("fence.acq_rel.gpu;" ::: "memory"); }

// fence.mbarrier_init.release.cluster;   (PTX ISA 8.0, sm_90)
extern "C" __device__ void ap_fence_mbarrier_init_release_cluster() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}
