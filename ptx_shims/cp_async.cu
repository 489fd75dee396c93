// cp.async: per-thread asynchronous copies from global to shared memory (PTX ISA 7.0, sm_80).
#include "common.cuh"

// cp.async.ca.shared.global [dst], [src], 4;
extern "C" __device__ void ap_cp_async_ca_shared_global_4(void* dst, const void* src) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(ap_smem(dst)), "l"(ap_gmem(src)) : "memory");
}

// cp.async.ca.shared.global [dst], [src], 8;
extern "C" __device__ void ap_cp_async_ca_shared_global_8(void* dst, const void* src) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8;" ::"r"(ap_smem(dst)), "l"(ap_gmem(src)) : "memory");
}

// cp.async.ca.shared.global [dst], [src], 16;
extern "C" __device__ void ap_cp_async_ca_shared_global_16(void* dst, const void* src) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 16;" ::"r"(ap_smem(dst)), "l"(ap_gmem(src)) : "memory");
}

// cp.async.cg.shared.global [dst], [src], 16;
extern "C" __device__ void ap_cp_async_cg_shared_global_16(void* dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(ap_smem(dst)), "l"(ap_gmem(src)) : "memory");
}

// cp.async.ca.shared.global [dst], [src], 4, src_size;   (bytes past src_size are zero-filled)
extern "C" __device__ void ap_cp_async_ca_shared_global_4_src_size(void* dst, const void* src, unsigned src_size) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(ap_smem(dst)), "l"(ap_gmem(src)), "r"(src_size)
               : "memory");
}

// cp.async.ca.shared.global [dst], [src], 8, src_size;
extern "C" __device__ void ap_cp_async_ca_shared_global_8_src_size(void* dst, const void* src, unsigned src_size) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;" ::"r"(ap_smem(dst)), "l"(ap_gmem(src)), "r"(src_size)
               : "memory");
}

// cp.async.ca.shared.global [dst], [src], 16, src_size;
extern "C" __device__ void ap_cp_async_ca_shared_global_16_src_size(void* dst, const void* src, unsigned src_size) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 16, %2;" ::"r"(ap_smem(dst)), "l"(ap_gmem(src)), "r"(src_size)
               : "memory");
}

// cp.async.cg.shared.global [dst], [src], 16, src_size;
extern "C" __device__ void ap_cp_async_cg_shared_global_16_src_size(void* dst, const void* src, unsigned src_size) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(ap_smem(dst)), "l"(ap_gmem(src)), "r"(src_size)
               : "memory");
}

// cp.async.commit_group;
extern "C" __device__ void ap_cp_async_commit_group() { asm volatile("cp.async.commit_group;" ::: "memory"); }

// cp.async.wait_group N;   N is an immediate: the switch folds away when N is a compile-time constant.
// N > 7 waits as for 7 and N < 0 as for 0: waiting for more groups than asked is always safe.
extern "C" __device__ void ap_cp_async_wait_group(int n) {
  switch (n < 0 ? 0 : n) {
    case 0: asm volatile("cp.async.wait_group 0;" ::: "memory"); break;
    case 1: asm volatile("cp.async.wait_group 1;" ::: "memory"); break;
    case 2: asm volatile("cp.async.wait_group 2;" ::: "memory"); break;
    case 3: asm volatile("cp.async.wait_group 3;" ::: "memory"); break;
    case 4: asm volatile("cp.async.wait_group 4;" ::: "memory"); break;
    case 5: asm volatile("cp.async.wait_group 5;" ::: "memory"); break;
    case 6: asm volatile("cp.async.wait_group 6;" ::: "memory"); break;
    default: asm volatile("cp.async.wait_group 7;" ::: "memory"); break;
  }
}

// cp.async.wait_all;
extern "C" __device__ void ap_cp_async_wait_all() { asm volatile("cp.async.wait_all;" ::: "memory"); }

// cp.async.mbarrier.arrive.shared::cta.b64 [addr];
extern "C" __device__ void ap_cp_async_mbarrier_arrive(void* addr) {
  asm volatile("cp.async.mbarrier.arrive.shared::cta.b64 [%0];" ::"r"(ap_smem(addr)) : "memory");
}

// cp.async.mbarrier.arrive.noinc.shared::cta.b64 [addr];
extern "C" __device__ void ap_cp_async_mbarrier_arrive_noinc(void* addr) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(ap_smem(addr)) : "memory");
}
