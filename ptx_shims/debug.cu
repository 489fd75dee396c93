// Debug forms of the blocking primitives (ASYNCPIPE_DEBUG=1). A protocol mistake on the GPU is a hang:
// an mbarrier phase that never completes, a named barrier short of threads, a cluster barrier a CTA
// never reaches. Here every wait gives up after ap_debug.timeout_ns (a try/test_wait: after its thread's
// polls of one barrier and parity have failed that long), records which barrier, phase,
// block and thread in ap_debug (a __device__ global of the kernel's module that the host resets before
// and reads after each launch, asyncpipe/host/hang.py), and releases every other wait of the launch,
// so the kernel ends and the host raises HangError instead of hanging. Off by default: the normal
// shims do not link this file, so a kernel built without ASYNCPIPE_DEBUG has none of it in its SASS.
//
// A wait that gives up, and every wait after it, ends its thread (PTX `exit`) rather than return: a
// thread that ran on would arrive again on barriers whose phase never completed (an arrival-count
// underflow, which the H200 answers with CUDA_ERROR_LAUNCH_FAILED and a dead context, measured), and
// an exiting thread releases the CTA and cluster barriers it holds up (PTX ISA, exit). The launch's
// results are wrong; the host raises instead of returning them.
#include "common.cuh"

// What a wait that gave up leaves for the host. Field order and types are the host's
// (asyncpipe/host/hang.py RECORD): change both together.
struct ap_debug_record {
  unsigned long long timeout_ns;      // host: how long one wait may last
  unsigned long long cluster_words;   // host: device address of one u64 arrival count per cluster, 0 without clusters
  unsigned long long thread_arrivals; // host: device address of one u32 per thread of the grid (cluster barrier arrivals)
  unsigned long long poll_slots;      // host: device address of one ap_poll per thread of the grid (try/test_wait)
  unsigned nonce;                     // host: random per launch; tags the named-barrier state in shared memory
  unsigned recorded;                  // device: 1 once a wait has given up (every later wait returns at once)
  unsigned given_up;                  // device: waits that ran out of time
  unsigned released;                  // device: waits that returned because another had given up
  unsigned kind;                      // 1 mbarrier wait, 2 try_wait, 3 named barrier, 4 cluster barrier, 5 test_wait
  unsigned barrier;                   // mbarrier: shared-window offset; named: barrier id; cluster: linear cluster id
  unsigned phase;                     // mbarrier: parity waited for; named, cluster: which use of the barrier (0, 1, ...)
  unsigned arrived;                   // named, cluster: threads arrived at that use
  unsigned expected;                  // named, cluster: threads that use needs
  unsigned block[3];
  unsigned thread[3];
  unsigned smid;
  unsigned long long elapsed_ns;
};

extern "C" {
__device__ ap_debug_record ap_debug;
}

enum {
  AP_DEBUG_MBARRIER_WAIT = 1,
  AP_DEBUG_MBARRIER_TRY_WAIT = 2,
  AP_DEBUG_NAMED_BARRIER = 3,
  AP_DEBUG_CLUSTER_BARRIER = 4,
  AP_DEBUG_MBARRIER_TEST_WAIT = 5
};

// A thread's polls of one phase: since when its try/test_waits of (barrier, parity) `tag` have failed.
struct ap_poll {
  unsigned long long since;
  unsigned tag;      // (shared offset << 1 | parity) + 1; 0: no failed poll pending
  unsigned unused;
};

static __device__ __forceinline__ unsigned long long ap_now() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

static __device__ __forceinline__ unsigned ap_debug_aborted() {
  return *reinterpret_cast<volatile unsigned*>(&ap_debug.recorded);
}

// This wait ran out of time: the first one to get here fills the record; every wait counts itself.
static __device__ __noinline__ void ap_debug_give_up(unsigned kind, unsigned barrier, unsigned phase,
                                                     unsigned arrived, unsigned expected,
                                                     unsigned long long elapsed) {
  atomicAdd(&ap_debug.given_up, 1u);
  if (atomicCAS(&ap_debug.kind, 0u, kind) == 0u) {
    ap_debug.barrier = barrier;
    ap_debug.phase = phase;
    ap_debug.arrived = arrived;
    ap_debug.expected = expected;
    ap_debug.block[0] = blockIdx.x, ap_debug.block[1] = blockIdx.y, ap_debug.block[2] = blockIdx.z;
    ap_debug.thread[0] = threadIdx.x, ap_debug.thread[1] = threadIdx.y, ap_debug.thread[2] = threadIdx.z;
    unsigned smid;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
    ap_debug.smid = smid;
    ap_debug.elapsed_ns = elapsed;
    __threadfence();
  }
  atomicExch(&ap_debug.recorded, 1u);
}

static __device__ __forceinline__ void ap_exit() {
  asm volatile("exit;" ::: "memory");
}

// Ends this thread when its wait must stop: another wait gave up (counted as released), or this one
// ran out of time since `start` (recorded first). Returns only while the wait may go on. A kernel
// launched without the host's reset (timeout 0) waits as the normal forms do.
static __device__ __forceinline__ void ap_debug_check(unsigned long long start, unsigned kind, unsigned barrier,
                                                      unsigned phase, unsigned arrived, unsigned expected) {
  if (!ap_debug.timeout_ns) return;
  if (ap_debug_aborted()) {
    atomicAdd(&ap_debug.released, 1u);
    ap_exit();
  }
  const unsigned long long elapsed = ap_now() - start;
  if (elapsed > ap_debug.timeout_ns) {
    ap_debug_give_up(kind, barrier, phase, arrived, expected, elapsed);
    ap_exit();
  }
}

static __device__ __forceinline__ unsigned ap_try_wait(unsigned bar, unsigned parity) {
  unsigned done;
  asm volatile(
      "{\n\t.reg .pred p;\n\t"
      "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
      "selp.u32 %0, 1, 0, p;\n\t}"
      : "=r"(done)
      : "r"(bar), "r"(parity)
      : "memory");
  return done;
}

// ---------------------------------------------------------------------------------------------
// mbarrier
// ---------------------------------------------------------------------------------------------
static __device__ __forceinline__ unsigned ap_linear_block() {
  return blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
}

static __device__ __forceinline__ unsigned ap_linear_thread() {
  const unsigned t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  return ap_linear_block() * blockDim.x * blockDim.y * blockDim.z + t;
}

static __device__ __forceinline__ ap_poll* ap_poll_slot() {
  return ap_debug.poll_slots ? reinterpret_cast<ap_poll*>(ap_debug.poll_slots) + ap_linear_thread() : nullptr;
}

// mbarrier_wait_parity: the try_wait loop, bounded. It also ends the thread's pending polls.
extern "C" __device__ void ap_debug_mbarrier_wait_parity(void* addr, unsigned phase_parity) {
  const unsigned bar = ap_smem(addr);
  const unsigned long long start = ap_now();
  while (!ap_try_wait(bar, phase_parity)) ap_debug_check(start, AP_DEBUG_MBARRIER_WAIT, bar, phase_parity, 0, 0);
  if (ap_poll* slot = ap_poll_slot()) slot->tag = 0;
}

// One try_wait or test_wait that answered `done`: the answer itself, the poll unchanged. A thread
// that polls one (barrier, parity) and keeps failing for longer than the timeout gives up, however
// its loop is written (the failures in between may do other work; a success, or a blocking wait,
// ends the streak; polling another barrier or parity starts a new one).
static __device__ __forceinline__ unsigned ap_debug_poll(unsigned done, unsigned kind, unsigned bar, unsigned parity) {
  ap_poll* slot = ap_poll_slot();
  if (!slot || !ap_debug.timeout_ns) return done;
  if (done) {
    slot->tag = 0;
    return 1;
  }
  if (ap_debug_aborted()) {
    atomicAdd(&ap_debug.released, 1u);
    ap_exit();
  }
  const unsigned tag = ((bar << 1) | (parity & 1u)) + 1u;
  const unsigned long long now = ap_now();
  if (slot->tag != tag) {
    slot->tag = tag;
    slot->since = now;
  } else if (now - slot->since > ap_debug.timeout_ns) {
    ap_debug_give_up(kind, bar, parity, 0, 0, now - slot->since);
    ap_exit();
  }
  return 0;
}

extern "C" __device__ unsigned ap_debug_mbarrier_try_wait_parity(void* addr, unsigned phase_parity) {
  const unsigned bar = ap_smem(addr);
  return ap_debug_poll(ap_try_wait(bar, phase_parity), AP_DEBUG_MBARRIER_TRY_WAIT, bar, phase_parity);
}

extern "C" __device__ unsigned ap_debug_mbarrier_test_wait_parity(void* addr, unsigned phase_parity) {
  const unsigned bar = ap_smem(addr);
  unsigned done;
  asm volatile(
      "{\n\t.reg .pred p;\n\t"
      "mbarrier.test_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
      "selp.u32 %0, 1, 0, p;\n\t}"
      : "=r"(done)
      : "r"(bar), "r"(phase_parity)
      : "memory");
  return ap_debug_poll(done, AP_DEBUG_MBARRIER_TEST_WAIT, bar, phase_parity);
}

// ---------------------------------------------------------------------------------------------
// Named barriers: bar.sync / bar.arrive in software
// ---------------------------------------------------------------------------------------------
// A hardware barrier cannot be left, so each of the 16 ids is a 64-bit word in shared memory:
// tag (32 bits) | generation (16) | threads arrived (16). Shared memory is not cleared at launch; the
// tag (the launch's nonce ^ the block's linear index) marks a word this block has used, and a word
// with another tag counts as all zero. Every change is one 64-bit CAS, so no thread ever sees a
// count past b or a generation half changed.
static __shared__ unsigned long long ap_debug_named[16];

// Arrives at barrier `a` of `b` threads; returns the generation arrived in and sets *done when this
// arrival completed it.
static __device__ __forceinline__ unsigned ap_named_arrive(unsigned a, unsigned b, unsigned tag, bool* done) {
  unsigned long long* word = &ap_debug_named[a & 15];
  unsigned long long seen = *reinterpret_cast<volatile unsigned long long*>(word);
  for (;;) {
    const unsigned long long mine = (seen >> 32) == tag ? seen : (static_cast<unsigned long long>(tag) << 32);
    const unsigned gen = static_cast<unsigned>(mine >> 16) & 0xffffu;
    const unsigned count = static_cast<unsigned>(mine) & 0xffffu;
    *done = count + 1 >= b;
    const unsigned long long next =
        *done ? (static_cast<unsigned long long>(tag) << 32) | (static_cast<unsigned long long>((gen + 1) & 0xffffu) << 16)
              : mine + 1;
    const unsigned long long was = atomicCAS(word, seen, next);
    if (was == seen) return gen;
    seen = was;
  }
}

extern "C" __device__ void ap_debug_bar_sync(unsigned a, unsigned b) {
  const unsigned tag = ap_debug.nonce ^ ap_linear_block();
  __threadfence_block();
  bool done;
  const unsigned gen = ap_named_arrive(a, b, tag, &done);
  if (!done) {
    const volatile unsigned long long* word = &ap_debug_named[a & 15];
    const unsigned long long start = ap_now();
    for (;;) {
      const unsigned long long now = *word;
      if (((static_cast<unsigned>(now >> 16)) & 0xffffu) != gen) break;
      ap_debug_check(start, AP_DEBUG_NAMED_BARRIER, a, gen, static_cast<unsigned>(now) & 0xffffu, b);
      __nanosleep(64);
    }
  }
  __threadfence_block();
}

extern "C" __device__ void ap_debug_bar_arrive(unsigned a, unsigned b) {
  const unsigned tag = ap_debug.nonce ^ ap_linear_block();
  __threadfence_block();
  bool done;
  ap_named_arrive(a, b, tag, &done);
}

// ---------------------------------------------------------------------------------------------
// Cluster barrier: barrier.cluster.arrive / wait in software
// ---------------------------------------------------------------------------------------------
// One monotonic u64 arrival count per cluster in global memory and one u32 per thread, its own
// arrivals so far, both zeroed by the host before a cluster launch. A thread's k-th wait (k = its
// arrivals) is over when the cluster has counted k * (threads per cluster): each thread arrives once
// per use and waits before arriving again, so no arrival of use k+1 comes before use k is complete.
// Without a cluster launch (cluster_words 0) the hardware barrier runs, as a CTA barrier.
static __device__ __forceinline__ unsigned ap_linear_cluster() {
  unsigned x, y, z, nx, ny;
  asm("mov.u32 %0, %%clusterid.x;" : "=r"(x));
  asm("mov.u32 %0, %%clusterid.y;" : "=r"(y));
  asm("mov.u32 %0, %%clusterid.z;" : "=r"(z));
  asm("mov.u32 %0, %%nclusterid.x;" : "=r"(nx));
  asm("mov.u32 %0, %%nclusterid.y;" : "=r"(ny));
  return x + nx * (y + ny * z);
}

static __device__ __forceinline__ unsigned ap_cluster_threads() {
  unsigned n;
  asm("mov.u32 %0, %%cluster_nctarank;" : "=r"(n));
  return n * blockDim.x * blockDim.y * blockDim.z;
}

static __device__ __forceinline__ unsigned* ap_thread_arrivals() {
  return reinterpret_cast<unsigned*>(ap_debug.thread_arrivals) + ap_linear_thread();
}

static __device__ __forceinline__ void ap_cluster_arrive(bool release) {
  if (release) __threadfence();
  unsigned long long* counts = reinterpret_cast<unsigned long long*>(ap_debug.cluster_words);
  atomicAdd(&counts[ap_linear_cluster()], 1ull);
  *ap_thread_arrivals() += 1;
}

extern "C" __device__ void ap_debug_barrier_cluster_arrive() {
  if (!ap_debug.cluster_words) {
    asm volatile("barrier.cluster.arrive;" ::: "memory");
    return;
  }
  ap_cluster_arrive(true);
}

extern "C" __device__ void ap_debug_barrier_cluster_arrive_relaxed() {
  if (!ap_debug.cluster_words) {
    asm volatile("barrier.cluster.arrive.relaxed;" ::: "memory");
    return;
  }
  ap_cluster_arrive(false);
}

extern "C" __device__ void ap_debug_barrier_cluster_wait() {
  if (!ap_debug.cluster_words) {
    asm volatile("barrier.cluster.wait;" ::: "memory");
    return;
  }
  const unsigned cluster = ap_linear_cluster();
  const volatile unsigned long long* count = reinterpret_cast<unsigned long long*>(ap_debug.cluster_words) + cluster;
  const unsigned uses = *ap_thread_arrivals();
  const unsigned n = ap_cluster_threads();
  const unsigned long long target = static_cast<unsigned long long>(uses) * n;
  const unsigned long long start = ap_now();
  for (;;) {
    const unsigned long long now = *count;
    if (now >= target) break;
    ap_debug_check(start, AP_DEBUG_CLUSTER_BARRIER, cluster, uses - 1, static_cast<unsigned>(now - (target - n)), n);
    __nanosleep(64);
  }
  __threadfence();
}
