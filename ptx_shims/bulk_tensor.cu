// cp.async.bulk.tensor: one thread has the TMA unit copy a box of a tensor, described by a 128-byte
// CUtensorMap, between global and shared memory (PTX ISA 8.0, sm_90; multicast sm_90a).
// Coordinates are int32 element indices, innermost dimension first. A box may hang over the tensor's
// edge: loads fill the missing elements (zero or NaN, as the map says), stores skip them.
#include "common.cuh"

// The tensor-map operand: the generic address of the CUtensorMap (in .param, .const or .global memory).
static __device__ __forceinline__ unsigned long long ap_tmap(const void* p) {
  return reinterpret_cast<unsigned long long>(p);
}

// ---- 1d -----------------------------------------------------------------------------------------------

// cp.async.bulk.tensor.1d.shared::cluster.global.tile.mbarrier::complete_tx::bytes
//     [dst], [tmap, {c0}], [bar];
// PTX ISA 8.0, sm_90.
extern "C" __device__ void ap_cp_async_bulk_tensor_1d_shared_global(
    void* dst, const void* tmap, int c0, void* bar) {
  asm volatile("cp.async.bulk.tensor.1d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
               " [%0], [%1, {%2}], [%3];"
               ::"r"(ap_smem(dst)), "l"(ap_tmap(tmap)), "r"(c0), "r"(ap_smem(bar))
               : "memory");
}

// cp.async.bulk.tensor.1d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster
//     [dst], [tmap, {c0}], [bar], cta_mask;
// PTX ISA 8.0, sm_90a. dst and bar are shared::cta offsets, used as they are in every CTA named by cta_mask.
extern "C" __device__ void ap_cp_async_bulk_tensor_1d_shared_global_multicast(
    void* dst, const void* tmap, int c0, void* bar, unsigned short cta_mask) {
  asm volatile("cp.async.bulk.tensor.1d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster"
               " [%0], [%1, {%2}], [%3], %4;"
               ::"r"(ap_smem(dst)), "l"(ap_tmap(tmap)), "r"(c0), "r"(ap_smem(bar)), "h"(cta_mask)
               : "memory");
}

// cp.async.bulk.tensor.1d.global.shared::cta.tile.bulk_group [tmap, {c0}], [src];
// PTX ISA 8.0, sm_90.
extern "C" __device__ void ap_cp_async_bulk_tensor_1d_global_shared(
    const void* tmap, int c0, const void* src) {
  asm volatile("cp.async.bulk.tensor.1d.global.shared::cta.tile.bulk_group [%0, {%1}], [%2];"
               ::"l"(ap_tmap(tmap)), "r"(c0), "r"(ap_smem(src))
               : "memory");
}

// ---- 2d -----------------------------------------------------------------------------------------------

// cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes
//     [dst], [tmap, {c0, c1}], [bar];
// PTX ISA 8.0, sm_90.
extern "C" __device__ void ap_cp_async_bulk_tensor_2d_shared_global(
    void* dst, const void* tmap, int c0, int c1, void* bar) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
               " [%0], [%1, {%2, %3}], [%4];"
               ::"r"(ap_smem(dst)), "l"(ap_tmap(tmap)), "r"(c0), "r"(c1), "r"(ap_smem(bar))
               : "memory");
}

// cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster
//     [dst], [tmap, {c0, c1}], [bar], cta_mask;
// PTX ISA 8.0, sm_90a. dst and bar are shared::cta offsets, used as they are in every CTA named by cta_mask.
extern "C" __device__ void ap_cp_async_bulk_tensor_2d_shared_global_multicast(
    void* dst, const void* tmap, int c0, int c1, void* bar, unsigned short cta_mask) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster"
               " [%0], [%1, {%2, %3}], [%4], %5;"
               ::"r"(ap_smem(dst)), "l"(ap_tmap(tmap)), "r"(c0), "r"(c1), "r"(ap_smem(bar)), "h"(cta_mask)
               : "memory");
}

// cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [tmap, {c0, c1}], [src];
// PTX ISA 8.0, sm_90.
extern "C" __device__ void ap_cp_async_bulk_tensor_2d_global_shared(
    const void* tmap, int c0, int c1, const void* src) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [%0, {%1, %2}], [%3];"
               ::"l"(ap_tmap(tmap)), "r"(c0), "r"(c1), "r"(ap_smem(src))
               : "memory");
}

// ---- 3d -----------------------------------------------------------------------------------------------

// cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes
//     [dst], [tmap, {c0, c1, c2}], [bar];
// PTX ISA 8.0, sm_90.
extern "C" __device__ void ap_cp_async_bulk_tensor_3d_shared_global(
    void* dst, const void* tmap, int c0, int c1, int c2, void* bar) {
  asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
               " [%0], [%1, {%2, %3, %4}], [%5];"
               ::"r"(ap_smem(dst)), "l"(ap_tmap(tmap)), "r"(c0), "r"(c1), "r"(c2), "r"(ap_smem(bar))
               : "memory");
}

// cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster
//     [dst], [tmap, {c0, c1, c2}], [bar], cta_mask;
// PTX ISA 8.0, sm_90a. dst and bar are shared::cta offsets, used as they are in every CTA named by cta_mask.
extern "C" __device__ void ap_cp_async_bulk_tensor_3d_shared_global_multicast(
    void* dst, const void* tmap, int c0, int c1, int c2, void* bar, unsigned short cta_mask) {
  asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster"
               " [%0], [%1, {%2, %3, %4}], [%5], %6;"
               ::"r"(ap_smem(dst)), "l"(ap_tmap(tmap)), "r"(c0), "r"(c1), "r"(c2), "r"(ap_smem(bar)), "h"(cta_mask)
               : "memory");
}

// cp.async.bulk.tensor.3d.global.shared::cta.tile.bulk_group [tmap, {c0, c1, c2}], [src];
// PTX ISA 8.0, sm_90.
extern "C" __device__ void ap_cp_async_bulk_tensor_3d_global_shared(
    const void* tmap, int c0, int c1, int c2, const void* src) {
  asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.tile.bulk_group [%0, {%1, %2, %3}], [%4];"
               ::"l"(ap_tmap(tmap)), "r"(c0), "r"(c1), "r"(c2), "r"(ap_smem(src))
               : "memory");
}

// ---- 4d -----------------------------------------------------------------------------------------------

// cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes
//     [dst], [tmap, {c0, c1, c2, c3}], [bar];
// PTX ISA 8.0, sm_90.
extern "C" __device__ void ap_cp_async_bulk_tensor_4d_shared_global(
    void* dst, const void* tmap, int c0, int c1, int c2, int c3, void* bar) {
  asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
               " [%0], [%1, {%2, %3, %4, %5}], [%6];"
               ::"r"(ap_smem(dst)), "l"(ap_tmap(tmap)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(ap_smem(bar))
               : "memory");
}

// cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster
//     [dst], [tmap, {c0, c1, c2, c3}], [bar], cta_mask;
// PTX ISA 8.0, sm_90a. dst and bar are shared::cta offsets, used as they are in every CTA named by cta_mask.
extern "C" __device__ void ap_cp_async_bulk_tensor_4d_shared_global_multicast(
    void* dst, const void* tmap, int c0, int c1, int c2, int c3, void* bar, unsigned short cta_mask) {
  asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster"
               " [%0], [%1, {%2, %3, %4, %5}], [%6], %7;"
               ::"r"(ap_smem(dst)), "l"(ap_tmap(tmap)), "r"(c0), "r"(c1), "r"(c2), "r"(c3),
                 "r"(ap_smem(bar)), "h"(cta_mask)
               : "memory");
}

// cp.async.bulk.tensor.4d.global.shared::cta.tile.bulk_group [tmap, {c0, c1, c2, c3}], [src];
// PTX ISA 8.0, sm_90.
extern "C" __device__ void ap_cp_async_bulk_tensor_4d_global_shared(
    const void* tmap, int c0, int c1, int c2, int c3, const void* src) {
  asm volatile("cp.async.bulk.tensor.4d.global.shared::cta.tile.bulk_group [%0, {%1, %2, %3, %4}], [%5];"
               ::"l"(ap_tmap(tmap)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(ap_smem(src))
               : "memory");
}

// ---- 5d -----------------------------------------------------------------------------------------------

// cp.async.bulk.tensor.5d.shared::cluster.global.tile.mbarrier::complete_tx::bytes
//     [dst], [tmap, {c0, c1, c2, c3, c4}], [bar];
// PTX ISA 8.0, sm_90.
extern "C" __device__ void ap_cp_async_bulk_tensor_5d_shared_global(
    void* dst, const void* tmap, int c0, int c1, int c2, int c3, int c4, void* bar) {
  asm volatile("cp.async.bulk.tensor.5d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
               " [%0], [%1, {%2, %3, %4, %5, %6}], [%7];"
               ::"r"(ap_smem(dst)), "l"(ap_tmap(tmap)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(c4), "r"(ap_smem(bar))
               : "memory");
}

// cp.async.bulk.tensor.5d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster
//     [dst], [tmap, {c0, c1, c2, c3, c4}], [bar], cta_mask;
// PTX ISA 8.0, sm_90a. dst and bar are shared::cta offsets, used as they are in every CTA named by cta_mask.
extern "C" __device__ void ap_cp_async_bulk_tensor_5d_shared_global_multicast(
    void* dst, const void* tmap, int c0, int c1, int c2, int c3, int c4, void* bar, unsigned short cta_mask) {
  asm volatile("cp.async.bulk.tensor.5d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster"
               " [%0], [%1, {%2, %3, %4, %5, %6}], [%7], %8;"
               ::"r"(ap_smem(dst)), "l"(ap_tmap(tmap)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(c4),
                 "r"(ap_smem(bar)), "h"(cta_mask)
               : "memory");
}

// cp.async.bulk.tensor.5d.global.shared::cta.tile.bulk_group [tmap, {c0, c1, c2, c3, c4}], [src];
// PTX ISA 8.0, sm_90.
extern "C" __device__ void ap_cp_async_bulk_tensor_5d_global_shared(
    const void* tmap, int c0, int c1, int c2, int c3, int c4, const void* src) {
  asm volatile("cp.async.bulk.tensor.5d.global.shared::cta.tile.bulk_group [%0, {%1, %2, %3, %4, %5}], [%6];"
               ::"l"(ap_tmap(tmap)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(c4), "r"(ap_smem(src))
               : "memory");
}

// ---- prefetch -----------------------------------------------------------------------------------------

// prefetch.tensormap [tmap];
// PTX ISA 8.0, sm_90. Generic addressing: the map may live in .param, .const or .global memory.
extern "C" __device__ void ap_prefetch_tensormap(const void* tmap) {
  asm volatile("prefetch.tensormap [%0];" ::"l"(ap_tmap(tmap)) : "memory");
}
