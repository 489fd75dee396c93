"""The chapter's programs (and later kernels), written with asyncpipe's primitives."""
