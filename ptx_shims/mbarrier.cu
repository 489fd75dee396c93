// mbarrier: the shared-memory barrier object that counts thread arrivals and asynchronous
// transactions (bytes) per phase (PTX ISA 7.0, sm_80; try_wait PTX ISA 7.8, sm_90; tx-count and
// .shared::cluster forms PTX ISA 8.0, sm_90). Every barrier operand is a generic pointer to a
// 64-bit shared-memory word, converted here to its .shared::cta address.
#include "common.cuh"

// mbarrier.init.shared::cta.b64 [addr], count;   (PTX ISA 7.8, sm_80)
extern "C" __device__ void ap_mbarrier_init(void* addr, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(ap_smem(addr)), "r"(count) : "memory");
}

// mbarrier.arrive.shared::cta.b64 state, [addr];   (PTX ISA 7.8, sm_80; no .sem means .release.cta)
extern "C" __device__ unsigned long long ap_mbarrier_arrive(void* addr) {
  unsigned long long state;
  asm volatile("mbarrier.arrive.shared::cta.b64 %0, [%1];" : "=l"(state) : "r"(ap_smem(addr)) : "memory");
  return state;
}

// mbarrier.arrive.expect_tx.shared::cta.b64 state, [addr], tx_count;   (PTX ISA 8.0, sm_90)
extern "C" __device__ unsigned long long ap_mbarrier_arrive_expect_tx(void* addr, unsigned tx_count) {
  unsigned long long state;
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 %0, [%1], %2;"
               : "=l"(state)
               : "r"(ap_smem(addr)), "r"(tx_count)
               : "memory");
  return state;
}

// mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [addr], tx_count;   (PTX ISA 8.0, sm_90)
extern "C" __device__ void ap_mbarrier_expect_tx(void* addr, unsigned tx_count) {
  asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;" ::"r"(ap_smem(addr)), "r"(tx_count)
               : "memory");
}

// mbarrier.complete_tx.relaxed.cta.shared::cta.b64 [addr], tx_count;   (PTX ISA 8.0, sm_90)
extern "C" __device__ void ap_mbarrier_complete_tx(void* addr, unsigned tx_count) {
  asm volatile("mbarrier.complete_tx.relaxed.cta.shared::cta.b64 [%0], %1;" ::"r"(ap_smem(addr)), "r"(tx_count)
               : "memory");
}

// mbarrier.try_wait.parity.shared::cta.b64 p, [addr], phase_parity;   (PTX ISA 7.8, sm_90; .acquire.cta)
// One attempt: the hardware may suspend the thread for a system-dependent time, then returns p.
extern "C" __device__ unsigned ap_mbarrier_try_wait_parity(void* addr, unsigned phase_parity) {
  unsigned done;
  asm volatile(
      "{\n\t.reg .pred p;\n\t"
      "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
      "selp.u32 %0, 1, 0, p;\n\t}"
      : "=r"(done)
      : "r"(ap_smem(addr)), "r"(phase_parity)
      : "memory");
  return done;
}

// mbarrier.test_wait.parity.shared::cta.b64 p, [addr], phase_parity;   (PTX ISA 7.8, sm_80; .acquire.cta)
extern "C" __device__ unsigned ap_mbarrier_test_wait_parity(void* addr, unsigned phase_parity) {
  unsigned done;
  asm volatile(
      "{\n\t.reg .pred p;\n\t"
      "mbarrier.test_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
      "selp.u32 %0, 1, 0, p;\n\t}"
      : "=r"(done)
      : "r"(ap_smem(addr)), "r"(phase_parity)
      : "memory");
  return done;
}

// mbarrier.try_wait.parity.shared::cta.b64 p, [addr], phase_parity;   repeated until p (PTX ISA 7.8, sm_90)
// The one blocking primitive: the retry loop around a single try_wait.
extern "C" __device__ void ap_mbarrier_wait_parity(void* addr, unsigned phase_parity) {
  const unsigned bar = ap_smem(addr);
  unsigned done;
  do {
    asm volatile(
        "{\n\t.reg .pred p;\n\t"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
        "selp.u32 %0, 1, 0, p;\n\t}"
        : "=r"(done)
        : "r"(bar), "r"(phase_parity)
        : "memory");
  } while (!done);
}

// mbarrier.inval.shared::cta.b64 [addr];   (PTX ISA 7.8, sm_80)
extern "C" __device__ void ap_mbarrier_inval(void* addr) {
  asm volatile("mbarrier.inval.shared::cta.b64 [%0];" ::"r"(ap_smem(addr)) : "memory");
}

// mbarrier.arrive.release.cluster.shared::cluster.b64 _, [remote_addr];   (PTX ISA 8.0, sm_90)
// remote_addr is already a 32-bit .shared::cluster address (mapa.shared::cluster): no conversion.
// Release at cluster scope: ptxas puts MEMBAR.ALL.GPU before the arrive (every earlier memory access
// of the thread, global stores included, completes first).
extern "C" __device__ void ap_mbarrier_arrive_release_cluster_shared_cluster(unsigned remote_addr) {
  asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];" ::"r"(remote_addr) : "memory");
}

// mbarrier.arrive.shared::cluster.b64 _, [remote_addr];   (PTX ISA 8.0, sm_90)
// The default semantics, .release.cta: a bare SYNCS.ARRIVE, no fence. Hands a buffer back whose reads
// are complete (values in registers, or wgmma.wait_group returned); data written for a peer needs the
// .release.cluster form above.
extern "C" __device__ void ap_mbarrier_arrive_shared_cluster(unsigned remote_addr) {
  asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];" ::"r"(remote_addr) : "memory");
}
