"""asyncpipe: Ampere/Hopper asynchronous GPU kernels in Python."""
__version__ = "0.1.0"
