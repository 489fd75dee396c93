"""Compile SGEMM configurations offline (sm_90a) as shipped, with their register tile expanded or in LLVM loops,
and the chapter's 3-stage interior kernel in the loop variants of ``variants.py``; report the seconds of each phase
and the SASS figures. Each compile runs in a fresh process with an empty ``ASYNCPIPE_CACHE_DIR`` (nothing cached:
the cold case).

    PYTHONPATH=. python3 scripts/compile_experiments/measure.py [--repeat 3] [--json out.json] [names ...]

Names: ``shipped`` (``sgemm.kernel_source("cp_async", 3, 4, 4, False)``: since the commit after 1a8e6b7 the
``LLVM_LOOPS`` form; run this script from a checkout of 1a8e6b7 or earlier for the expanded one), ``loops_ij``; a
suffix ``+unroll_store`` keeps the shipped (``unroll``) epilogue in a variant, ``+opaque_store`` /
``+hoisted_store`` pick the other epilogues of ``variants.py``. A configuration of ``CONFIGS`` (``chapter_edges``,
``kmajor`` ...) as shipped, or with ``@expanded`` / ``@llvm`` its register tile forced expanded or into LLVM loops
(``kernel_source``'s ``llvm_loops``): ``chapter_edges@expanded chapter_edges@llvm``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

# kernel_source's arguments of the configurations compared (variant "cp_async", vec_a = vec_b = 4 unless given)
_BEST = dict(bk=16, tile="8x16")
CONFIGS = {
    "chapter": dict(stages=3, edges=False), "chapter_edges": dict(stages=3, edges=True),
    "kmajor": dict(stages=3, edges=False, schedule="kmajor", **_BEST),
    "kmajor_edges": dict(stages=3, edges=True, schedule="kmajor", **_BEST),
    "dbuf": dict(stages=3, edges=False, schedule="dbuf", **_BEST),
    "dbuf_edges": dict(stages=3, edges=True, schedule="dbuf", **_BEST),
    "bk16": dict(stages=3, edges=False, bk=16), "8x16": dict(stages=3, edges=False, tile="8x16"),
    "8x16_bk16": dict(stages=3, edges=False, **_BEST),
    "s2": dict(stages=2, edges=False), "s4": dict(stages=4, edges=False), "s5": dict(stages=5, edges=False),
    "bk16_s4": dict(stages=4, edges=False, bk=16), "dbuf_s4": dict(stages=4, edges=False, schedule="dbuf", **_BEST),
    "v4": dict(variant="v4", edges=False), "v4_edges": dict(variant="v4", edges=True),
    "kmajor_s4": dict(stages=4, edges=False, schedule="kmajor", **_BEST),
}


# opcode prefixes counted inside the main loop (what the SASS tests of dbuf and kmajor count there)
LOOP_COUNTS = ("FFMA", "LDS.128", "LDS.64", "LDS", "BAR.SYNC", "DEPBAR.LE", "LDGSTS")


def configured(name: str):
    """(kernel_source's function, launch bounds) of ``CONFIGS[base]`` with ``@expanded`` / ``@llvm`` applied."""
    from asyncpipe.kernels import sgemm as S

    base, _, mode = name.partition("@")
    kw = dict(CONFIGS[base])
    if mode:
        kw["llvm_loops"] = {"expanded": False, "llvm": True}[mode]
    fn = S.kernel_source(kw.pop("variant", "cp_async"), **kw)
    return fn, S.launch_bounds(kw["edges"], kw.get("bk", S.BK), kw.get("tile", S.TILE), kw.get("schedule", "plain"))


def one(name: str) -> dict:
    """Compile ``name`` in this process (cold) and return its figures."""
    sys.path[:0] = [ROOT, HERE]
    from cuda.core import Linker, LinkerOptions, ObjectCode
    from numba import cuda
    from numba.cuda.cudadrv import nvrtc, nvvm

    from asyncpipe.codegen import HOPPER_A, Cubin
    from asyncpipe.kernels import sgemm as S
    from tests.kernels.test_sgemm import SIG

    spent = {"nvvm": 0.0, "nvrtc": 0.0}

    def timed(key, f):
        def wrapper(*a, **k):
            t = time.perf_counter()
            try:
                return f(*a, **k)
            finally:
                spent[key] += time.perf_counter() - t
        return wrapper

    nvvm.compile_ir = timed("nvvm", nvvm.compile_ir)
    nvrtc.compile = timed("nvrtc", nvrtc.compile)

    t0 = time.perf_counter()
    base, _, store = name.partition("+")
    bounds = S.launch_bounds(False)
    if base == "shipped":
        fn = S.kernel_source("cp_async", 3, 4, 4, False)
    elif base.partition("@")[0] in CONFIGS:
        fn, bounds = configured(base)
    else:
        import variants
        fn = variants.variant(base, store=store.removesuffix("_store") or "loops")
    t_source = time.perf_counter() - t0
    t0 = time.perf_counter()
    objs, _ = cuda.compile_all(fn, SIG, device=False, abi="numba", cc=HOPPER_A, output="ltoir",
                               launch_bounds=bounds)
    t_compile = time.perf_counter() - t0
    t0 = time.perf_counter()
    codes = [o if isinstance(o, ObjectCode) else ObjectCode.from_ltoir(bytes(o)) for o in objs]
    linked = Linker(*codes, options=LinkerOptions(arch="sm_90a", link_time_optimization=True)).link("cubin")
    t_link = time.perf_counter() - t0
    cubin = Cubin(bytes(linked.code), "sm_90a")
    if os.environ.get("SASS_DIR"):                    # keep the disassembly and the numba LLVM IR for diffs
        with open(os.path.join(os.environ["SASS_DIR"], f"{name}.sass"), "w") as f:
            f.write(cubin.sass)
    loop = cubin.main_loop()
    bc = cubin.ffma_bank_conflicts()
    ops = cubin.opcodes
    return {
        "name": name, "source_s": round(t_source, 2), "numba_s": round(t_compile - spent["nvvm"] - spent["nvrtc"], 2),
        "nvvm_s": round(spent["nvvm"], 2), "nvrtc_s": round(spent["nvrtc"], 2), "link_s": round(t_link, 2),
        "total_s": round(t_source + t_compile + t_link, 2),
        "statements": fn.unrolled_source.count("\n"), "load": round(os.getloadavg()[0], 2),
        "instructions": len(ops), "loop_instructions": len(loop),
        "FFMA": cubin.count("FFMA"), "LDS.128": cubin.count("LDS.128"), "LDS": cubin.count("LDS"),
        "LDS.64": cubin.count("LDS.64"), "LDGSTS": cubin.count("LDGSTS"), "BAR.SYNC": cubin.count("BAR.SYNC"),
        "STG": cubin.count("STG"),
        "loop": {p: sum(i.opcode.startswith(p) for i in loop) for p in LOOP_COUNTS},
        "registers": cubin.resources.registers, "spills": cubin.spills,
        "loop_ffma_bank_conflicts": [bc.ffma, bc.conflicted] if hasattr(bc, "conflicted") else str(bc),
        "per_ffma": round(bc.per_ffma, 4),
        "loop_opcodes_hash": hash(tuple(i.opcode for i in loop)) & 0xFFFFFFFF,
        "sass_opcodes_hash": hash(tuple(ops)) & 0xFFFFFFFF,
    }


def main():
    p = argparse.ArgumentParser()
    p.add_argument("names", nargs="*", default=["shipped", "loops_ij+opaque_store"])
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--json")
    p.add_argument("--one", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.one:
        print(json.dumps(one(args.one)))
        return
    rows = []
    for r in range(args.repeat):
        for name in args.names:
            with tempfile.TemporaryDirectory() as cache:
                env = {**os.environ, "ASYNCPIPE_CACHE_DIR": cache, "ASYNCPIPE_JIT_CACHE": "0",
                       "PYTHONHASHSEED": "0"}
                out = subprocess.run([sys.executable, __file__, "--one", name], env=env, capture_output=True,
                                     text=True)
            if out.returncode:
                print(name, "failed:", out.stderr[-3000:], file=sys.stderr)
                continue
            row = json.loads(out.stdout.strip().splitlines()[-1])
            rows.append(row)
            print(json.dumps(row), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
