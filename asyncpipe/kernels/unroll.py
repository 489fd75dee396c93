"""Compile-time unrolling for numba kernels: the one place where kernels get their loops unrolled.

numba neither unrolls ``for i in range(8)`` reliably nor keeps a ``cuda.local.array`` indexed by
a loop variable in registers. Register-tiled kernels need both, so they are written with two
markers and passed through :func:`unrolled`, which rewrites the function's syntax tree before numba
sees it:

``for i in unroll(N):``
    the body is repeated N times with ``i`` replaced by 0, 1, ..., N-1 (N a constant);
``acc = registers(TM, TN)``
    a register array: after unrolling every ``acc[m, n]`` has constant indices and becomes a
    plain local variable ``acc__m_n`` (initialised to ``0.0`` of the given dtype).

``splice(part)``
    a statement: replaced by the body of ``part``, a module-level function marked ``@kernel_part``,
    before anything else is expanded. Kernels that share a piece of code (the SGEMM's copies and its
    epilogue) keep it in one place this way: the piece is pasted in, not called, so it reads and
    writes the kernel's own variables and constants and compiles exactly as if written inline.

``unroll(N, llvm=FLAG)``, ``registers(..., dtype=D, llvm=FLAG)`` with FLAG a true constant
    the loop stays ``for i in range(N)`` and the array is a zeroed ``cuda.local.array``: LLVM unrolls
    the loop (NVVM's -O3 at the link) and promotes the array to registers when every index is then a
    constant. numba types and lowers one loop body instead of N: the chapter's SGEMM compiles about 5x
    faster this way (bench/compile_experiments.md). FLAG false: as without it. ``nest=K`` (with FLAG true):
    the loop becomes two, N // K by K, that LLVM unrolls one after the other (a 64-long loop of a few
    instructions each is over its full-unroll threshold; 8 and 8 are not). ``init=False`` leaves
    such a local array unzeroed (for fragments written before they are read; numba then types no
    zeroing loops); scalarised registers are always zeroed. ``local_dtype``: the local array's
    dtype where it differs from ``dtype`` (None for registers typed by what is assigned to them).
    On the simulator, which has no LLVM, FLAG counts as false: the kernel runs expanded, the same statements
    the loops stand for, with every register index checked here (four times faster in Python than
    loops over simulated local arrays: the SGEMM's simulator tests 27 -> 6 s).

With ``static_ifs=True``, ``if`` statements and ``x if c else y`` whose test is a compile-time
constant (``if EDGES:``, ``if dot == ISSUE_AFTER:``) keep only the branch taken, and constant operands
of ``and``/``or`` are dropped. numba would prune those branches itself, but only after inlining every
call in them: a closure called from an unrolled loop is otherwise inlined once per iteration.

Array indices are made unsigned, as in CUDA C (``arr[i]`` becomes ``arr[uint64(i)]``): numba
otherwise guards every signed index against negative values ("wrap-around"), which costs a compare
and a select per load in the inner loop. Negative indices therefore do not count from the end. On the
simulator the cast is :func:`sim_index`: the index itself, refused when negative (numpy would count it from
the end; on the GPU it reads far out of bounds), four times cheaper than building a numpy ``uint64``.

Everything else (names of constants such as ``BM`` or ``STAGES``) is resolved from the keyword
arguments of :func:`unrolled` and the function's globals, like any numba global.
"""

from __future__ import annotations

import ast
import copy
import functools
import hashlib
import importlib.util
import inspect
import itertools
import os
import sysconfig
import textwrap
from pathlib import Path
from typing import Any


def unroll(n, llvm=False, nest=None):  # pragma: no cover - a marker, rewritten away by unrolled()
    """Marker: ``for i in unroll(N)`` is expanded at compile time (see the module doc)."""
    return range(n)


def registers(*shape, dtype=None, llvm=False, init=True, local_dtype=None):  # pragma: no cover - a marker, rewritten away by unrolled()
    """Marker: a register array with compile-time shape (see the module doc)."""
    raise RuntimeError("registers() only works inside a function passed through unrolled()")


def kernel_part(fn):
    """Marks ``fn`` as a piece of kernel code for ``splice(fn)`` (see the module doc). Its body uses the
    names of the kernels it is spliced into; it is never called."""
    @functools.wraps(fn)
    def not_callable(*args, **kwargs):
        raise RuntimeError(f"{fn.__name__} is a kernel part: splice({fn.__name__}) it into a kernel passed "
                           "through unrolled(); it cannot be called")
    not_callable.kernel_part = fn
    return not_callable


def splice(part):  # pragma: no cover - a marker, rewritten away by unrolled()
    """Marker: the statement ``splice(part)`` becomes the body of ``part`` (see the module doc)."""
    raise RuntimeError("splice() only works inside a function passed through unrolled()")


class UnrollError(SyntaxError):
    pass


class _Splice(ast.NodeTransformer):
    """``splice(part)`` statements -> the statements of ``part``'s body (recursively)."""

    def __init__(self, env: dict[str, Any], depth: int = 0):
        self.env, self.depth = env, depth

    def visit_Expr(self, node):
        v = node.value
        if not (isinstance(v, ast.Call) and isinstance(v.func, ast.Name) and v.func.id == "splice"):
            return node
        if len(v.args) != 1 or v.keywords or not isinstance(v.args[0], ast.Name):
            raise UnrollError(f"splice takes one name: {ast.unparse(v)}")
        part = getattr(self.env.get(v.args[0].id), "kernel_part", None)
        if part is None:
            raise UnrollError(f"splice({v.args[0].id}): not a function marked @kernel_part")
        if self.depth > 8:
            raise UnrollError(f"splice({v.args[0].id}): parts nested more than 8 deep")
        fdef = ast.parse(textwrap.dedent(inspect.getsource(part))).body[0]
        if fdef.args.args or fdef.args.vararg or fdef.args.kwarg or fdef.args.kwonlyargs:
            raise UnrollError(f"kernel part {fdef.name} takes no arguments: it uses the kernel's names")
        body = fdef.body[1:] if ast.get_docstring(fdef) else fdef.body
        return _visit_all(_Splice(self.env, self.depth + 1), body)


def _visit_all(transformer: ast.NodeTransformer, stmts) -> list:
    """``stmts`` through ``transformer``, a statement that became several (or none) spliced in place."""
    out = []
    for stmt in stmts:
        res = transformer.visit(stmt)
        out.extend(res if isinstance(res, list) else [res])
    return out


def _const(node: ast.AST, env: dict[str, Any]):
    """Evaluate a compile-time constant expression (numbers, names bound in env, arithmetic)."""
    try:
        return eval(compile(ast.Expression(body=node), "<unroll>", "eval"), {"__builtins__": {}}, env)
    except Exception as exc:  # noqa: BLE001
        raise UnrollError(f"not a compile-time constant: {ast.unparse(node)} ({exc})") from None


class _Substitute(ast.NodeTransformer):
    def __init__(self, name: str, value: int):
        self.name, self.value = name, value

    def visit_Name(self, node):
        if node.id == self.name and isinstance(node.ctx, ast.Load):
            return ast.copy_location(ast.Constant(self.value), node)
        return node


class _Unroll(ast.NodeTransformer):
    def __init__(self, env: dict[str, Any], local_names: set[str], c_indexing: bool, static_ifs: bool = False,
                 llvm: bool = True):
        self.env = env
        self.llvm = llvm
        self.c_indexing = c_indexing
        self.static_ifs = static_ifs
        self.local_names = local_names
        self.registers: dict[str, tuple[tuple[int, ...], ast.AST | None]] = {}

    # BM * BK -> 1024 when every name in it is a numeric constant (numba wants literal shapes)
    def _foldable(self, node) -> bool:
        for sub in ast.walk(node):
            if isinstance(sub, ast.Name):
                if sub.id in self.local_names or not isinstance(self.env.get(sub.id), (int, float)):
                    return False
                if isinstance(self.env[sub.id], bool):
                    return False
            elif not isinstance(sub, (ast.BinOp, ast.UnaryOp, ast.Constant, ast.operator, ast.unaryop,
                                      ast.Load)):
                return False
        return True

    def visit_BinOp(self, node):
        self.generic_visit(node)
        if self._foldable(node):
            return ast.copy_location(ast.Constant(_const(node, self.env)), node)
        return node

    # static_ifs: a test made of constants, comparisons and and/or/not -> True or False; None otherwise
    def _static(self, node):
        for sub in ast.walk(node):
            if isinstance(sub, ast.Name):
                if sub.id in self.local_names or not isinstance(self.env.get(sub.id), (int, float)):
                    return None
            elif not isinstance(sub, (ast.BinOp, ast.UnaryOp, ast.BoolOp, ast.Compare, ast.Constant, ast.operator,
                                      ast.unaryop, ast.boolop, ast.cmpop, ast.Load)):
                return None
        try:
            return bool(_const(node, self.env))
        except UnrollError:
            return None

    @staticmethod
    def _boolean(node) -> bool:
        """True for an expression whose value is a bool (a comparison, ``not``, and/or of those)."""
        if isinstance(node, ast.BoolOp):
            return all(_Unroll._boolean(v) for v in node.values)
        return isinstance(node, ast.Compare) or isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not) or (
            isinstance(node, ast.Constant) and isinstance(node.value, bool))

    def visit_BoolOp(self, node):
        self.generic_visit(node)
        if not self.static_ifs or not self._boolean(node):   # `x and True` is x only when x is a bool
            return node
        absorbing = isinstance(node.op, ast.Or)        # True absorbs an `or`, False an `and`
        kept = []
        for v in node.values:
            c = self._static(v)
            if c is None:
                kept.append(v)
            elif c == absorbing:
                if kept:                               # evaluated before it: keep them, in order
                    return ast.copy_location(ast.BoolOp(node.op, [*kept, ast.Constant(absorbing)]), node)
                return ast.copy_location(ast.Constant(absorbing), node)
        if not kept:
            return ast.copy_location(ast.Constant(not absorbing), node)
        return kept[0] if len(kept) == 1 else ast.copy_location(ast.BoolOp(node.op, kept), node)

    def visit_UnaryOp(self, node):
        self.generic_visit(node)
        if self.static_ifs and isinstance(node.op, ast.Not) and (c := self._static(node.operand)) is not None:
            return ast.copy_location(ast.Constant(not c), node)
        return node

    def visit_If(self, node):
        if not self.static_ifs:
            return self.generic_visit(node)
        test = self.visit(node.test)
        c = self._static(test)
        if c is None:
            node.test = test
            node.body = self._stmts(node.body) or [ast.Pass()]
            node.orelse = self._stmts(node.orelse)
            return node
        return self._stmts(node.body if c else node.orelse) or [ast.Pass()]

    def visit_IfExp(self, node):
        self.generic_visit(node)
        c = self._static(node.test) if self.static_ifs else None
        return node if c is None else (node.body if c else node.orelse)

    def _stmts(self, stmts):
        return _visit_all(self, stmts)

    # for i in unroll(N): body  ->  body[i=0]; body[i=1]; ...
    def visit_For(self, node):
        it = node.iter
        if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "unroll":
            if not isinstance(node.target, ast.Name) or node.orelse:
                raise UnrollError("unroll loops take one loop variable and no else")
            n = int(_const(it.args[0], self.env))
            if self._by_llvm(it):                     # left a range loop: LLVM unrolls it
                nest = next((int(_const(kw.value, self.env)) for kw in it.keywords if kw.arg == "nest"), None)
                if nest and nest < n:
                    return self._nested(node, n, nest)
                node.iter = ast.Call(func=ast.Name("range", ast.Load()), args=[ast.Constant(n)], keywords=[])
                node.body = self._stmts(node.body) or [ast.Pass()]
                return node
            out = []
            for k in range(n):
                out += self._stmts([_Substitute(node.target.id, k).visit(copy.deepcopy(s)) for s in node.body])
            return out or [ast.Pass()]
        self.generic_visit(node)
        return node

    def _nested(self, node, n, nest):
        """``for i in unroll(N, llvm=True, nest=K)`` -> ``for i__outer in range(N // K): for i__inner in range(K):
        i = i__outer * K + i__inner; body``: LLVM fully unrolls a loop whose unrolled size stays under its threshold,
        so a long loop of a few instructions an iteration (64 scores) is left to it as two short ones."""
        if n % nest:
            raise UnrollError(f"unroll(N, nest=K) needs N a multiple of K: {n} and {nest}")
        i = node.target.id
        outer, inner = f"{i}__outer", f"{i}__inner"
        index = ast.parse(f"{i} = {outer} * {nest} + {inner}").body[0]
        body = self._stmts(node.body) or [ast.Pass()]
        loop = ast.parse(f"for {outer} in range({n // nest}):\n    for {inner} in range({nest}):\n        pass").body[0]
        loop.body[0].body = [index] + body
        return ast.copy_location(ast.fix_missing_locations(loop), node)

    # acc = registers(TM, TN, dtype=float32)  ->  acc__0_0 = float32(0); ...
    def visit_Assign(self, node):
        v = node.value
        if isinstance(v, ast.Call) and isinstance(v.func, ast.Name) and v.func.id == "registers":
            (target,) = node.targets
            shape = tuple(int(_const(a, self.env)) for a in v.args)
            dtype = next((kw.value for kw in v.keywords if kw.arg == "dtype"), None)
            if self._by_llvm(v):
                init = next((kw.value for kw in v.keywords if kw.arg == "init"), None)
                dtype = next((kw.value for kw in v.keywords if kw.arg == "local_dtype"), dtype)
                return self._local_array(node, target.id, shape, dtype, init is None or bool(_const(init, self.env)))
            self.registers[target.id] = (shape, dtype)
            zero = ast.Constant(0.0)
            init = ast.Call(func=dtype, args=[zero], keywords=[]) if dtype is not None else zero
            return [
                ast.copy_location(
                    ast.Assign(targets=[ast.Name(self._reg(target.id, idx), ast.Store())], value=copy.deepcopy(init)),
                    node,
                )
                for idx in itertools.product(*(range(s) for s in shape))
            ]
        self.generic_visit(node)
        return node

    def _by_llvm(self, call) -> bool:
        """``unroll(N, llvm=FLAG)`` / ``registers(..., llvm=FLAG)`` with FLAG a true constant (and LLVM to
        compile it: not on the simulator)."""
        flag = next((kw.value for kw in call.keywords if kw.arg == "llvm"), None)
        return self.llvm and flag is not None and bool(_const(flag, self.env))

    def _local_array(self, node, name, shape, dtype, init: bool):
        """``name = cuda.local.array(shape, dtype)`` and, with ``init``, loops that zero it (llvm=True registers)."""
        if dtype is None:
            raise UnrollError(f"registers(..., llvm=True) needs a dtype or local_dtype: {name}")
        shape_node = ast.Tuple([ast.Constant(d) for d in shape], ast.Load())
        local_array = ast.Attribute(ast.Attribute(ast.Name(_CUDA, ast.Load()), "local", ast.Load()), "array",
                                    ast.Load())
        out = [ast.Assign(targets=[ast.Name(name, ast.Store())],
                          value=ast.Call(func=local_array, args=[shape_node, copy.deepcopy(dtype)], keywords=[]))]
        if not init:
            return [ast.copy_location(out[0], node)]
        index = [f"{_U64}(__z{k})" for k in range(len(shape))]
        zero = ast.parse(f"{name}[{', '.join(index)}] = 0.0").body[0]
        zero.value = ast.Call(func=copy.deepcopy(dtype), args=[ast.Constant(0.0)], keywords=[])
        for k in reversed(range(len(shape))):
            zero = ast.For(target=ast.Name(f"__z{k}", ast.Store()), iter=ast.Call(
                func=ast.Name("range", ast.Load()), args=[ast.Constant(shape[k])], keywords=[]), body=[zero], orelse=[])
        return [ast.copy_location(stmt, node) for stmt in out + [zero]]

    def visit_Subscript(self, node):
        self.generic_visit(node)
        if isinstance(node.value, ast.Name) and node.value.id in self.registers:
            shape, _ = self.registers[node.value.id]
            idx = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            vals = tuple(int(_const(i, self.env)) for i in idx)
            if len(vals) != len(shape) or any(not 0 <= v < s for v, s in zip(vals, shape)):
                raise UnrollError(f"register index {vals} outside {node.value.id}{shape}")
            return ast.copy_location(ast.Name(self._reg(node.value.id, vals), node.ctx), node)
        if self.c_indexing and not isinstance(node.slice, ast.Slice):
            elts = node.slice.elts if isinstance(node.slice, ast.Tuple) else None
            if elts is None:
                node.slice = self._unsigned(node.slice)
            elif not any(isinstance(e, ast.Slice) for e in elts):
                node.slice = ast.Tuple([self._unsigned(e) for e in elts], ast.Load())
        return node

    @staticmethod
    def _unsigned(index):
        return ast.Call(func=ast.Name(_U64, ast.Load()), args=[index], keywords=[])

    @staticmethod
    def _reg(name, idx):
        return f"{name}__{'_'.join(map(str, idx))}"


_U64 = "__asyncpipe_uint64"


def sim_index(i):
    """The simulator's unsigned index (what ``uint64(i)`` is on the GPU): ``i``, or an IndexError if negative."""
    if i < 0:
        raise IndexError(f"negative array index {i}: indices are unsigned in unrolled kernels (as in CUDA C), "
                         "so on the GPU it reads far outside the array")
    return i
_CUDA = "__asyncpipe_cuda"                          # numba.cuda, for llvm=True registers (cuda.local.array)


def unrolled(fn=None, /, *, c_indexing=True, static_ifs=False, **constants):
    """Return ``fn`` with its ``unroll`` loops expanded and its ``registers`` arrays scalarised,
    compile-time names taken from ``constants`` first, then from ``fn``'s globals.

    Use as a decorator (``@unrolled``) or a call (``unrolled(fn, BM=128)``): the result is a plain
    Python function, ready for ``cuda.jit``.
    """
    if fn is None:
        return lambda f: unrolled(f, c_indexing=c_indexing, static_ifs=static_ifs, **constants)
    from numba import cuda, uint64

    from ..backend import simulating

    sim = simulating()
    src = textwrap.dedent(inspect.getsource(fn))
    tag = ",".join(f"{k}={getattr(v, '__name__', repr(v))}" for k, v in sorted(constants.items()))
    tag += ",simulator" if sim else ""
    # The expansion (a few tenths of a second for a GEMM) is done once per input: the file is named by
    # what it is made from, so a new process finds it and skips the AST work.
    path = _source_path(fn, src, tag, c_indexing, static_ifs)
    source = _read_source(path)
    if source is None:
        source = _expand(fn, src, constants, c_indexing, static_ifs, llvm=not sim)
        _write_source(path, fn, tag, source)
    index = sim_index if sim else uint64
    module = _load_as_module(path, {**fn.__globals__, **constants, _U64: index, _CUDA: cuda})
    out = getattr(module, fn.__name__)
    if out is fn:              # the source read was not fn's: its file changed since it was imported
        raise UnrollError(f"{fn.__qualname__}: its source in {inspect.getsourcefile(fn)} no longer defines it (the "
                          "file changed since it was imported): restart the process or re-import the module")
    out.__doc__ = fn.__doc__
    out.__wrapped__ = fn
    out.unrolled_source = source
    out.unrolled_from = (fn, dict(c_indexing=c_indexing, static_ifs=static_ifs, **constants))   # to redo it elsewhere
    return out


def _expand(fn, src: str, constants: dict, c_indexing: bool, static_ifs: bool = False, llvm: bool = True) -> str:
    tree = ast.parse(src)
    fdef = tree.body[0]
    fdef.decorator_list = []
    env = {**fn.__globals__, **constants}
    fdef = _Splice(env).visit(fdef)
    local_names = {a.arg for a in fdef.args.args} | {
        n.id for n in ast.walk(fdef) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
    }
    fdef = _Unroll(env, local_names, c_indexing, static_ifs, llvm).visit(fdef)
    tree.body[0] = fdef
    ast.fix_missing_locations(tree)
    return ast.unparse(tree) + "\n"


@functools.lru_cache(maxsize=None)
def package_digest() -> str:
    """A hash of asyncpipe's Python sources: a kernel's expansion depends on compile-time constants that
    may live in any of its modules (``BM`` in the kernel's, ``WGMMA_M`` in ``ptx.wgmma``), and on this
    expander itself."""
    root = Path(__file__).resolve().parents[1]
    h = hashlib.sha1()
    for path in sorted(root.rglob("*.py")):
        h.update(str(path.relative_to(root)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:12]


def inputs_digest(fn) -> str:
    """A hash of what an expansion of ``fn`` (and numba's cached build of it, which keys on the expansion's file)
    reads beyond its own source: the text of its file, of the files of the kernel parts its globals hold (a part's
    body, and the module constants it folds, live there; a part edited in a user's module, or a broken copy of a
    kernel, must not load the expansion of the part before) and of the files of the numba device functions they
    hold (numba's cache does not follow a call into another file), and the values of its plain (bool, int, float,
    str) globals, and of the user's modules it holds whole (``helpers.f(...)``: ``_user_file``; asyncpipe's own
    are in ``package_digest``)."""
    h = hashlib.sha1()
    files = {inspect.getsourcefile(fn)}
    for name, value in sorted(fn.__globals__.items()):
        try:
            file, text = _global_input(name, value)
        except Exception:                      # an object that answers attribute lookups in its own way: not ours
            continue
        files.add(file)
        h.update(text)
    for path in sorted(f for f in files if f):
        try:
            h.update(Path(path).read_bytes())
        except OSError:           # source from an exec'd string or a vanished file: its own source still counts
            h.update(path.encode())
    return h.hexdigest()[:12]


def _global_input(name: str, value) -> tuple:
    """(a file, text) that a kernel's global ``name`` brings into its expansion: a kernel part's file and text, a
    numba device function's file (outside asyncpipe), the user's module's file, a plain constant's value."""
    if callable(value):
        part = getattr(value, "kernel_part", None)
        if part is not None:                   # its own text too: a Jupyter cell's file is not on disk
            return inspect.getsourcefile(part), inspect.getsource(part).encode()
        device = getattr(value, "py_func", None)   # a numba dispatcher
        if inspect.isfunction(device) and not (device.__module__ or "").startswith("asyncpipe."):
            return inspect.getsourcefile(device), b""
    if inspect.ismodule(value) and _user_file(getattr(value, "__file__", None)):
        return value.__file__, b""              # helpers.f(...): the user's module, held whole
    if isinstance(value, (bool, int, float, str)) and not name.startswith("__"):
        return None, f"{name}={value!r};".encode()
    return None, b""


def _user_file(path) -> bool:
    """A ``.py`` file outside the interpreter's libraries (stdlib, site-packages) and outside asyncpipe: one the
    user may edit between runs."""
    if not path or not path.endswith(".py"):
        return False
    real = os.path.realpath(path)
    return not any(real.startswith(lib) for lib in _library_roots())


@functools.lru_cache(maxsize=None)
def _library_roots() -> tuple:
    """The interpreter's library folders and asyncpipe's, resolved, each with a trailing separator."""
    libs = {sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    libs.add(str(Path(__file__).resolve().parents[1]))
    return tuple(os.path.realpath(lib) + os.sep for lib in libs)


def _source_path(fn, src: str, tag: str, c_indexing: bool, static_ifs: bool = False) -> Path:
    """The unrolled file of ``fn`` with these constants: named by a hash of the function's source, what else its
    expansion reads (``inputs_digest``), the constants, asyncpipe's sources and the shims' text (a shim edit must
    not load a stale cached kernel from numba's cache, which keys on this file)."""
    from ..jit_cache import shims_digest

    key = (f"{fn.__module__}.{fn.__qualname__}|{tag}|{c_indexing}|{static_ifs}|{package_digest()}|{shims_digest()}|"
           f"{inputs_digest(fn)}|{src}")
    return cache_dir() / f"{fn.__name__}_{hashlib.sha1(key.encode()).hexdigest()[:16]}.py"


def _read_source(path: Path) -> str | None:
    try:
        text = path.read_text()
    except OSError:
        return None
    header, _, source = text.partition("\n")
    return source if header.startswith("# unrolled from ") and source else None


def _write_source(path: Path, fn, tag: str, source: str) -> None:
    """Written once (through a temporary file and a rename): its mtime, which numba's cache index
    records, stays the same."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(f"# unrolled from {fn.__module__}.{fn.__qualname__} with {tag}\n{source}")
    os.replace(tmp, path)


def cache_dir() -> Path:
    """Where unrolled sources are written: ``$ASYNCPIPE_CACHE_DIR`` or ``~/.cache/asyncpipe``."""
    base = os.environ.get("ASYNCPIPE_CACHE_DIR") or Path.home() / ".cache" / "asyncpipe"
    return Path(base) / "unrolled"


def _load_as_module(path: Path, namespace: dict):
    """Run the unrolled source from its file, so that numba's on-disk cache (``cache=True``) can key on
    it."""
    spec = importlib.util.spec_from_file_location(f"asyncpipe_unrolled.{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    module.__dict__.update({k: v for k, v in namespace.items() if not k.startswith("__") or k in (_U64, _CUDA)})
    spec.loader.exec_module(module)
    return module
