"""The kernel configurations ``python -m asyncpipe bench`` times, in one place that the bench, its first-call rows
(``asyncpipe.first_call``) and ``asyncpipe.warm`` read (no imports: nothing here can close a circle)."""

# cp.async stage counts the full bench times (each is a separate ~25 s compile; the tuner covers 2..8)
SGEMM_STAGES = (2, 3, 4, 5)
SGEMM_BK16_STAGES = (3, 4)   # the 16-deep stage (sgemm(bk=16)), beside the chapter's 8
SGEMM_8X16 = ((3, 8, "plain"), (3, 16, "plain"), (3, 16, "dbuf"), (4, 16, "dbuf"),   # (stages, bk, schedule) of
              (3, 16, "kmajor"), (4, 16, "kmajor"))                                  # the 8 x 16 thread tile


def sgemm_configs(stages_list=SGEMM_STAGES) -> list[tuple]:
    """(variant, stages, bk, tile, schedule) of every SGEMM the bench times: v4, the chapter's cp.async
    tile (bk 8) at each stage count, the 16-deep stage at 3 and 4, and the 8 x 16 thread tile (with both
    main loops)."""
    return ([("v4", 1, 8, "8x8", "plain")] + [("cp_async", s, 8, "8x8", "plain") for s in stages_list]
            + [("cp_async", s, 16, "8x8", "plain") for s in SGEMM_BK16_STAGES]
            + [("cp_async", s, bk, "8x16", sched) for s, bk, sched in SGEMM_8X16])


TMA_CONFIGS = [("tma_add_one_chapter", dict(pipelined=False))] + [      # (record name, add_one options) timed
    ("tma_add_one_pipelined", dict(pipelined=True, stages=s, ctas_per_sm=c)) for s, c in ((4, 2), (4, 4), (5, 3))]
