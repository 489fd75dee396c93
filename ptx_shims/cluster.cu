// Thread block clusters: the cluster barrier, the cluster special registers, and distributed shared
// memory (DSMEM) through mapa + ld/st.shared::cluster (PTX ISA 7.8, sm_90; .relaxed needs PTX ISA 8.0).
#include "common.cuh"

// ---------------------------------------------------------------------------------------------
// barrier.cluster
// ---------------------------------------------------------------------------------------------

// barrier.cluster.arrive;   (PTX ISA 7.8, sm_90; no .sem means .release)
extern "C" __device__ void ap_barrier_cluster_arrive() { asm volatile("barrier.cluster.arrive;" ::: "memory"); }

// barrier.cluster.arrive.relaxed;   (PTX ISA 8.0, sm_90)
// No "memory" clobber: a relaxed arrive orders nothing, so the compiler may move memory accesses across it.
extern "C" __device__ void ap_barrier_cluster_arrive_relaxed() { asm volatile("barrier.cluster.arrive.relaxed;"); }

// barrier.cluster.wait;   (PTX ISA 7.8, sm_90; no .sem means .acquire)
extern "C" __device__ void ap_barrier_cluster_wait() { asm volatile("barrier.cluster.wait;" ::: "memory"); }

// ---------------------------------------------------------------------------------------------
// Special registers (PTX ISA 7.8, sm_90). Constant for the CTA's lifetime, but volatile like every
// shim (the house rule): read one once into a variable rather than in a loop.
// ---------------------------------------------------------------------------------------------

// mov.u32 d, %cluster_ctarank;
extern "C" __device__ unsigned ap_cluster_ctarank() {
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}

// mov.u32 d, %cluster_nctarank;
extern "C" __device__ unsigned ap_cluster_nctarank() {
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(r));
  return r;
}

// mov.u32 d, %clusterid.x;
extern "C" __device__ unsigned ap_clusterid_x() {
  unsigned r;
  asm volatile("mov.u32 %0, %%clusterid.x;" : "=r"(r));
  return r;
}

// mov.u32 d, %clusterid.y;
extern "C" __device__ unsigned ap_clusterid_y() {
  unsigned r;
  asm volatile("mov.u32 %0, %%clusterid.y;" : "=r"(r));
  return r;
}

// mov.u32 d, %clusterid.z;
extern "C" __device__ unsigned ap_clusterid_z() {
  unsigned r;
  asm volatile("mov.u32 %0, %%clusterid.z;" : "=r"(r));
  return r;
}

// mov.u32 d, %nclusterid.x;
extern "C" __device__ unsigned ap_nclusterid_x() {
  unsigned r;
  asm volatile("mov.u32 %0, %%nclusterid.x;" : "=r"(r));
  return r;
}

// mov.u32 d, %nclusterid.y;
extern "C" __device__ unsigned ap_nclusterid_y() {
  unsigned r;
  asm volatile("mov.u32 %0, %%nclusterid.y;" : "=r"(r));
  return r;
}

// mov.u32 d, %nclusterid.z;
extern "C" __device__ unsigned ap_nclusterid_z() {
  unsigned r;
  asm volatile("mov.u32 %0, %%nclusterid.z;" : "=r"(r));
  return r;
}

// mov.u32 d, %cluster_ctaid.x;
extern "C" __device__ unsigned ap_cluster_ctaid_x() {
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_ctaid.x;" : "=r"(r));
  return r;
}

// mov.u32 d, %cluster_ctaid.y;
extern "C" __device__ unsigned ap_cluster_ctaid_y() {
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_ctaid.y;" : "=r"(r));
  return r;
}

// mov.u32 d, %cluster_ctaid.z;
extern "C" __device__ unsigned ap_cluster_ctaid_z() {
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_ctaid.z;" : "=r"(r));
  return r;
}

// mov.u32 d, %cluster_nctaid.x;
extern "C" __device__ unsigned ap_cluster_nctaid_x() {
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_nctaid.x;" : "=r"(r));
  return r;
}

// mov.u32 d, %cluster_nctaid.y;
extern "C" __device__ unsigned ap_cluster_nctaid_y() {
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_nctaid.y;" : "=r"(r));
  return r;
}

// mov.u32 d, %cluster_nctaid.z;
extern "C" __device__ unsigned ap_cluster_nctaid_z() {
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_nctaid.z;" : "=r"(r));
  return r;
}

// ---------------------------------------------------------------------------------------------
// Distributed shared memory
// ---------------------------------------------------------------------------------------------

// mapa.shared::cluster.u32 d, a, target_cta;   (PTX ISA 7.8, sm_90)
// A pure address computation (volatile like every shim: map once, outside loops, where you can).
extern "C" __device__ unsigned ap_mapa_shared_cluster(const void* addr, unsigned target_cta) {
  unsigned d;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(d) : "r"(ap_smem(addr)), "r"(target_cta));
  return d;
}

// ld.shared::cluster.u32 d, [a];   (PTX ISA 7.8, sm_90)
// volatile + "memory": the value may change across a cluster barrier, so the load must not be merged
// with another load of the same address or moved across one.
extern "C" __device__ unsigned ap_ld_shared_cluster_u32(unsigned a) {
  unsigned d;
  asm volatile("ld.shared::cluster.u32 %0, [%1];" : "=r"(d) : "r"(a) : "memory");
  return d;
}

// ld.shared::cluster.f32 d, [a];
extern "C" __device__ float ap_ld_shared_cluster_f32(unsigned a) {
  float d;
  asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(d) : "r"(a) : "memory");
  return d;
}

// ld.shared::cluster.u64 d, [a];
extern "C" __device__ unsigned long long ap_ld_shared_cluster_u64(unsigned a) {
  unsigned long long d;
  asm volatile("ld.shared::cluster.u64 %0, [%1];" : "=l"(d) : "r"(a) : "memory");
  return d;
}

// ld.shared::cluster.f64 d, [a];
extern "C" __device__ double ap_ld_shared_cluster_f64(unsigned a) {
  double d;
  asm volatile("ld.shared::cluster.f64 %0, [%1];" : "=d"(d) : "r"(a) : "memory");
  return d;
}

// st.shared::cluster.u32 [a], v;   (PTX ISA 7.8, sm_90)
extern "C" __device__ void ap_st_shared_cluster_u32(unsigned a, unsigned v) {
  asm volatile("st.shared::cluster.u32 [%0], %1;" ::"r"(a), "r"(v) : "memory");
}

// st.shared::cluster.f32 [a], v;
extern "C" __device__ void ap_st_shared_cluster_f32(unsigned a, float v) {
  asm volatile("st.shared::cluster.f32 [%0], %1;" ::"r"(a), "f"(v) : "memory");
}

// st.shared::cluster.u64 [a], v;
extern "C" __device__ void ap_st_shared_cluster_u64(unsigned a, unsigned long long v) {
  asm volatile("st.shared::cluster.u64 [%0], %1;" ::"r"(a), "l"(v) : "memory");
}

// st.shared::cluster.f64 [a], v;
extern "C" __device__ void ap_st_shared_cluster_f64(unsigned a, double v) {
  asm volatile("st.shared::cluster.f64 [%0], %1;" ::"r"(a), "d"(v) : "memory");
}

// ld.shared.f32 d, [a];   this CTA's own shared memory through a 32-bit .shared::cta address computed once
// (cvta_to_shared_u32), so that the loop does not rebuild the generic window's base for every load
extern "C" __device__ float ap_ld_shared_f32(unsigned a) {
  float d;
  asm volatile("ld.shared.f32 %0, [%1];" : "=f"(d) : "r"(a) : "memory");
  return d;
}
