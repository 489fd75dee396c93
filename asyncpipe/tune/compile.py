"""Compiling a spec's candidates offline, in parallel processes, and reading what each one holds.

Each candidate is compiled for the device's compute capability (sm_90a without a GPU) by
``asyncpipe.codegen.compile_kernel`` in a worker process of a ``spawn`` context: a forked child of a
process that has initialised CUDA is not safe, and a spawned one starts clean. The kernel factory
travels by cloudpickle (numba's copy), so a factory written in a notebook cell or in a file loaded by
path compiles too. The simulator switch is taken out of the workers' environment: numba chooses its
compiler or its simulator at import, and a worker must compile. A tqdm bar shows the progress.
"""

from __future__ import annotations

import functools
import importlib.machinery
import os
import sys
from concurrent.futures import ProcessPoolExecutor, as_completed
from contextlib import contextmanager
from dataclasses import dataclass
from multiprocessing import get_context

_SIMULATOR_SWITCHES = ("NUMBA_ENABLE_CUDASIM", "ASYNCPIPE_SIM")


@dataclass(frozen=True)
class Compiled:
    """What the compiled kernel holds, per thread and per CTA (``cuobjdump --dump-resource-usage``), or why it
    did not compile. ``loop_instructions``: the SASS instructions of its main loop (the backward branch that
    spans the most code), the timeline model's compute estimate; None when it has no loop."""

    registers: int | None = None
    shared: int | None = None              # static shared memory as the cubin reports it (with the 1 KB reserve)
    local: int | None = None
    stack: int | None = None
    spills: bool | None = None
    loop_instructions: int | None = None
    instructions: int | None = None
    error: str | None = None               # the compiler's complaint: the candidate does not compile
    unread: str | None = None              # compiled, but the resources could not be read (no cuobjdump)

    @property
    def ok(self) -> bool:
        return self.error is None and self.unread is None


def compile_one(payload: bytes) -> Compiled:
    """Worker: unpickle ``(factory, config, argtypes, cc)``, compile, read the cubin."""
    from numba import cloudpickle

    factory, config, argtypes, cc = cloudpickle.loads(payload)
    from ..codegen import compile_kernel

    try:
        disp = factory(config)
        bounds = getattr(disp, "targetoptions", {}).get("launch_bounds")
        cubin = compile_kernel(disp, argtypes, cc=cc, **({"launch_bounds": bounds} if bounds else {}))
    except Exception as exc:  # noqa: BLE001 - the compiler's complaint is the answer
        return Compiled(error=f"{type(exc).__name__}: {str(exc).strip().splitlines()[-1] if str(exc).strip() else ''}"[:400])
    try:
        r = cubin.resources
        try:
            loop = len(cubin.main_loop())
        except ValueError:
            loop = None
        return Compiled(r.registers, r.shared, r.local, r.stack, cubin.spills, loop, len(cubin.instructions))
    except (FileNotFoundError, RuntimeError) as exc:
        return Compiled(unread=str(exc)[:300])


@contextmanager
def _spawnable():
    """Workers without the simulator switch, and without a ``__main__`` file that does not exist (``python -``,
    ``python -c``: a spawned child would try to run it again)."""
    saved = {k: os.environ.pop(k) for k in _SIMULATOR_SWITCHES if k in os.environ}
    main = sys.modules.get("__main__")
    main_file = getattr(main, "__file__", None)
    hide = main_file is not None and not os.path.isfile(main_file)
    if hide:
        del main.__file__
    try:
        yield
    finally:
        os.environ.update(saved)
        if hide:
            main.__file__ = main_file


def _by_value(fn) -> None:
    """A factory from a module a fresh process cannot import by name (a file loaded by path) goes by value."""
    from numba import cloudpickle

    mod = sys.modules.get(getattr(fn, "__module__", "") or "")
    if mod is None or mod.__name__ == "__main__" or "." in mod.__name__:    # __main__ goes by value anyway
        return
    # a top-level module a fresh process finds on sys.path is imported there; one loaded by path is not
    # (importlib.util.find_spec would answer from sys.modules: ask the path finder)
    if importlib.machinery.PathFinder.find_spec(mod.__name__) is None:
        cloudpickle.register_pickle_by_value(mod)


def compile_candidates(factory, jobs: dict, cc, processes: int | None = None, progress: bool = True,
                       desc: str = "compile") -> dict:
    """``{key: Compiled}`` for ``jobs`` = ``{key: (config dict, argtypes)}``, compiled in parallel worker
    processes (``processes``: default the CPU count, at most one per job; 0: in this process)."""
    from numba import cloudpickle

    _by_value(factory)
    payloads = {k: cloudpickle.dumps((factory, cfg, tuple(argtypes), cc)) for k, (cfg, argtypes) in jobs.items()}
    return run_in_workers(compile_one, payloads, processes, progress, f"[tune] {desc}")


def run_in_workers(worker, payloads: dict, processes: int | None = None, progress: bool = True,
                   desc: str = "[tune] compile", on_error=None) -> dict:
    """``{key: worker(payload)}`` for every payload, in the dict's order, computed in parallel worker processes of a
    ``spawn`` context (the module doc; ``processes``: default the CPU count, at most one per payload; 0: in this
    process), under a tqdm bar ``desc``. ``worker`` is a module-level function (it travels by name) and the payloads
    plain pickles. A worker's exception (a crashed process: ``BrokenProcessPool``) is raised, or, with
    ``on_error(key, exc)``, its answer is that key's result. The tuner's compiles and ``python -m asyncpipe warm``
    share this pool."""
    n = min(len(payloads), processes if processes is not None else (os.cpu_count() or 1))
    bar = _bar(len(payloads), desc, progress)
    out = {}

    def done(key, result) -> None:
        try:
            out[key] = result()
        except Exception as exc:  # noqa: BLE001 - on_error decides; without it, raised
            if on_error is None:
                raise
            out[key] = on_error(key, exc)
        bar.update(1)

    if n <= 0:
        for k, p in payloads.items():
            done(k, functools.partial(worker, p))
    else:
        with _spawnable(), ProcessPoolExecutor(n, mp_context=get_context("spawn")) as pool:
            futures = {pool.submit(worker, p): k for k, p in payloads.items()}
            for f in as_completed(futures):
                done(futures[f], f.result)
    bar.close()
    return {k: out[k] for k in payloads}


def _bar(total: int, desc: str, enabled: bool):
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, file=sys.stderr, disable=not enabled)
