// cp.async.bulk: one thread has the TMA unit copy a contiguous run of bytes between global and shared
// memory (PTX ISA 8.0, sm_90). Loads complete on an mbarrier (complete_tx), stores in bulk async-groups.
#include "common.cuh"

// cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [dst], [src], size, [bar];
// PTX ISA 8.0, sm_90. dst and bar are this CTA's shared memory (a .shared::cta address is valid in the
// .shared::cluster window); src is global.
extern "C" __device__ void ap_cp_async_bulk_shared_global(void* dst, const void* src, unsigned size, void* bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
               ::"r"(ap_smem(dst)), "l"(ap_gmem(src)), "r"(size), "r"(ap_smem(bar))
               : "memory");
}

// cp.async.bulk.global.shared::cta.bulk_group [dst], [src], size;
// PTX ISA 8.0, sm_90.
extern "C" __device__ void ap_cp_async_bulk_global_shared(void* dst, const void* src, unsigned size) {
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;"
               ::"l"(ap_gmem(dst)), "r"(ap_smem(src)), "r"(size)
               : "memory");
}

// cp.async.bulk.commit_group;
// PTX ISA 8.0, sm_90.
extern "C" __device__ void ap_cp_async_bulk_commit_group() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }

// cp.async.bulk.wait_group N;   PTX ISA 8.0, sm_90.
// N is an immediate: the switch folds away when N is a compile-time constant.
// N > 7 waits as for 7 and N < 0 as for 0: waiting for more groups than asked is always safe.
extern "C" __device__ void ap_cp_async_bulk_wait_group(int n) {
  switch (n < 0 ? 0 : n) {
    case 0: asm volatile("cp.async.bulk.wait_group 0;" ::: "memory"); break;
    case 1: asm volatile("cp.async.bulk.wait_group 1;" ::: "memory"); break;
    case 2: asm volatile("cp.async.bulk.wait_group 2;" ::: "memory"); break;
    case 3: asm volatile("cp.async.bulk.wait_group 3;" ::: "memory"); break;
    case 4: asm volatile("cp.async.bulk.wait_group 4;" ::: "memory"); break;
    case 5: asm volatile("cp.async.bulk.wait_group 5;" ::: "memory"); break;
    case 6: asm volatile("cp.async.bulk.wait_group 6;" ::: "memory"); break;
    default: asm volatile("cp.async.bulk.wait_group 7;" ::: "memory"); break;
  }
}

// cp.async.bulk.wait_group.read N;   PTX ISA 8.0, sm_90.
// Waits only until the sources of the groups have been read (the shared memory may be reused), not
// until the writes to global memory are visible. Same immediate handling as above.
extern "C" __device__ void ap_cp_async_bulk_wait_group_read(int n) {
  switch (n < 0 ? 0 : n) {
    case 0: asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory"); break;
    case 1: asm volatile("cp.async.bulk.wait_group.read 1;" ::: "memory"); break;
    case 2: asm volatile("cp.async.bulk.wait_group.read 2;" ::: "memory"); break;
    case 3: asm volatile("cp.async.bulk.wait_group.read 3;" ::: "memory"); break;
    case 4: asm volatile("cp.async.bulk.wait_group.read 4;" ::: "memory"); break;
    case 5: asm volatile("cp.async.bulk.wait_group.read 5;" ::: "memory"); break;
    case 6: asm volatile("cp.async.bulk.wait_group.read 6;" ::: "memory"); break;
    default: asm volatile("cp.async.bulk.wait_group.read 7;" ::: "memory"); break;
  }
}
