"""``python -m asyncpipe bench --compile``: where a cold compile spends its time, kernel by kernel (no GPU).

Every shipped kernel configuration (``shipped``) is compiled offline for sm_90a in a fresh Python process
whose caches are empty (``ASYNCPIPE_CACHE_DIR`` a new temporary folder, so the unrolled source is generated
again; ``ASYNCPIPE_JIT_CACHE=0`` and ``NUMBA_CACHE_DIR`` there too). The child runs the steps of
``asyncpipe.codegen.compile_kernel`` one at a time and times each (``time_phases``):

``source``   the kernel's Python source generated (``unrolled``: unrolling, splicing, static ifs; 0 for a
             kernel compiled from its own source); size: statements and lines of what numba reads
``untyped``  numba's untyped passes: bytecode to numba IR, closure and ``inline="always"`` inlining
``typing``   type inference and the typed rewrites
``lowering`` numba IR to LLVM IR (numba's lowering passes); size: LLVM IR lines
             (these three from numba-cuda's own ``numba-cuda:run_pass`` events, the passes sorted by the
             pipelines numba-cuda defines; nested pipelines count in the pass that runs them)
``numba_other`` the rest of numba's compile call (signature, kernel fixup, launch bounds)
``nvvm``     LLVM IR to LTO-IR (libNVVM, ``CUDACodeLibrary.get_ltoir``); size: LTO-IR bytes
``shims``    the linked ``.cu`` shims to LTO-IR (NVRTC); size: files, their lines
``link``     nvJitLink's link with LTO to the cubin; size: SASS instructions, registers, cubin bytes

Before the kernel the child compiles a one-line kernel through the same steps (``init_s``: numba's, libNVVM's,
NVRTC's and nvJitLink's first use in the process), so that the phases are the kernel's own; the interpreter's
start with ``import asyncpipe`` (``startup_s``), numba's and the kernels' imports (``import_s``) and the whole
child (``process_s``, launch to exit) are reported beside them. The JSON names the commit and the files of the
package that differ from it (``changed_files``): what was compiled is the working tree.

This module's top imports only the standard library (the bench's parser is built without numba).
"""

from __future__ import annotations

import ast
import datetime
import fnmatch
import inspect
import json
import os
import platform
import subprocess
import sys
import tempfile
import textwrap
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

API = "bench"
PHASES = ("source", "untyped", "typing", "lowering", "numba_other", "nvvm", "shims", "link")
_SIMULATOR_SWITCHES = ("NUMBA_ENABLE_CUDASIM", "ASYNCPIPE_SIM")
_VERSIONS = ("numba-cuda", "numba", "llvmlite", "nvidia-nvjitlink", "nvidia-nvvm", "nvidia-cuda-nvrtc", "cuda-core",
             "cuda-bindings")


# ------------------------------------------------------------------------------------------------
# What is shipped: name -> (builder, keyword arguments); the builders below return (pyfunc, argtypes, options)
# ------------------------------------------------------------------------------------------------
def sgemm_name(variant: str, stages: int, bk: int, tile: str, schedule: str, edges: bool) -> str:
    """The bench's record name (``bench.bench_sgemm``) with the stage count, and ``_edges`` for the edge kernel."""
    return (f"sgemm_{variant}" + (f"_{tile}" if tile != "8x8" else "") + (f"_bk{bk}" if bk != 8 else "")
            + (f"_{schedule}" if schedule != "plain" else "") + (f"_s{stages}" if variant != "v4" else "")
            + ("_edges" if edges else ""))


def shipped(sgemm_configs) -> dict[str, tuple[str, dict]]:
    """Every shipped kernel configuration: the chapter's 3-stage SGEMM and the v4 SGEMM, interior and edge
    kernels; the interior kernel of each SGEMM in ``sgemm_configs`` ((variant, stages, bk, tile, schedule), the
    bench's: ``bench.sgemm_configs()``); the transpose (``schedule="kmajor"``'s); the TMA add-one kernels (the
    chapter's and the pipelined one at each stage count the bench times); the cluster sums (the chapter's pair
    sum, the DSMEM sum and its finishing kernel); the wgmma GEMM at the bench's configuration, both epilogues."""
    out: dict[str, tuple[str, dict]] = {}
    chapter = [("cp_async", 3, 8, "8x8", "plain"), ("v4", 1, 8, "8x8", "plain")]
    for cfg in chapter + [c for c in map(tuple, sgemm_configs) if c not in chapter]:
        for edges in ((False, True) if cfg in chapter else (False,)):
            variant, stages, bk, tile, schedule = cfg
            out[sgemm_name(*cfg, edges)] = ("sgemm", dict(variant=variant, stages=stages, bk=bk, tile=tile,
                                                          schedule=schedule, edges=edges))
    out["transpose"] = ("transpose", {})
    out["tma_add_one_chapter"] = ("tma_add_one", dict(which="chapter", stages=4))
    for s in (4, 5):                                     # bench.bench_tma's stage counts
        out[f"tma_add_one_pipelined_s{s}"] = ("tma_add_one", dict(which="pipelined", stages=s))
    for name in ("pair", "sum", "finish"):
        out[{"pair": "cluster_sum_pair_chapter", "sum": "cluster_sum", "finish": "cluster_sum_finish"}[name]] = (
            "cluster_sum", dict(which=name))
    for epilogue in ("direct", "tma"):                   # wgmma_gemm.benchmark's defaults
        out[f"wgmma_gemm_bf16_bn256_s4_c2_{epilogue}"] = ("wgmma_gemm", dict(
            block_n=256, stages=4, cluster=2, ab="bf16", b_kmajor=False, c_bf16=True, epilogue=epilogue))
    for name, config in attention_configs().items():
        out[name] = ("attention", config)
    for name, config in fp8_gemm_configs().items():
        out[name] = ("fp8_gemm", config)
    out["fp8_quantize_1x128"] = ("fp8_quantize", {})
    for name, fmt in CODECS:
        out[codec_name(name, fmt)] = ("codec", dict(name=name, fmt=fmt))
    return out


# the codec kernels mx_codec.benchmark runs: (kernel_function's name, format)
CODECS = (("mxfp8_quantize", "e4m3"), ("mxfp8_quantize", "e5m2"), ("mxfp4_quantize", None),
          ("nvfp4_quantize", None), ("finite_amax", None), ("mxfp8_dequantize", "e4m3"), ("mxfp4_dequantize", None),
          ("nvfp4_dequantize", None))


def codec_name(name: str, fmt: str | None) -> str:
    return f"codec_{name}" + (f"_{fmt}" if fmt else "")


def fp8_gemm_configs() -> dict[str, dict]:
    """The FP8 GEMM kernels the bench's shapes compile by default on an H200 (``fp8_gemm.bench_configs``)."""
    from .kernels.fp8_gemm import bench_configs

    return {f"fp8_gemm_bn{bn}_s{st}_c{cm}x{cn}" + (f"_split{split}" if split > 1 else "") + (f"_k{ks}" if ks > 1 else "")
            + (f"_tma{bufs}" if bufs else ""):
            dict(block_n=bn, stages=st, cluster=[cm, cn], split_k=split, k_slices=ks, epi_bufs=bufs)
            for bn, st, (cm, cn), split, ks, bufs in bench_configs()}


def attention_configs() -> dict[str, dict]:
    """The attention kernels the bench's bf16 records compile: every head dim, causal and not."""
    from .kernels.attention_kernel import HEAD_DIMS

    return {f"attention_bf16_hd{hd}" + ("_causal" if causal else ""): dict(head_dim=hd, causal=causal, ab="bf16")
            for hd in HEAD_DIMS for causal in (False, True)}


def _build_sgemm(variant, stages, bk, tile, schedule, edges):
    from numba.cuda import types

    from .kernels import sgemm as S

    f32 = types.float32[::1]
    sig = (types.int32, types.int32, types.int32, types.float32, f32, f32, types.float32, f32)
    if variant == "v4":
        return S.kernel_source("v4", edges=edges), sig, dict(launch_bounds=S.launch_bounds(edges))
    vec = 4                                               # 16-byte copies: what the bench's aligned problems take
    fn = S.kernel_source("cp_async", stages, vec, vec, edges, bk, tile, schedule=schedule)
    return fn, sig, dict(launch_bounds=S.launch_bounds(edges, bk, tile, schedule))


def _build_transpose():
    from numba.cuda import types

    from .kernels import transpose as T

    f32 = types.float32[::1]
    return T._transpose, (f32, f32, types.int32, types.int32, types.int32, types.int32), {}


def _build_tma_add_one(which, stages):
    from numba.cuda import types

    from .kernels import tma_add_one as T
    from .kernels.unroll import unrolled

    from .ptx.tensor_map_type import tensormap

    u64 = tensormap
    if which == "chapter":
        return unrolled(T.add_one_tma, DTYPE=types.int32, PIPE_STAGES=stages), (u64,), {}
    return unrolled(T.add_one_pipelined, DTYPE=types.int32, PIPE_STAGES=stages), (u64, types.int32, types.int32), {}


def _build_cluster_sum(which):
    from numba.cuda import types

    from .kernels import cluster_sum as C
    from .kernels.unroll import unrolled

    f32 = types.float32[::1]
    fn, sig = {"pair": (C.pair_sum, (f32, f32, types.int32)), "sum": (C.cluster_sum_kernel, (f32, types.int64, f32)),
               "finish": (C.finish_kernel, (f32, types.int32, types.float64[::1]))}[which]
    return unrolled(fn), sig, {}


def _build_wgmma_gemm(**config):
    from .kernels import wgmma_gemm as G

    return G.make_kernel(**config), G.kernel_argtypes(config["c_bf16"]), dict(launch_bounds=G.LAUNCH_BOUNDS)


def _build_attention(head_dim, causal, ab):
    from .kernels import attention_kernel as AK

    return (AK.make_kernel(head_dim=head_dim, causal=causal, ab=ab), AK.kernel_argtypes(),
            dict(launch_bounds=AK.LAUNCH_BOUNDS))


def _build_fp8_gemm(block_n, stages, cluster, split_k=1, k_slices=1, epi_bufs=0):
    from .kernels import fp8_gemm_kernel as FK

    return (FK.make_kernel(block_n=block_n, stages=stages, cluster=tuple(cluster), ksplit=split_k, k_slices=k_slices,
                           epi_bufs=epi_bufs),
            FK.kernel_argtypes(),
            dict(launch_bounds=FK.LAUNCH_BOUNDS))


def _build_fp8_quantize():
    from .kernels import fp8_quant as Q

    return Q.quantize_kernel, Q.kernel_argtypes(), {}


def _build_codec(name, fmt):
    from .kernels import mx_codec_kernel as K

    return K.kernel_function(name, fmt), K.kernel_argtypes(name), {}


BUILDERS = {"sgemm": _build_sgemm, "transpose": _build_transpose, "tma_add_one": _build_tma_add_one,
            "cluster_sum": _build_cluster_sum, "wgmma_gemm": _build_wgmma_gemm, "attention": _build_attention,
            "fp8_gemm": _build_fp8_gemm, "fp8_quantize": _build_fp8_quantize, "codec": _build_codec}


# ------------------------------------------------------------------------------------------------
# The phases of one compile (in this process)
# ------------------------------------------------------------------------------------------------
def _pass_phases() -> dict[str, str]:
    """numba-cuda's pass names -> "typing" or "lowering", read from the pipelines its compiler defines (any
    other pass of the compile is "untyped")."""
    from types import SimpleNamespace

    from numba.cuda import compiler as C

    state = SimpleNamespace(flags=C.CUDAFlags(), func_ir=None)
    typed = C.DefaultPassBuilder.define_typed_pipeline(state).passes
    lowering = C.CUDACompiler.define_cuda_lowering_pipeline(None, state).passes
    return {**{p.name(): "typing" for p, _ in typed}, **{p.name(): "lowering" for p, _ in lowering}}


def _pass_listener(seconds: dict):
    """A numba-cuda event listener adding each outermost pass's seconds to ``seconds[phase]``."""
    from numba.cuda.core import event as ev

    phases = _pass_phases()

    class Passes(ev.Listener):
        depth, started = 0, 0.0

        def on_start(self, event):
            if self.depth == 0:
                self.started = time.perf_counter()
            self.depth += 1

        def on_end(self, event):
            self.depth -= 1
            if self.depth == 0:
                name = event.data["name"].rsplit(" [", 1)[0]
                phase = phases.get(name, "untyped")
                seconds[phase] = seconds.get(phase, 0.0) + time.perf_counter() - self.started

    return ev.install_listener("numba-cuda:run_pass", Passes())


def _source_size(fn) -> tuple[bool, int, int]:
    """(generated?, statements, lines) of what numba reads for ``fn``."""
    text = getattr(fn, "unrolled_source", None)
    generated = text is not None
    if text is None:
        text = textwrap.dedent(inspect.getsource(fn))
    return generated, sum(isinstance(n, ast.stmt) for n in ast.walk(ast.parse(text))), len(text.splitlines())


def time_phases(build, cc=(9, 0, "a"), sass: bool = True) -> dict:
    """Compile the kernel ``build()`` returns (``(pyfunc, argtypes, options)``: ``compile_kernel``'s arguments)
    the way ``asyncpipe.codegen.compile_kernel`` does, one step at a time, and return ``{"seconds": {phase: s},
    "sizes": {...}}`` (the phases: the module doc). ``sass``: count the cubin's SASS instructions and registers
    (needs cuobjdump; not timed)."""
    from cuda.core import Linker, LinkerOptions, ObjectCode
    from numba.cuda.compiler import _compile_pyfunc_with_fixup
    from numba.cuda.cudadrv import nvrtc
    from numba.cuda.cudadrv.linkable_code import LinkableCode

    from .codegen import Cubin

    seconds: dict[str, float] = {p: 0.0 for p in PHASES}
    t0 = time.perf_counter()
    pyfunc, argtypes, options = build()
    seconds["source"] = time.perf_counter() - t0
    pyfunc = getattr(pyfunc, "py_func", pyfunc)
    generated, statements, lines = _source_size(pyfunc)
    if not generated:
        seconds["source"] = 0.0                           # nothing was generated: the time was the imports'
    t0 = time.perf_counter()
    with _pass_listener(seconds):
        lib, _ = _compile_pyfunc_with_fixup(pyfunc, tuple(argtypes), device=False, abi="numba", cc=cc, lto=True,
                                            **options)
    numba_s = time.perf_counter() - t0
    seconds["numba_other"] = max(0.0, numba_s - seconds["untyped"] - seconds["typing"] - seconds["lowering"])
    llvm_lines = len(lib.get_llvm_str().splitlines())
    t0 = time.perf_counter()
    ltoir = lib.get_ltoir(cc=cc)                          # compile_all's first code
    seconds["nvvm"] = time.perf_counter() - t0
    codes, shim_files, shim_lines = [ltoir], 0, 0
    t0 = time.perf_counter()
    for path_or_obj in lib._linking_files:                # compile_all's loop over the linked files
        obj = LinkableCode.from_path_or_obj(path_or_obj)
        if obj.kind == "cu":
            code, _ = nvrtc.compile(obj.data, obj.name, cc, ltoir=True)
            shim_files += 1
            shim_lines += len(obj.data.splitlines())
            codes.append(code)
        else:
            codes.append(obj)
    seconds["shims"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    objs = [o if isinstance(o, ObjectCode) else ObjectCode.from_ltoir(bytes(o)) for o in codes]
    arch = f"sm_{cc[0]}{cc[1]}{cc[2] if len(cc) > 2 else ''}"
    cubin = Cubin(bytes(Linker(*objs, options=LinkerOptions(arch=arch, link_time_optimization=True))
                        .link("cubin").code), arch)
    seconds["link"] = time.perf_counter() - t0
    sizes = dict(generated=generated, statements=statements, source_lines=lines, llvm_ir_lines=llvm_lines,
                 ltoir_bytes=len(bytes(ltoir)), shim_files=shim_files, shim_lines=shim_lines,
                 cubin_bytes=len(cubin.data), sass_instructions=None, registers=None)
    if sass:
        try:
            sizes.update(sass_instructions=len(cubin.instructions), registers=cubin.resources.registers)
        except (FileNotFoundError, RuntimeError) as exc:
            sizes["sass_unread"] = str(exc)[:200]
    return dict(seconds=seconds, total_s=sum(seconds.values()), sizes=sizes, cubin=cubin)


def _warm_kernel(out):
    """The one-line kernel the child compiles first (``init_s``): one shim, one store (``ptx`` comes from
    ``_build_warm``)."""
    ptx.fence_proxy_async()  # noqa: F821
    out[0] = 1.0


def _build_warm():
    from numba.cuda import types

    from . import ptx
    from .kernels.unroll import unrolled

    return unrolled(_warm_kernel, ptx=ptx), (types.float32[::1],), {}


def child(spec: dict) -> dict:
    """In a fresh process: import, compile the warm-up kernel, then time the kernel ``spec`` names
    (``{"builder": ..., "kwargs": {...}, "launched": time.time() of the launch}``)."""
    startup_s = time.time() - spec["launched"]          # the interpreter's start and ``import asyncpipe``
    t0 = time.perf_counter()
    import numba.cuda  # noqa: F401 - the imports are timed apart

    from . import kernels, ptx  # noqa: F401
    import_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    time_phases(_build_warm, sass=False)
    init_s = time.perf_counter() - t0
    builder = BUILDERS[spec["builder"]]
    res = time_phases(lambda: builder(**spec["kwargs"]))
    res.pop("cubin")
    return dict(res, startup_s=startup_s, import_s=import_s, init_s=init_s)


# ------------------------------------------------------------------------------------------------
# Many kernels, one fresh process each
# ------------------------------------------------------------------------------------------------
def run_child(name: str, spec: tuple[str, dict], timeout: float = 1800) -> dict:
    """``child`` in a new interpreter with empty caches; the record of kernel ``name`` (``error`` on failure)."""
    builder, kwargs = spec
    with tempfile.TemporaryDirectory(prefix="asyncpipe-compile-") as d:
        env = {k: v for k, v in os.environ.items() if k not in _SIMULATOR_SWITCHES}
        env.update(ASYNCPIPE_CACHE_DIR=d, ASYNCPIPE_JIT_CACHE="0", NUMBA_CACHE_DIR=os.path.join(d, "numba"))
        t0 = time.perf_counter()
        try:
            out = subprocess.run([sys.executable, "-m", "asyncpipe.compile_time",
                                  json.dumps(dict(builder=builder, kwargs=kwargs, launched=time.time()))],
                                 capture_output=True, text=True, env=env, timeout=timeout)
        except subprocess.TimeoutExpired:
            return dict(kernel=name, error=f"no result within {timeout:.0f} s")
        process_s = time.perf_counter() - t0
    if out.returncode:
        return dict(kernel=name, error=(out.stderr.strip().splitlines() or ["(no output)"])[-1][:400])
    return dict(kernel=name, config=kwargs, **json.loads(out.stdout.strip().splitlines()[-1]), process_s=process_s)


def select(targets: dict, only) -> dict:
    """The targets ``only`` names (None: all). Each item: a kernel's name; else a pattern with ``*?[``; else a
    prefix (``sgemm``, ``tma``). One that names nothing is an error."""
    from .errors import check

    if not only:
        return dict(targets)
    chosen: dict = {}
    for item in only:
        if item in targets:
            hits = [item]
        elif any(c in item for c in "*?["):
            hits = fnmatch.filter(targets, item)
        else:
            hits = [n for n in targets if n.startswith(item)]
        check(bool(hits), API, "--only with --compile must name kernels of the compile list, by name, pattern or "
              "prefix (python -m asyncpipe bench --compile --list)", repr(item))
        chosen.update((n, targets[n]) for n in hits)
    return {n: targets[n] for n in targets if n in chosen}


def machine() -> dict:
    """The CPU, cores, load, Python and the compiler packages' versions."""
    from importlib import metadata

    cpu = platform.processor() or platform.machine()
    try:
        cpu = next(line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                   if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    versions = {}
    for pkg in _VERSIONS:
        try:
            versions[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            versions[pkg] = None
    return dict(cpu=cpu, cores=os.cpu_count(), platform=platform.platform(), python=platform.python_version(),
                load_average=list(os.getloadavg()), versions=versions)


def changed_files() -> list[str] | None:
    """The files of the package and its shims that differ from the commit (``git status``): the compiles measure
    the tree, which the commit alone does not name when this is not empty. None outside a git checkout."""
    root = Path(__file__).resolve().parents[1]
    try:
        out = subprocess.run(["git", "status", "--porcelain", "--", "asyncpipe", "ptx_shims"], cwd=root,
                             capture_output=True, text=True)
    except OSError:
        return None
    return None if out.returncode else sorted(line[3:] for line in out.stdout.splitlines() if line.strip())


def measure(targets: dict, jobs: int = 1, progress: bool = True) -> dict:
    """Compile every target in its own fresh process, ``jobs`` at a time; the document ``--json`` writes."""
    from tqdm import tqdm

    from .provenance import commit

    doc = dict(date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"), commit=commit(),
               changed_files=changed_files(), machine=machine(), jobs=jobs, cc="sm_90a", phases=list(PHASES), results=[])
    records = {}
    with ThreadPoolExecutor(jobs) as pool, tqdm(total=len(targets), desc="compile", unit="kernel",
                                                 file=sys.stderr, disable=not progress) as bar:
        futures = {pool.submit(run_child, name, spec): name for name, spec in targets.items()}
        for fut in as_completed(futures):
            records[futures[fut]] = fut.result()
            bar.set_postfix_str(futures[fut])
            bar.update()
    doc["results"] = [records[n] for n in targets]
    doc["machine"]["load_average_after"] = list(os.getloadavg())
    return doc


def format_table(doc: dict) -> str:
    m = doc["machine"]
    lines = [f"offline compile for {doc['cc']}, one fresh process and empty caches per kernel, {doc['jobs']} at a "
             f"time; {m['cpu']} ({m['cores']} cores, load {m['load_average'][0]:.2f}), python {m['python']}, "
             f"numba-cuda {m['versions'].get('numba-cuda')}; {doc['date']} commit {doc['commit']}"
             + (f" with {len(doc['changed_files'])} files changed: {', '.join(doc['changed_files'])}"
                if doc.get("changed_files") else ""),
             "seconds per phase (source: generation; untyped/typing/lowering: numba's passes; nvvm: LLVM IR -> "
             "LTO-IR; shims: NVRTC; link: nvJitLink); sizes: generated statements, LLVM IR lines, SASS instructions",
             f"{'kernel':36s}" + "".join(f"{p[:8]:>9s}" for p in PHASES) + f"{'total':>9s}{'process':>9s}"
             f"{'stmts':>8s}{'LLVM IR':>9s}{'SASS':>7s}{'regs':>5s}"]
    for r in doc["results"]:
        if "error" in r:
            lines.append(f"{r['kernel']:36s} ERROR {r['error'][:150]}")
            continue
        s, z = r["seconds"], r["sizes"]
        lines.append(f"{r['kernel']:36s}" + "".join(f"{s[p]:9.2f}" for p in PHASES) + f"{r['total_s']:9.2f}"
                     f"{r['process_s']:9.2f}{z['statements']:8d}{z['llvm_ir_lines']:9d}"
                     f"{z['sass_instructions'] if z['sass_instructions'] is not None else '-':>7}"
                     f"{z['registers'] if z['registers'] is not None else '-':>5}")
    return "\n".join(lines)


if __name__ == "__main__":
    print(json.dumps(child(json.loads(sys.argv[1]))))
