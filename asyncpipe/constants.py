"""Hardware and ISA limits, each with the rule it comes from. Nothing else in asyncpipe hard-codes them."""

# --- cp.async (PTX ISA 7.0, sm_80) -------------------------------------------------------------
CP_ASYNC_CA_SIZES = (4, 8, 16)        # cp.async.ca: cp-size is 4, 8 or 16 bytes
CP_ASYNC_CG_SIZES = (16,)             # cp.async.cg: cp-size is 16 bytes only
CP_ASYNC_WAIT_GROUP_MAX = 7           # wait_group N with N = 0..7 is spelled out; a larger N waits on 7 (safe: waits more)

# --- TMA: cuTensorMapEncodeTiled (CUDA driver API, sm_90) ------------------------------------
TENSOR_MAP_BYTES = 128                # sizeof(CUtensorMap)
TENSOR_MAP_ALIGN = 64                 # a CUtensorMap must be 64-byte aligned
TENSOR_RANK_MAX = 5                   # tensorRank is 1..5 (3..5 when interleaved)
GLOBAL_ADDRESS_ALIGN = 16             # globalAddress: 16-byte aligned (32 when interleave is 32B)
GLOBAL_STRIDE_ALIGN = 16              # globalStrides[i]: a multiple of 16 bytes, < 2**40 (0 too: the H200's driver takes it)
GLOBAL_STRIDE_MAX = 1 << 40
GLOBAL_DIM_MAX = 1 << 32              # globalDim[i]: 1..2**32
BOX_DIM_MAX = 256                     # boxDim[i]: 1..256
BOX_INNER_BYTES_ALIGN = 16            # boxDim[0] * elementSize: a multiple of 16 bytes (documented without interleave;
                                      # the H200's driver enforces it with interleave too)
# prod(boxDim[i] // elementStrides[i]) * elementSize <= 228 KB (an sm_90 SM's shared memory): not documented; the
# H200's driver (580.159.04) counts floor quotients, the innermost one included (a box dimension below its element
# stride counts 0), and accepted 233,472 bytes, refused 235,520 and more (nothing was drawn in between)
TMA_BOX_BYTES_MAX = 228 * 1024
ELEMENT_STRIDE_MAX = 8                # elementStrides[i]: 1..8
SWIZZLE_SPAN_BYTES = {"none": None, "32B": 32, "64B": 64, "128B": 128}   # inner box bytes <= span

# --- bulk copies (PTX ISA 8.0, sm_90) ---------------------------------------------------------
BULK_SIZE_ALIGN = 16                  # cp.async.bulk: size and both addresses multiples of 16
BULK_SMEM_ALIGN_TENSOR = 128          # cp.async.bulk.tensor shared-memory box: 128-byte aligned
TMA_COORD_ALIGN = 16                  # bytes: innermost box coordinate x itemsize (measured on H200, see ptx.bulk_tensor)
TMA_STORE_GRANULE = 16                # bytes: a TMA store writes whole 16-byte granules of a row (measured on H200)

# --- clusters (CUDA programming guide, sm_90) --------------------------------------------------
CLUSTER_SIZE_PORTABLE_MAX = 8         # portable cluster size
CLUSTER_SIZE_NONPORTABLE_MAX = 16     # with cudaFuncAttributeNonPortableClusterSizeAllowed (H100/H200)

# --- shared memory ---------------------------------------------------------------------------
STATIC_SMEM_DEFAULT_MAX = 48 * 1024   # dynamic shared memory above this needs the opt-in attribute

# --- compute capabilities ----------------------------------------------------------------------
SM_CP_ASYNC = (8, 0)
SM_HOPPER = (9, 0)                    # TMA, mbarrier tx-count, clusters, DSMEM, elect.sync, wgmma (9.0a)
