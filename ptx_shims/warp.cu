// Warp-level primitives (PTX ISA 8.0, sm_90).
#include "common.cuh"

// elect.sync _|p, membermask;   (PTX ISA 8.0, sm_90)
// Returns 1 in the one elected lane of membermask and 0 in the others; the elected lane's id goes to
// the sink. No "memory" clobber: elect orders no memory, it only synchronises the lanes of the mask.
extern "C" __device__ unsigned ap_elect_sync(unsigned membermask) {
  unsigned elected;
  asm volatile(
      "{\n\t.reg .pred p;\n\t"
      "elect.sync _|p, %1;\n\t"
      "selp.u32 %0, 1, 0, p;\n\t}"
      : "=r"(elected)
      : "r"(membermask));
  return elected;
}
