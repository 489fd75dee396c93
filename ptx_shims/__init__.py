"""The CUDA C shims (``*.cu``) that asyncpipe links into numba kernels. No Python lives here."""
