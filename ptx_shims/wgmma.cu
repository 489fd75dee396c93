// wgmma: the warpgroup-level asynchronous matrix multiply-accumulate of Hopper (PTX ISA 8.0, sm_90a),
// its fence / commit / wait, setmaxnreg (PTX ISA 8.0, sm_90a), and the shared-memory address that matrix
// descriptors encode.
//
// Accumulators. wgmma.mma_async.m64nNk16 with .f32 accumulators reads and writes N/2 float registers per
// thread (32, 64, 128 for N = 64, 128, 256). numba cannot pass that many values by value, so every mma
// shim takes `float* d`, the address of a `cuda.local.array(N/2, float32)` in the kernel, and names
// d[0] .. d[N/2-1] as "+f" operands. After LTO inlines the shim, the local array's every access has a
// constant offset and LLVM's SROA turns it into N/2 registers: the SASS holds HGMMA with no local memory
// (tests/ptx/test_wgmma.py proves it for every form). Index the array only with constants (unroll).
//
// Immediates (imm-trans-a/b, wait_group N, setmaxnreg's count) are chosen by a switch that LTO folds
// when the argument is a compile-time constant. imm-scale-a and imm-scale-b are always 1 (no negation).
//
// FP8 (.e4m3 / .e5m2 inputs, m64nNk32): the same N/2 .f32 accumulators, but no imm-trans-a/imm-trans-b
// operands (the PTX ISA allows only K-major A and B for 8-bit types), so each FP8 shim is a single asm
// statement with no switch; A in registers is four .b32 holding four 8-bit values each.
#include "common.cuh"

// ---- accumulator operand lists: d[0..N/2-1], in and out, in the PTX register-list order ---------------
#define AP_D8(i)                                                                                        \
  "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]),            \
      "+f"(d[i + 6]), "+f"(d[i + 7])
#define AP_D32 AP_D8(0), AP_D8(8), AP_D8(16), AP_D8(24)
#define AP_D64 AP_D32, AP_D8(32), AP_D8(40), AP_D8(48), AP_D8(56)
#define AP_D96 AP_D64, AP_D8(64), AP_D8(72), AP_D8(80), AP_D8(88)
#define AP_D128 AP_D64, AP_D8(64), AP_D8(72), AP_D8(80), AP_D8(88), AP_D8(96), AP_D8(104), AP_D8(112), AP_D8(120)

#define AP_D32_REGS \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15," \
  " %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}"
#define AP_D64_REGS \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15," \
  " %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31," \
  " %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47," \
  " %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}"
#define AP_D96_REGS \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15," \
  " %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31," \
  " %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47," \
  " %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63," \
  " %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79," \
  " %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95}"
#define AP_D128_REGS \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15," \
  " %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31," \
  " %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47," \
  " %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63," \
  " %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79," \
  " %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95," \
  " %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111," \
  " %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}"

// The opcode of a shape (SHAPE: "m64n64k16" ...) with .f32 accumulators and T (.bf16 or .f16) inputs.
#define AP_OP(SHAPE, T) "wgmma.mma_async.sync.aligned." SHAPE ".f32." T "." T
// The asm template of the form with A and B in shared memory: d, a-desc (%A), b-desc (%B), scale-d (%S, a
// predicate set from an int), imm-scale-a = imm-scale-b = 1, imm-trans-a (TA), imm-trans-b (TB).
#define AP_SS(OP, D, A, B, S, TA, TB)                                                                  \
  "{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %" S ", 0;\n\t" OP " " D ", %" A ", %" B ", p, 1, 1, " TA ", " TB \
  ";\n\t}"
// The asm template of the form with A in registers: d, {a0, a1, a2, a3} (A: "{%x, ...}"), b-desc (%B),
// scale-d (%S), imm-scale-a = imm-scale-b = 1, imm-trans-b (TB).
#define AP_RS(OP, D, A, B, S, TB)                                                                      \
  "{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %" S ", 0;\n\t" OP " " D ", " A ", %" B ", p, 1, 1, " TB ";\n\t}"
// The FP8 forms' templates: the same operands without the trans immediates (8-bit A and B are K-major).
#define AP_SS8(OP, D, A, B, S) \
  "{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %" S ", 0;\n\t" OP " " D ", %" A ", %" B ", p, 1, 1;\n\t}"
#define AP_RS8(OP, D, A, B, S) \
  "{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %" S ", 0;\n\t" OP " " D ", " A ", %" B ", p, 1, 1;\n\t}"
#define AP_SS_IN "l"(a_desc), "l"(b_desc), "r"(scale_d)
#define AP_RS_IN "r"(a0), "r"(a1), "r"(a2), "r"(a3), "l"(b_desc), "r"(scale_d)

// ---- fence / commit / wait -------------------------------------------------------------------------------

// wgmma.fence.sync.aligned;   (PTX ISA 8.0, sm_90a)
extern "C" __device__ void ap_wgmma_fence_sync_aligned() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }

// wgmma.commit_group.sync.aligned;   (PTX ISA 8.0, sm_90a)
extern "C" __device__ void ap_wgmma_commit_group_sync_aligned() {
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}

// wgmma.wait_group.sync.aligned N;   (PTX ISA 8.0, sm_90a)
// N is an immediate: the switch folds away when N is a compile-time constant. N > 7 waits as for 7 and
// N < 0 as for 0 (waiting for more groups than asked is always safe).
extern "C" __device__ void ap_wgmma_wait_group_sync_aligned(int n) {
  switch (n < 0 ? 0 : n) {
    case 0: asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory"); break;
    case 1: asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory"); break;
    case 2: asm volatile("wgmma.wait_group.sync.aligned 2;" ::: "memory"); break;
    case 3: asm volatile("wgmma.wait_group.sync.aligned 3;" ::: "memory"); break;
    case 4: asm volatile("wgmma.wait_group.sync.aligned 4;" ::: "memory"); break;
    case 5: asm volatile("wgmma.wait_group.sync.aligned 5;" ::: "memory"); break;
    case 6: asm volatile("wgmma.wait_group.sync.aligned 6;" ::: "memory"); break;
    default: asm volatile("wgmma.wait_group.sync.aligned 7;" ::: "memory"); break;
  }
}

// ---- mma_async ------------------------------------------------------------------------------------------

// wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16
//     d, a-desc, b-desc, scale-d, imm-scale-a, imm-scale-b, imm-trans-a, imm-trans-b;
// PTX ISA 8.0, sm_90a. A and B from shared memory through their matrix descriptors; d: 32 floats.
extern "C" __device__ void ap_wgmma_mma_async_sync_aligned_m64n64k16_f32_bf16_bf16_ss(
    float* d, unsigned long long a_desc, unsigned long long b_desc, int scale_d, int imm_trans_a, int imm_trans_b) {
  switch ((imm_trans_a != 0) * 2 + (imm_trans_b != 0)) {
    case 0: asm volatile(AP_SS(AP_OP("m64n64k16", "bf16"), AP_D32_REGS, "32", "33", "34", "0", "0")
                         : AP_D32 : AP_SS_IN : "memory");
            break;
    case 1: asm volatile(AP_SS(AP_OP("m64n64k16", "bf16"), AP_D32_REGS, "32", "33", "34", "0", "1")
                         : AP_D32 : AP_SS_IN : "memory");
            break;
    case 2: asm volatile(AP_SS(AP_OP("m64n64k16", "bf16"), AP_D32_REGS, "32", "33", "34", "1", "0")
                         : AP_D32 : AP_SS_IN : "memory");
            break;
    case 3: asm volatile(AP_SS(AP_OP("m64n64k16", "bf16"), AP_D32_REGS, "32", "33", "34", "1", "1")
                         : AP_D32 : AP_SS_IN : "memory");
            break;
  }
}

// wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16
//     d, a, b-desc, scale-d, imm-scale-a, imm-scale-b, imm-trans-b;
// PTX ISA 8.0, sm_90a. A from registers (four .b32, two bf16 each), B from shared memory; d: 32 floats.
extern "C" __device__ void ap_wgmma_mma_async_sync_aligned_m64n64k16_f32_bf16_bf16_rs(
    float* d, unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned long long b_desc, int scale_d, int imm_trans_b) {
  switch (imm_trans_b != 0) {
    case 0: asm volatile(AP_RS(AP_OP("m64n64k16", "bf16"), AP_D32_REGS, "{%32, %33, %34, %35}", "36", "37", "0")
                         : AP_D32 : AP_RS_IN : "memory");
            break;
    case 1: asm volatile(AP_RS(AP_OP("m64n64k16", "bf16"), AP_D32_REGS, "{%32, %33, %34, %35}", "36", "37", "1")
                         : AP_D32 : AP_RS_IN : "memory");
            break;
  }
}

// wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16
//     d, a-desc, b-desc, scale-d, imm-scale-a, imm-scale-b, imm-trans-a, imm-trans-b;
// PTX ISA 8.0, sm_90a. A and B from shared memory through their matrix descriptors; d: 64 floats.
extern "C" __device__ void ap_wgmma_mma_async_sync_aligned_m64n128k16_f32_bf16_bf16_ss(
    float* d, unsigned long long a_desc, unsigned long long b_desc, int scale_d, int imm_trans_a, int imm_trans_b) {
  switch ((imm_trans_a != 0) * 2 + (imm_trans_b != 0)) {
    case 0: asm volatile(AP_SS(AP_OP("m64n128k16", "bf16"), AP_D64_REGS, "64", "65", "66", "0", "0")
                         : AP_D64 : AP_SS_IN : "memory");
            break;
    case 1: asm volatile(AP_SS(AP_OP("m64n128k16", "bf16"), AP_D64_REGS, "64", "65", "66", "0", "1")
                         : AP_D64 : AP_SS_IN : "memory");
            break;
    case 2: asm volatile(AP_SS(AP_OP("m64n128k16", "bf16"), AP_D64_REGS, "64", "65", "66", "1", "0")
                         : AP_D64 : AP_SS_IN : "memory");
            break;
    case 3: asm volatile(AP_SS(AP_OP("m64n128k16", "bf16"), AP_D64_REGS, "64", "65", "66", "1", "1")
                         : AP_D64 : AP_SS_IN : "memory");
            break;
  }
}

// wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16
//     d, a, b-desc, scale-d, imm-scale-a, imm-scale-b, imm-trans-b;
// PTX ISA 8.0, sm_90a. A from registers (four .b32, two bf16 each), B from shared memory; d: 64 floats.
extern "C" __device__ void ap_wgmma_mma_async_sync_aligned_m64n128k16_f32_bf16_bf16_rs(
    float* d, unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned long long b_desc, int scale_d, int imm_trans_b) {
  switch (imm_trans_b != 0) {
    case 0: asm volatile(AP_RS(AP_OP("m64n128k16", "bf16"), AP_D64_REGS, "{%64, %65, %66, %67}", "68", "69", "0")
                         : AP_D64 : AP_RS_IN : "memory");
            break;
    case 1: asm volatile(AP_RS(AP_OP("m64n128k16", "bf16"), AP_D64_REGS, "{%64, %65, %66, %67}", "68", "69", "1")
                         : AP_D64 : AP_RS_IN : "memory");
            break;
  }
}

// wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16
//     d, a-desc, b-desc, scale-d, imm-scale-a, imm-scale-b, imm-trans-a, imm-trans-b;
// PTX ISA 8.0, sm_90a. A and B from shared memory through their matrix descriptors; d: 128 floats.
extern "C" __device__ void ap_wgmma_mma_async_sync_aligned_m64n256k16_f32_bf16_bf16_ss(
    float* d, unsigned long long a_desc, unsigned long long b_desc, int scale_d, int imm_trans_a, int imm_trans_b) {
  switch ((imm_trans_a != 0) * 2 + (imm_trans_b != 0)) {
    case 0: asm volatile(AP_SS(AP_OP("m64n256k16", "bf16"), AP_D128_REGS, "128", "129", "130", "0", "0")
                         : AP_D128 : AP_SS_IN : "memory");
            break;
    case 1: asm volatile(AP_SS(AP_OP("m64n256k16", "bf16"), AP_D128_REGS, "128", "129", "130", "0", "1")
                         : AP_D128 : AP_SS_IN : "memory");
            break;
    case 2: asm volatile(AP_SS(AP_OP("m64n256k16", "bf16"), AP_D128_REGS, "128", "129", "130", "1", "0")
                         : AP_D128 : AP_SS_IN : "memory");
            break;
    case 3: asm volatile(AP_SS(AP_OP("m64n256k16", "bf16"), AP_D128_REGS, "128", "129", "130", "1", "1")
                         : AP_D128 : AP_SS_IN : "memory");
            break;
  }
}

// wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16
//     d, a, b-desc, scale-d, imm-scale-a, imm-scale-b, imm-trans-b;
// PTX ISA 8.0, sm_90a. A from registers (four .b32, two bf16 each), B from shared memory; d: 128 floats.
extern "C" __device__ void ap_wgmma_mma_async_sync_aligned_m64n256k16_f32_bf16_bf16_rs(
    float* d, unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned long long b_desc, int scale_d, int imm_trans_b) {
  switch (imm_trans_b != 0) {
    case 0: asm volatile(AP_RS(AP_OP("m64n256k16", "bf16"), AP_D128_REGS, "{%128, %129, %130, %131}", "132", "133", "0")
                         : AP_D128 : AP_RS_IN : "memory");
            break;
    case 1: asm volatile(AP_RS(AP_OP("m64n256k16", "bf16"), AP_D128_REGS, "{%128, %129, %130, %131}", "132", "133", "1")
                         : AP_D128 : AP_RS_IN : "memory");
            break;
  }
}

// wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16
//     d, a-desc, b-desc, scale-d, imm-scale-a, imm-scale-b, imm-trans-a, imm-trans-b;
// PTX ISA 8.0, sm_90a. A and B from shared memory through their matrix descriptors; d: 32 floats.
extern "C" __device__ void ap_wgmma_mma_async_sync_aligned_m64n64k16_f32_f16_f16_ss(
    float* d, unsigned long long a_desc, unsigned long long b_desc, int scale_d, int imm_trans_a, int imm_trans_b) {
  switch ((imm_trans_a != 0) * 2 + (imm_trans_b != 0)) {
    case 0: asm volatile(AP_SS(AP_OP("m64n64k16", "f16"), AP_D32_REGS, "32", "33", "34", "0", "0")
                         : AP_D32 : AP_SS_IN : "memory");
            break;
    case 1: asm volatile(AP_SS(AP_OP("m64n64k16", "f16"), AP_D32_REGS, "32", "33", "34", "0", "1")
                         : AP_D32 : AP_SS_IN : "memory");
            break;
    case 2: asm volatile(AP_SS(AP_OP("m64n64k16", "f16"), AP_D32_REGS, "32", "33", "34", "1", "0")
                         : AP_D32 : AP_SS_IN : "memory");
            break;
    case 3: asm volatile(AP_SS(AP_OP("m64n64k16", "f16"), AP_D32_REGS, "32", "33", "34", "1", "1")
                         : AP_D32 : AP_SS_IN : "memory");
            break;
  }
}

// wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16
//     d, a, b-desc, scale-d, imm-scale-a, imm-scale-b, imm-trans-b;
// PTX ISA 8.0, sm_90a. A from registers (four .b32, two f16 each), B from shared memory; d: 32 floats.
extern "C" __device__ void ap_wgmma_mma_async_sync_aligned_m64n64k16_f32_f16_f16_rs(
    float* d, unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned long long b_desc, int scale_d, int imm_trans_b) {
  switch (imm_trans_b != 0) {
    case 0: asm volatile(AP_RS(AP_OP("m64n64k16", "f16"), AP_D32_REGS, "{%32, %33, %34, %35}", "36", "37", "0")
                         : AP_D32 : AP_RS_IN : "memory");
            break;
    case 1: asm volatile(AP_RS(AP_OP("m64n64k16", "f16"), AP_D32_REGS, "{%32, %33, %34, %35}", "36", "37", "1")
                         : AP_D32 : AP_RS_IN : "memory");
            break;
  }
}

// wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16
//     d, a-desc, b-desc, scale-d, imm-scale-a, imm-scale-b, imm-trans-a, imm-trans-b;
// PTX ISA 8.0, sm_90a. A and B from shared memory through their matrix descriptors; d: 64 floats.
extern "C" __device__ void ap_wgmma_mma_async_sync_aligned_m64n128k16_f32_f16_f16_ss(
    float* d, unsigned long long a_desc, unsigned long long b_desc, int scale_d, int imm_trans_a, int imm_trans_b) {
  switch ((imm_trans_a != 0) * 2 + (imm_trans_b != 0)) {
    case 0: asm volatile(AP_SS(AP_OP("m64n128k16", "f16"), AP_D64_REGS, "64", "65", "66", "0", "0")
                         : AP_D64 : AP_SS_IN : "memory");
            break;
    case 1: asm volatile(AP_SS(AP_OP("m64n128k16", "f16"), AP_D64_REGS, "64", "65", "66", "0", "1")
                         : AP_D64 : AP_SS_IN : "memory");
            break;
    case 2: asm volatile(AP_SS(AP_OP("m64n128k16", "f16"), AP_D64_REGS, "64", "65", "66", "1", "0")
                         : AP_D64 : AP_SS_IN : "memory");
            break;
    case 3: asm volatile(AP_SS(AP_OP("m64n128k16", "f16"), AP_D64_REGS, "64", "65", "66", "1", "1")
                         : AP_D64 : AP_SS_IN : "memory");
            break;
  }
}

// wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16
//     d, a, b-desc, scale-d, imm-scale-a, imm-scale-b, imm-trans-b;
// PTX ISA 8.0, sm_90a. A from registers (four .b32, two f16 each), B from shared memory; d: 64 floats.
extern "C" __device__ void ap_wgmma_mma_async_sync_aligned_m64n128k16_f32_f16_f16_rs(
    float* d, unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned long long b_desc, int scale_d, int imm_trans_b) {
  switch (imm_trans_b != 0) {
    case 0: asm volatile(AP_RS(AP_OP("m64n128k16", "f16"), AP_D64_REGS, "{%64, %65, %66, %67}", "68", "69", "0")
                         : AP_D64 : AP_RS_IN : "memory");
            break;
    case 1: asm volatile(AP_RS(AP_OP("m64n128k16", "f16"), AP_D64_REGS, "{%64, %65, %66, %67}", "68", "69", "1")
                         : AP_D64 : AP_RS_IN : "memory");
            break;
  }
}

// wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16
//     d, a-desc, b-desc, scale-d, imm-scale-a, imm-scale-b, imm-trans-a, imm-trans-b;
// PTX ISA 8.0, sm_90a. A and B from shared memory through their matrix descriptors; d: 128 floats.
extern "C" __device__ void ap_wgmma_mma_async_sync_aligned_m64n256k16_f32_f16_f16_ss(
    float* d, unsigned long long a_desc, unsigned long long b_desc, int scale_d, int imm_trans_a, int imm_trans_b) {
  switch ((imm_trans_a != 0) * 2 + (imm_trans_b != 0)) {
    case 0: asm volatile(AP_SS(AP_OP("m64n256k16", "f16"), AP_D128_REGS, "128", "129", "130", "0", "0")
                         : AP_D128 : AP_SS_IN : "memory");
            break;
    case 1: asm volatile(AP_SS(AP_OP("m64n256k16", "f16"), AP_D128_REGS, "128", "129", "130", "0", "1")
                         : AP_D128 : AP_SS_IN : "memory");
            break;
    case 2: asm volatile(AP_SS(AP_OP("m64n256k16", "f16"), AP_D128_REGS, "128", "129", "130", "1", "0")
                         : AP_D128 : AP_SS_IN : "memory");
            break;
    case 3: asm volatile(AP_SS(AP_OP("m64n256k16", "f16"), AP_D128_REGS, "128", "129", "130", "1", "1")
                         : AP_D128 : AP_SS_IN : "memory");
            break;
  }
}

// wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16
//     d, a, b-desc, scale-d, imm-scale-a, imm-scale-b, imm-trans-b;
// PTX ISA 8.0, sm_90a. A from registers (four .b32, two f16 each), B from shared memory; d: 128 floats.
extern "C" __device__ void ap_wgmma_mma_async_sync_aligned_m64n256k16_f32_f16_f16_rs(
    float* d, unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned long long b_desc, int scale_d, int imm_trans_b) {
  switch (imm_trans_b != 0) {
    case 0: asm volatile(AP_RS(AP_OP("m64n256k16", "f16"), AP_D128_REGS, "{%128, %129, %130, %131}", "132", "133", "0")
                         : AP_D128 : AP_RS_IN : "memory");
            break;
    case 1: asm volatile(AP_RS(AP_OP("m64n256k16", "f16"), AP_D128_REGS, "{%128, %129, %130, %131}", "132", "133", "1")
                         : AP_D128 : AP_RS_IN : "memory");
            break;
  }
}

// ---- mma_async, FP8: .e4m3 / .e5m2 inputs, k32, A and B K-major -------------------------------------

// wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3
//     d, a-desc, b-desc, scale-d, imm-scale-a, imm-scale-b;
// PTX ISA 8.0, sm_90a. A and B (K-major) from shared memory through their matrix descriptors; d: 32 floats.
extern "C" __device__ void ap_wgmma_mma_async_sync_aligned_m64n64k32_f32_e4m3_e4m3_ss(
    float* d, unsigned long long a_desc, unsigned long long b_desc, int scale_d) {
  asm volatile(AP_SS8(AP_OP("m64n64k32", "e4m3"), AP_D32_REGS, "32", "33", "34") : AP_D32 : AP_SS_IN : "memory");
}

// wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3
//     d, a, b-desc, scale-d, imm-scale-a, imm-scale-b;
// PTX ISA 8.0, sm_90a. A from registers (four .b32, four e4m3 each, lowest byte first), B (K-major) from shared
// memory; d: 32 floats.
extern "C" __device__ void ap_wgmma_mma_async_sync_aligned_m64n64k32_f32_e4m3_e4m3_rs(
    float* d, unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned long long b_desc, int scale_d) {
  asm volatile(AP_RS8(AP_OP("m64n64k32", "e4m3"), AP_D32_REGS, "{%32, %33, %34, %35}", "36", "37")
               : AP_D32 : AP_RS_IN : "memory");
}

// wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3
//     d, a-desc, b-desc, scale-d, imm-scale-a, imm-scale-b;
// PTX ISA 8.0, sm_90a. A and B (K-major) from shared memory through their matrix descriptors; d: 64 floats.
extern "C" __device__ void ap_wgmma_mma_async_sync_aligned_m64n128k32_f32_e4m3_e4m3_ss(
    float* d, unsigned long long a_desc, unsigned long long b_desc, int scale_d) {
  asm volatile(AP_SS8(AP_OP("m64n128k32", "e4m3"), AP_D64_REGS, "64", "65", "66") : AP_D64 : AP_SS_IN : "memory");
}

// wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3
//     d, a, b-desc, scale-d, imm-scale-a, imm-scale-b;
// PTX ISA 8.0, sm_90a. A from registers (four .b32, four e4m3 each, lowest byte first), B (K-major) from shared
// memory; d: 64 floats.
extern "C" __device__ void ap_wgmma_mma_async_sync_aligned_m64n128k32_f32_e4m3_e4m3_rs(
    float* d, unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned long long b_desc, int scale_d) {
  asm volatile(AP_RS8(AP_OP("m64n128k32", "e4m3"), AP_D64_REGS, "{%64, %65, %66, %67}", "68", "69")
               : AP_D64 : AP_RS_IN : "memory");
}

// wgmma.mma_async.sync.aligned.m64n192k32.f32.e4m3.e4m3
//     d, a-desc, b-desc, scale-d, imm-scale-a, imm-scale-b;
// PTX ISA 8.0, sm_90a. A and B (K-major) from shared memory through their matrix descriptors; d: 96 floats.
extern "C" __device__ void ap_wgmma_mma_async_sync_aligned_m64n192k32_f32_e4m3_e4m3_ss(
    float* d, unsigned long long a_desc, unsigned long long b_desc, int scale_d) {
  asm volatile(AP_SS8(AP_OP("m64n192k32", "e4m3"), AP_D96_REGS, "96", "97", "98") : AP_D96 : AP_SS_IN : "memory");
}

// wgmma.mma_async.sync.aligned.m64n192k32.f32.e4m3.e4m3
//     d, a, b-desc, scale-d, imm-scale-a, imm-scale-b;
// PTX ISA 8.0, sm_90a. A from registers (four .b32, four e4m3 each, lowest byte first), B (K-major) from shared
// memory; d: 96 floats.
extern "C" __device__ void ap_wgmma_mma_async_sync_aligned_m64n192k32_f32_e4m3_e4m3_rs(
    float* d, unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned long long b_desc, int scale_d) {
  asm volatile(AP_RS8(AP_OP("m64n192k32", "e4m3"), AP_D96_REGS, "{%96, %97, %98, %99}", "100", "101")
               : AP_D96 : AP_RS_IN : "memory");
}

// wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3
//     d, a-desc, b-desc, scale-d, imm-scale-a, imm-scale-b;
// PTX ISA 8.0, sm_90a. A and B (K-major) from shared memory through their matrix descriptors; d: 128 floats.
extern "C" __device__ void ap_wgmma_mma_async_sync_aligned_m64n256k32_f32_e4m3_e4m3_ss(
    float* d, unsigned long long a_desc, unsigned long long b_desc, int scale_d) {
  asm volatile(AP_SS8(AP_OP("m64n256k32", "e4m3"), AP_D128_REGS, "128", "129", "130") : AP_D128 : AP_SS_IN : "memory");
}

// wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3
//     d, a, b-desc, scale-d, imm-scale-a, imm-scale-b;
// PTX ISA 8.0, sm_90a. A from registers (four .b32, four e4m3 each, lowest byte first), B (K-major) from shared
// memory; d: 128 floats.
extern "C" __device__ void ap_wgmma_mma_async_sync_aligned_m64n256k32_f32_e4m3_e4m3_rs(
    float* d, unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned long long b_desc, int scale_d) {
  asm volatile(AP_RS8(AP_OP("m64n256k32", "e4m3"), AP_D128_REGS, "{%128, %129, %130, %131}", "132", "133")
               : AP_D128 : AP_RS_IN : "memory");
}

// wgmma.mma_async.sync.aligned.m64n64k32.f32.e5m2.e5m2
//     d, a-desc, b-desc, scale-d, imm-scale-a, imm-scale-b;
// PTX ISA 8.0, sm_90a. A and B (K-major) from shared memory through their matrix descriptors; d: 32 floats.
extern "C" __device__ void ap_wgmma_mma_async_sync_aligned_m64n64k32_f32_e5m2_e5m2_ss(
    float* d, unsigned long long a_desc, unsigned long long b_desc, int scale_d) {
  asm volatile(AP_SS8(AP_OP("m64n64k32", "e5m2"), AP_D32_REGS, "32", "33", "34") : AP_D32 : AP_SS_IN : "memory");
}

// wgmma.mma_async.sync.aligned.m64n64k32.f32.e5m2.e5m2
//     d, a, b-desc, scale-d, imm-scale-a, imm-scale-b;
// PTX ISA 8.0, sm_90a. A from registers (four .b32, four e5m2 each, lowest byte first), B (K-major) from shared
// memory; d: 32 floats.
extern "C" __device__ void ap_wgmma_mma_async_sync_aligned_m64n64k32_f32_e5m2_e5m2_rs(
    float* d, unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned long long b_desc, int scale_d) {
  asm volatile(AP_RS8(AP_OP("m64n64k32", "e5m2"), AP_D32_REGS, "{%32, %33, %34, %35}", "36", "37")
               : AP_D32 : AP_RS_IN : "memory");
}

// wgmma.mma_async.sync.aligned.m64n128k32.f32.e5m2.e5m2
//     d, a-desc, b-desc, scale-d, imm-scale-a, imm-scale-b;
// PTX ISA 8.0, sm_90a. A and B (K-major) from shared memory through their matrix descriptors; d: 64 floats.
extern "C" __device__ void ap_wgmma_mma_async_sync_aligned_m64n128k32_f32_e5m2_e5m2_ss(
    float* d, unsigned long long a_desc, unsigned long long b_desc, int scale_d) {
  asm volatile(AP_SS8(AP_OP("m64n128k32", "e5m2"), AP_D64_REGS, "64", "65", "66") : AP_D64 : AP_SS_IN : "memory");
}

// wgmma.mma_async.sync.aligned.m64n128k32.f32.e5m2.e5m2
//     d, a, b-desc, scale-d, imm-scale-a, imm-scale-b;
// PTX ISA 8.0, sm_90a. A from registers (four .b32, four e5m2 each, lowest byte first), B (K-major) from shared
// memory; d: 64 floats.
extern "C" __device__ void ap_wgmma_mma_async_sync_aligned_m64n128k32_f32_e5m2_e5m2_rs(
    float* d, unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned long long b_desc, int scale_d) {
  asm volatile(AP_RS8(AP_OP("m64n128k32", "e5m2"), AP_D64_REGS, "{%64, %65, %66, %67}", "68", "69")
               : AP_D64 : AP_RS_IN : "memory");
}

// wgmma.mma_async.sync.aligned.m64n192k32.f32.e5m2.e5m2
//     d, a-desc, b-desc, scale-d, imm-scale-a, imm-scale-b;
// PTX ISA 8.0, sm_90a. A and B (K-major) from shared memory through their matrix descriptors; d: 96 floats.
extern "C" __device__ void ap_wgmma_mma_async_sync_aligned_m64n192k32_f32_e5m2_e5m2_ss(
    float* d, unsigned long long a_desc, unsigned long long b_desc, int scale_d) {
  asm volatile(AP_SS8(AP_OP("m64n192k32", "e5m2"), AP_D96_REGS, "96", "97", "98") : AP_D96 : AP_SS_IN : "memory");
}

// wgmma.mma_async.sync.aligned.m64n192k32.f32.e5m2.e5m2
//     d, a, b-desc, scale-d, imm-scale-a, imm-scale-b;
// PTX ISA 8.0, sm_90a. A from registers (four .b32, four e5m2 each, lowest byte first), B (K-major) from shared
// memory; d: 96 floats.
extern "C" __device__ void ap_wgmma_mma_async_sync_aligned_m64n192k32_f32_e5m2_e5m2_rs(
    float* d, unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned long long b_desc, int scale_d) {
  asm volatile(AP_RS8(AP_OP("m64n192k32", "e5m2"), AP_D96_REGS, "{%96, %97, %98, %99}", "100", "101")
               : AP_D96 : AP_RS_IN : "memory");
}

// wgmma.mma_async.sync.aligned.m64n256k32.f32.e5m2.e5m2
//     d, a-desc, b-desc, scale-d, imm-scale-a, imm-scale-b;
// PTX ISA 8.0, sm_90a. A and B (K-major) from shared memory through their matrix descriptors; d: 128 floats.
extern "C" __device__ void ap_wgmma_mma_async_sync_aligned_m64n256k32_f32_e5m2_e5m2_ss(
    float* d, unsigned long long a_desc, unsigned long long b_desc, int scale_d) {
  asm volatile(AP_SS8(AP_OP("m64n256k32", "e5m2"), AP_D128_REGS, "128", "129", "130") : AP_D128 : AP_SS_IN : "memory");
}

// wgmma.mma_async.sync.aligned.m64n256k32.f32.e5m2.e5m2
//     d, a, b-desc, scale-d, imm-scale-a, imm-scale-b;
// PTX ISA 8.0, sm_90a. A from registers (four .b32, four e5m2 each, lowest byte first), B (K-major) from shared
// memory; d: 128 floats.
extern "C" __device__ void ap_wgmma_mma_async_sync_aligned_m64n256k32_f32_e5m2_e5m2_rs(
    float* d, unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned long long b_desc, int scale_d) {
  asm volatile(AP_RS8(AP_OP("m64n256k32", "e5m2"), AP_D128_REGS, "{%128, %129, %130, %131}", "132", "133")
               : AP_D128 : AP_RS_IN : "memory");
}

// ---- setmaxnreg ----------------------------------------------------------------------------------------
// The count is an immediate in 24..256, a multiple of 8: the switch folds away when it is a compile-time
// constant. Another value is clamped into 24..256 and rounded down to a multiple of 8.

// setmaxnreg.inc.sync.aligned.u32 imm-reg-count;   (PTX ISA 8.0, sm_90a)
extern "C" __device__ void ap_setmaxnreg_inc_sync_aligned_u32(unsigned imm_reg_count) {
  switch ((imm_reg_count < 24u ? 24u : imm_reg_count > 256u ? 256u : imm_reg_count) & ~7u) {
    case 24: asm volatile("setmaxnreg.inc.sync.aligned.u32 24;" ::: "memory"); break;
    case 32: asm volatile("setmaxnreg.inc.sync.aligned.u32 32;" ::: "memory"); break;
    case 40: asm volatile("setmaxnreg.inc.sync.aligned.u32 40;" ::: "memory"); break;
    case 48: asm volatile("setmaxnreg.inc.sync.aligned.u32 48;" ::: "memory"); break;
    case 56: asm volatile("setmaxnreg.inc.sync.aligned.u32 56;" ::: "memory"); break;
    case 64: asm volatile("setmaxnreg.inc.sync.aligned.u32 64;" ::: "memory"); break;
    case 72: asm volatile("setmaxnreg.inc.sync.aligned.u32 72;" ::: "memory"); break;
    case 80: asm volatile("setmaxnreg.inc.sync.aligned.u32 80;" ::: "memory"); break;
    case 88: asm volatile("setmaxnreg.inc.sync.aligned.u32 88;" ::: "memory"); break;
    case 96: asm volatile("setmaxnreg.inc.sync.aligned.u32 96;" ::: "memory"); break;
    case 104: asm volatile("setmaxnreg.inc.sync.aligned.u32 104;" ::: "memory"); break;
    case 112: asm volatile("setmaxnreg.inc.sync.aligned.u32 112;" ::: "memory"); break;
    case 120: asm volatile("setmaxnreg.inc.sync.aligned.u32 120;" ::: "memory"); break;
    case 128: asm volatile("setmaxnreg.inc.sync.aligned.u32 128;" ::: "memory"); break;
    case 136: asm volatile("setmaxnreg.inc.sync.aligned.u32 136;" ::: "memory"); break;
    case 144: asm volatile("setmaxnreg.inc.sync.aligned.u32 144;" ::: "memory"); break;
    case 152: asm volatile("setmaxnreg.inc.sync.aligned.u32 152;" ::: "memory"); break;
    case 160: asm volatile("setmaxnreg.inc.sync.aligned.u32 160;" ::: "memory"); break;
    case 168: asm volatile("setmaxnreg.inc.sync.aligned.u32 168;" ::: "memory"); break;
    case 176: asm volatile("setmaxnreg.inc.sync.aligned.u32 176;" ::: "memory"); break;
    case 184: asm volatile("setmaxnreg.inc.sync.aligned.u32 184;" ::: "memory"); break;
    case 192: asm volatile("setmaxnreg.inc.sync.aligned.u32 192;" ::: "memory"); break;
    case 200: asm volatile("setmaxnreg.inc.sync.aligned.u32 200;" ::: "memory"); break;
    case 208: asm volatile("setmaxnreg.inc.sync.aligned.u32 208;" ::: "memory"); break;
    case 216: asm volatile("setmaxnreg.inc.sync.aligned.u32 216;" ::: "memory"); break;
    case 224: asm volatile("setmaxnreg.inc.sync.aligned.u32 224;" ::: "memory"); break;
    case 232: asm volatile("setmaxnreg.inc.sync.aligned.u32 232;" ::: "memory"); break;
    case 240: asm volatile("setmaxnreg.inc.sync.aligned.u32 240;" ::: "memory"); break;
    case 248: asm volatile("setmaxnreg.inc.sync.aligned.u32 248;" ::: "memory"); break;
    default: asm volatile("setmaxnreg.inc.sync.aligned.u32 256;" ::: "memory"); break;
  }
}

// setmaxnreg.dec.sync.aligned.u32 imm-reg-count;   (PTX ISA 8.0, sm_90a)
extern "C" __device__ void ap_setmaxnreg_dec_sync_aligned_u32(unsigned imm_reg_count) {
  switch ((imm_reg_count < 24u ? 24u : imm_reg_count > 256u ? 256u : imm_reg_count) & ~7u) {
    case 24: asm volatile("setmaxnreg.dec.sync.aligned.u32 24;" ::: "memory"); break;
    case 32: asm volatile("setmaxnreg.dec.sync.aligned.u32 32;" ::: "memory"); break;
    case 40: asm volatile("setmaxnreg.dec.sync.aligned.u32 40;" ::: "memory"); break;
    case 48: asm volatile("setmaxnreg.dec.sync.aligned.u32 48;" ::: "memory"); break;
    case 56: asm volatile("setmaxnreg.dec.sync.aligned.u32 56;" ::: "memory"); break;
    case 64: asm volatile("setmaxnreg.dec.sync.aligned.u32 64;" ::: "memory"); break;
    case 72: asm volatile("setmaxnreg.dec.sync.aligned.u32 72;" ::: "memory"); break;
    case 80: asm volatile("setmaxnreg.dec.sync.aligned.u32 80;" ::: "memory"); break;
    case 88: asm volatile("setmaxnreg.dec.sync.aligned.u32 88;" ::: "memory"); break;
    case 96: asm volatile("setmaxnreg.dec.sync.aligned.u32 96;" ::: "memory"); break;
    case 104: asm volatile("setmaxnreg.dec.sync.aligned.u32 104;" ::: "memory"); break;
    case 112: asm volatile("setmaxnreg.dec.sync.aligned.u32 112;" ::: "memory"); break;
    case 120: asm volatile("setmaxnreg.dec.sync.aligned.u32 120;" ::: "memory"); break;
    case 128: asm volatile("setmaxnreg.dec.sync.aligned.u32 128;" ::: "memory"); break;
    case 136: asm volatile("setmaxnreg.dec.sync.aligned.u32 136;" ::: "memory"); break;
    case 144: asm volatile("setmaxnreg.dec.sync.aligned.u32 144;" ::: "memory"); break;
    case 152: asm volatile("setmaxnreg.dec.sync.aligned.u32 152;" ::: "memory"); break;
    case 160: asm volatile("setmaxnreg.dec.sync.aligned.u32 160;" ::: "memory"); break;
    case 168: asm volatile("setmaxnreg.dec.sync.aligned.u32 168;" ::: "memory"); break;
    case 176: asm volatile("setmaxnreg.dec.sync.aligned.u32 176;" ::: "memory"); break;
    case 184: asm volatile("setmaxnreg.dec.sync.aligned.u32 184;" ::: "memory"); break;
    case 192: asm volatile("setmaxnreg.dec.sync.aligned.u32 192;" ::: "memory"); break;
    case 200: asm volatile("setmaxnreg.dec.sync.aligned.u32 200;" ::: "memory"); break;
    case 208: asm volatile("setmaxnreg.dec.sync.aligned.u32 208;" ::: "memory"); break;
    case 216: asm volatile("setmaxnreg.dec.sync.aligned.u32 216;" ::: "memory"); break;
    case 224: asm volatile("setmaxnreg.dec.sync.aligned.u32 224;" ::: "memory"); break;
    case 232: asm volatile("setmaxnreg.dec.sync.aligned.u32 232;" ::: "memory"); break;
    case 240: asm volatile("setmaxnreg.dec.sync.aligned.u32 240;" ::: "memory"); break;
    case 248: asm volatile("setmaxnreg.dec.sync.aligned.u32 248;" ::: "memory"); break;
    default: asm volatile("setmaxnreg.dec.sync.aligned.u32 256;" ::: "memory"); break;
  }
}

// ---- the shared-memory address a matrix descriptor encodes -----------------------------------------------

// cvta.to.shared.u64 t, a; cvt.u32.u64 d, t;   (PTX ISA 2.0, sm_20)
// The 32-bit .shared::cta address of the generic pointer a (which must point into this CTA's shared memory).
extern "C" __device__ unsigned ap_cvta_to_shared_u32(const void* a) {
  unsigned d;
  asm volatile("{\n\t.reg .u64 t;\n\tcvta.to.shared.u64 t, %1;\n\tcvt.u32.u64 %0, t;\n\t}" : "=r"(d) : "l"(a));
  return d;
}
