"""Bit-exact numpy references for block-scaled low-precision formats (issue 20, section 3).

- ``minifloat``: FP8 E4M3 / E5M2, FP4 E2M1 and the E8M0 scale as uint8 codes (decode tables, RNE encode).
- ``mx``: OCP Microscaling MXFP8 (E4M3, E5M2) and MXFP4, one E8M0 scale per 32 elements.
- ``nvfp4``: NVIDIA NVFP4, E2M1 elements, one E4M3 scale per 16 elements and a float32 tensor scale.

Host-side only, no GPU code: these are what GPU quantize/dequantize kernels are compared with, bit for bit.
"""
