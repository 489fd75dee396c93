"""Simulator bodies of the PTX primitives, one module per family (the ``asyncpipe.ptx`` stems), plus
the shared machinery they use: vector-clock helpers (``common``), mbarrier state, asynchronous copy
operations, the block barrier and what happens when threads and CTAs exit."""
