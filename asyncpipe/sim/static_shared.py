"""A kernel's static shared memory, known before it runs: the ``cuda.shared.array`` calls in its
numba IR (and in the device functions it calls), their shapes and dtypes evaluated from constants,
globals and closure variables, as numba must evaluate them to compile the kernel.

The launch checks use it to refuse, before any thread runs, what the GPU refuses at launch (static
plus dynamic shared memory over the limit). An allocation whose shape this cannot evaluate counts
as 0 bytes here (the allocator still checks it when the kernel reaches it).
"""

from __future__ import annotations

import math
import operator
import weakref


_cache: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_UNKNOWN = object()
_DEPTH_MAX = 16


def static_shared_bytes(kernel) -> int:
    """Bytes of the static shared arrays of ``kernel`` (a numba simulator kernel or a function), each
    call site counted once (as the simulator and numba allocate them)."""
    fn = getattr(kernel, "fn", kernel)
    try:
        return _cache[fn]
    except (KeyError, TypeError):
        pass
    sites: dict = {}
    _collect(fn, sites, set(), 0)
    total = sum(sites.values())
    try:
        _cache[fn] = total
    except TypeError:
        pass
    return total


def _collect(fn, sites, seen, depth):
    code = getattr(fn, "__code__", None)
    if code is None or code in seen or depth > _DEPTH_MAX:
        return
    seen.add(code)
    try:
        from numba.core import bytecode, ir, interpreter

        # numba's bytecode-to-IR step alone (run_frontend without its post-processing, whose live-variable
        # analysis took most of the time on an unrolled kernel): the definitions are all this reads
        func_id = bytecode.FunctionIdentity.from_function(fn)
        fir = interpreter.Interpreter(func_id).interpret(bytecode.ByteCode(func_id=func_id))
    except Exception:       # noqa: BLE001 - not analysable (the allocator checks it at run time)
        return
    for block in fir.blocks.values():
        for st in block.body:
            if not (isinstance(st, ir.Assign) and isinstance(st.value, ir.Expr) and st.value.op == "call"):
                continue
            call = st.value
            if _is_shared_array(fir, call.func):
                sites[(code, st.loc.line, st.target.name)] = _array_bytes(fir, call)
                continue
            target = _value(fir, call.func, 0)
            if _is_device_function(target):
                _collect(getattr(target, "fn", None) or target.py_func, sites, seen, depth + 1)


def _is_device_function(obj) -> bool:
    """A ``cuda.jit(device=True)`` function: the simulator's ``FakeCUDAKernel`` or numba's dispatcher."""
    if getattr(obj, "_device", False) and getattr(obj, "fn", None) is not None:
        return True
    options = getattr(obj, "targetoptions", None)
    return isinstance(options, dict) and bool(options.get("device")) and hasattr(obj, "py_func")


def _definition(fir, var):
    try:
        return fir.get_definition(var)
    except Exception:       # noqa: BLE001 - several definitions (a variable assigned in branches)
        return None


def _is_shared_array(fir, func) -> bool:
    from numba.core import ir

    d = _definition(fir, func)
    if not (isinstance(d, ir.Expr) and d.op == "getattr" and d.attr == "array"):
        return False
    parent = _definition(fir, d.value)
    return isinstance(parent, ir.Expr) and parent.op == "getattr" and parent.attr == "shared"


def _array_bytes(fir, call) -> int:
    args = list(call.args)
    kws = dict(call.kws)
    shape = _value(fir, args[0] if args else kws.get("shape"), 0)
    dtype = _value(fir, args[1] if len(args) > 1 else kws.get("dtype"), 0)
    if shape is _UNKNOWN or dtype is _UNKNOWN:
        return 0
    try:
        from .arrays import as_dtype, as_shape

        return math.prod(as_shape(shape)) * as_dtype(dtype).itemsize
    except Exception:       # noqa: BLE001 - not a shape numba accepts either: the allocator reports it
        return 0


_BINOPS = {"+": operator.add, "-": operator.sub, "*": operator.mul, "//": operator.floordiv,
           "%": operator.mod, "<<": operator.lshift, ">>": operator.rshift, "**": operator.pow,
           "&": operator.and_, "|": operator.or_}


def _value(fir, var, depth):
    """The compile-time value of ``var`` (a constant, a global, a closure variable, arithmetic and
    tuples of those, attributes of them), or ``_UNKNOWN``."""
    from numba.core import ir

    if var is None or depth > 32:
        return _UNKNOWN
    d = _definition(fir, var) if isinstance(var, ir.Var) else var
    if isinstance(d, (ir.Const, ir.Global, ir.FreeVar)):
        return d.value
    if isinstance(d, ir.Var):
        return _value(fir, d, depth + 1)
    if not isinstance(d, ir.Expr):
        return _UNKNOWN
    if d.op == "getattr":
        base = _value(fir, d.value, depth + 1)
        return _UNKNOWN if base is _UNKNOWN else getattr(base, d.attr, _UNKNOWN)
    if d.op == "build_tuple":
        items = tuple(_value(fir, v, depth + 1) for v in d.items)
        return _UNKNOWN if any(i is _UNKNOWN for i in items) else items
    if d.op in ("binop", "inplace_binop"):
        a, b = _value(fir, d.lhs, depth + 1), _value(fir, d.rhs, depth + 1)
        if a is _UNKNOWN or b is _UNKNOWN:
            return _UNKNOWN
        try:
            return d.fn(a, b) if callable(d.fn) else _BINOPS[d.fn](a, b)
        except Exception:       # noqa: BLE001
            return _UNKNOWN
    if d.op == "unary" and d.fn in ("-", operator.neg):
        v = _value(fir, d.value, depth + 1)
        return _UNKNOWN if v is _UNKNOWN else -v
    if d.op == "static_getitem":
        v = _value(fir, d.value, depth + 1)
        try:
            return _UNKNOWN if v is _UNKNOWN else v[d.index]
        except Exception:       # noqa: BLE001
            return _UNKNOWN
    return _UNKNOWN


__all__ = ["static_shared_bytes"]
