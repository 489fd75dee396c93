"""asyncpipe's tensor-map rules against the driver's (issue 18, section 1): the sampler of random tiled layouts
(``asyncpipe.spec.tensor_map_sample``) covers the whole parameter space and is deterministic per seed; on a
Hopper GPU, ``validate_tiled`` and ``cuTensorMapEncodeTiled`` agree on fresh layouts; and they agree on the
driver verdicts committed under ``tests/data`` (recorded on an H200 by ``scripts/tensor_map_verdicts.py``)."""

import collections
import contextlib
import importlib.util
import io
import json
import math
import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from asyncpipe.constants import GLOBAL_DIM_MAX, GLOBAL_STRIDE_MAX, TMA_BOX_BYTES_MAX
from asyncpipe.errors import AsyncpipeError
from asyncpipe.spec import tensor_map_sample as tms
from tests.conftest import gpu_cc

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
N_COVER = 40_000

# The sampler's kinds were drawn against asyncpipe's first rules (from the documentation). The rules found since from
# the H200's verdicts refuse some "valid" and "edge" draws (by these rules) and accept some "off" ones (these kinds:
# the driver takes a zero stride and interleave "32B" with any swizzle; off:dtype_unknown, for the 4-byte float modes).
RULES_FROM_THE_DRIVER = ("the box must fit in", "the box's innermost row must be a multiple of")
OFF_THE_DRIVER_TAKES = ("off:stride_zero", "off:interleave32_swizzle", "off:dtype_unknown")
FOUR_BYTE_FLOAT_MODES = ("float32_ftz", "tfloat32", "tfloat32_ftz")
# The one exception to agreement: the packed 4/6-bit dtypes, which asyncpipe refuses as not supported (their packing
# rules are not modelled: asyncpipe.spec.tensor_map). A layout of one that the driver accepts is counted, not failed.
PACKED_DTYPES = ("16u4_align8b", "16u4_align16b", "16u6_align16b")
PACKED_RULE = "asyncpipe does not support the packed 4/6-bit dtypes"


def _fresh_seed(what: str) -> int:
    seed = int.from_bytes(os.urandom(4), "little")
    print(f"{what}: seed {seed}")
    return seed


def _script():
    spec = importlib.util.spec_from_file_location("tensor_map_verdicts", ROOT / "scripts" / "tensor_map_verdicts.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def refused(api, rule, value, fn, *args, **kwargs):
    with pytest.raises(AsyncpipeError) as info:
        fn(*args, **kwargs)
    msg = str(info.value)
    assert msg.startswith(f"{api}: {rule}"), msg
    assert f", got {value}" in msg, msg


# ---------------------------------------------------------------------------------------------
# The sampler: coverage, determinism, the records
# ---------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def drawn():
    seed = _fresh_seed("coverage draw")
    return seed, tms.draw(N_COVER, seed)


def test_sampler_covers_every_value(drawn):
    """Every value the brief lists appears at least once in 40,000 draws (computed here from the raw fields)."""
    from cuda.bindings import driver

    _, layouts = drawn
    seen = collections.defaultdict(set)
    for lay in layouts:
        seen["dtype"].add("CU_TENSOR_MAP_DATA_TYPE_" + tms.DATA_TYPES[lay.dtype][0])
        seen["rank"].add(lay.rank)
        seen["swizzle"].add(tms.SWIZZLES[lay.swizzle])
        seen["interleave"].add(tms.INTERLEAVES[lay.interleave])
        seen["interleave x swizzle"].add((lay.interleave, lay.swizzle))
        seen["l2"].add(tms.L2_PROMOTIONS[lay.l2_promotion])
        floating = lay.dtype in tms.FLOAT_DTYPES or lay.dtype.startswith(("float", "tfloat"))
        seen["oob"].add((tms.OOB_FILLS[lay.oob_fill], "float" if floating else "int"))
        for n in lay.shape:
            seen["dim"].add(n if n in (0, 1, GLOBAL_DIM_MAX, GLOBAL_DIM_MAX + 1) else
                            "small" if n <= 256 else "huge" if n > GLOBAL_DIM_MAX else "large")
        for s in lay.strides[:-1]:
            seen["stride"].add("0" if s == 0 else "misaligned" if s % 16 else "16 not 32" if s % 32 else "32")
            seen["stride"].add("2**39..2**40" if 2 ** 39 <= s < GLOBAL_STRIDE_MAX else "2**40" if s == GLOBAL_STRIDE_MAX
                               else "over 2**40" if s > GLOBAL_STRIDE_MAX else "below 2**39")
        for b, n in zip(lay.box, lay.shape):
            seen["box"].add(b if b <= 256 else "257+")
            seen["box vs extent"].add("over" if b > n else "equal" if b == n else "inside")
        seen["element stride"].update(lay.element_strides)
        a = lay.address
        seen["address"].add("null" if a == 0 else "32" if a % 32 == 0 else "16 not 32" if a % 16 == 0
                            else f"{a % 16} past 16")
    want = {
        "dtype": {m.name for m in driver.CUtensorMapDataType},
        "rank": set(range(1, 7)),
        "swizzle": {m.name for m in driver.CUtensorMapSwizzle},
        "interleave": {m.name for m in driver.CUtensorMapInterleave},
        "interleave x swizzle": {(i, s) for i in ("none", "16B", "32B") for s in ("none", "32B", "64B", "128B")},
        "l2": {m.name for m in driver.CUtensorMapL2promotion},
        "oob": {(m.name, k) for m in driver.CUtensorMapFloatOOBfill for k in ("float", "int")},
        "dim": {0, 1, "small", "large", GLOBAL_DIM_MAX, GLOBAL_DIM_MAX + 1, "huge"},
        "stride": {"0", "misaligned", "16 not 32", "32", "below 2**39", "2**39..2**40", "2**40", "over 2**40"},
        "box": set(range(0, 257)) | {"257+"},
        "box vs extent": {"over", "equal", "inside"},
        "element stride": set(range(0, 10)),
        "address": {"null", "32", "16 not 32", "1 past 16", "2 past 16", "4 past 16", "8 past 16"},
    }
    missing = {k: sorted(map(str, v - seen[k])) for k, v in want.items() if v - seen[k]}
    assert not missing, f"never drawn in {N_COVER} layouts: {missing}"


def test_sampler_shares(drawn):
    """About half the layouts sit one parameter from asyncpipe's rules; a good share is accepted."""
    _, layouts = drawn
    near = sum(lay.kind.startswith(("edge:", "off:")) for lay in layouts) / len(layouts)
    assert 0.4 <= near <= 0.6, near
    sample = layouts[:4000]
    verdicts = [lay.asyncpipe_verdict() for lay in sample]
    accepted = sum(v == "ok" for v, _ in verdicts) / len(sample)
    assert 0.35 <= accepted <= 0.7, accepted
    assert not [v for v, _ in verdicts if v.startswith("python ")], "validate_tiled raised something not a rule"
    # a "valid" or "edge" layout breaks none of asyncpipe's rules but those found from the driver, an "off" one
    # breaks one unless the driver turned out to take it
    for lay, (v, rule) in zip(sample, verdicts):
        if lay.kind.startswith(("valid", "edge:")):
            assert v == "ok" or rule.startswith(RULES_FROM_THE_DRIVER), (lay, v)
        elif lay.kind.startswith("off:") and v == "ok":
            assert lay.kind in OFF_THE_DRIVER_TAKES, (lay, v)
            assert lay.kind != "off:dtype_unknown" or lay.dtype in FOUR_BYTE_FLOAT_MODES, (lay, v)


def test_sampler_is_deterministic_per_seed():
    seed = _fresh_seed("determinism")
    first = tms.draw(600, seed)
    assert tms.draw(600, seed) == first
    assert tms.draw(200, seed) == first[:200]                  # a longer draw starts with a shorter one's
    assert tms.draw(600, seed + 1) != first
    assert len({lay.kind for lay in first}) > 10


def test_record_orders_and_round_trip():
    for lay in tms.draw(300, _fresh_seed("records")):
        rec = json.loads(json.dumps(lay.record("CUDA_SUCCESS")))
        d, n = rec["driver"], rec["numpy"]
        assert d["tensorRank"] == len(n["shape"]) == lay.rank
        assert d["globalDim"] == n["shape"][::-1] and d["boxDim"] == n["box"][::-1]
        assert d["elementStrides"] == n["element_strides"][::-1]
        assert d["globalStrides"] == n["strides"][-2::-1] and len(d["globalStrides"]) == lay.rank - 1
        assert d["globalAddress"] == n["address"] and d["tensorDataType"].startswith("CU_TENSOR_MAP_DATA_TYPE_")
        assert rec["driver_verdict"] == "CUDA_SUCCESS"
        assert tms.Layout.from_record(rec) == lay
        assert (rec["asyncpipe"] == "ok") == (rec["asyncpipe_rule"] is None)


def test_rebased_keeps_alignment_and_null():
    base = 0x5000_0000_0000
    for lay in tms.draw(300, _fresh_seed("rebase")):
        moved = lay.rebased(base)
        assert moved.address % 256 == lay.address % 256 and (moved.address == 0) == (lay.address == 0)
        assert moved.asyncpipe_verdict()[1] == lay.asyncpipe_verdict()[1]      # the same rule (the message names
        assert (moved.asyncpipe_verdict()[0] == "ok") == (lay.asyncpipe_verdict()[0] == "ok")   # the address)


# ---------------------------------------------------------------------------------------------
# The driver's side offline: the arguments marshal, failures are named
# ---------------------------------------------------------------------------------------------
def test_encoder_passes_the_driver_order():
    """A stand-in cuTensorMapEncodeTiled over the real cuda.bindings types sees each layout's raw parameters."""
    from cuda.bindings import driver

    calls = []

    def cuTensorMapEncodeTiled(*args):
        calls.append(args)
        return driver.CUresult.CUDA_ERROR_INVALID_VALUE, None

    fake = SimpleNamespace(**{k: getattr(driver, k) for k in dir(driver) if k.startswith(("CU", "cuuint"))},
                           cuTensorMapEncodeTiled=cuTensorMapEncodeTiled)
    enc = tms.DriverEncoder(fake)
    assert enc.absent == []
    for lay in tms.draw(300, _fresh_seed("encoder")):
        assert enc.verdict(lay) == "CUDA_ERROR_INVALID_VALUE"
        dt, rank, address, dims, strides, box, es, il, sw, l2, oob = calls[-1]
        assert dt.name == "CU_TENSOR_MAP_DATA_TYPE_" + tms.DATA_TYPES[lay.dtype][0]
        assert rank == len(lay.shape) and address == lay.address
        assert [int(v) for v in dims] == list(reversed(lay.shape)) and [int(v) for v in box] == list(reversed(lay.box))
        assert [int(v) for v in es] == list(reversed(lay.element_strides))
        assert isinstance(dims[0], driver.cuuint64_t) and isinstance(box[0], driver.cuuint32_t)
        if lay.rank == 1:        # one ignored stride, as asyncpipe's _encode passes (not a null pointer)
            assert len(strides) == 1 and int(strides[0]) % 16 == 0
        else:
            assert [int(v) for v in strides] == list(reversed(lay.strides[:-1]))
        assert (il.name, sw.name, l2.name, oob.name) == tuple(
            table[v] for table, v in ((tms.INTERLEAVES, lay.interleave), (tms.SWIZZLES, lay.swizzle),
                                      (tms.L2_PROMOTIONS, lay.l2_promotion), (tms.OOB_FILLS, lay.oob_fill)))


def test_encoder_arguments_convert_in_the_real_binding():
    """The real cuTensorMapEncodeTiled converts every drawn layout's arguments (a TypeError or OverflowError would
    come back as a 'python ...' verdict); with no driver it then fails to load the library, which is fine."""
    from cuda.bindings import driver

    enc = tms.DriverEncoder(driver)
    for lay in tms.draw(200, _fresh_seed("marshal")):
        try:
            verdict = enc.verdict(lay)
        except Exception as exc:     # no driver here: the call got past the conversions
            assert not isinstance(exc, (TypeError, OverflowError, ValueError)), exc
            continue
        if lay.rank > 5:     # cuda.bindings takes at most 5 entries per list: refused before the driver
            assert verdict.startswith("python ValueError") and "must be <= 5" in verdict, (lay, verdict)
        else:
            assert not verdict.startswith("python "), (lay, verdict)


def test_error_messages(tmp_path):
    from cuda.bindings import driver

    refused("tensor_map_sample.draw", "n must be a non-negative integer", "-1", tms.draw, -1, 0)
    refused("tensor_map_sample.draw", "n must be a non-negative integer", "1.5", tms.draw, 1.5, 0)
    refused("tensor_map_sample.draw", "seed must be an integer", "'x'", tms.draw, 3, "x")
    lay = tms.draw(1, 0)[0]
    refused("tensor_map_sample.Layout.rebased", "a base address must be 256-byte aligned", "0x1010", lay.rebased,
            0x1010)
    refused("tensor_map_sample.Layout.from_record", "a verdict line must hold a layout's 'kind' and 'numpy' fields",
            "KeyError: 'numpy'", tms.Layout.from_record, {"kind": "valid"})
    refused("tensor_map_sample.write_records", "a verdict file's name must end in .jsonl.gz", str(tmp_path / "v.json"),
            tms.write_records, tmp_path / "v.json", {}, [])
    no_meta = tmp_path / "v.jsonl.gz"
    import gzip

    with gzip.open(no_meta, "wt") as f:
        f.write('{"kind": "valid"}\n')
    refused("tensor_map_sample.read_records", "a verdict file must open with its {\"meta\": ...} line",
            "[{'kind': 'valid'}]", tms.read_records, no_meta)

    def cuInit(flags):
        return (driver.CUresult.CUDA_ERROR_NO_DEVICE,)

    fake = SimpleNamespace(CUresult=driver.CUresult, cuInit=cuInit)
    refused("tensor_map_sample.driver_call", "cuInit must succeed [CUDA driver]", "CUDA_ERROR_NO_DEVICE",
            tms.driver_call, fake, cuInit, 0)
    refused("tensor_map_sample.driver_call", "cuInit must succeed [CUDA driver]", "CUDA_ERROR_NO_DEVICE",
            tms.open_driver, fake)

    def cuMemAlloc(nbytes):
        return driver.CUresult.CUDA_SUCCESS, 0x7000_0000_0008

    fake = SimpleNamespace(CUresult=driver.CUresult, cuMemAlloc=cuMemAlloc)
    refused("tensor_map_sample.address_probe", "cuMemAlloc must return a 256-byte aligned address [CUDA driver]",
            "0x700000000008", tms.address_probe, fake, None, [])


# ---------------------------------------------------------------------------------------------
# Comparing verdicts: the classes, the files, the script
# ---------------------------------------------------------------------------------------------
def _with_driver_verdicts(layouts, flip=()):
    """Records whose driver verdict agrees with asyncpipe's, except at the indices in ``flip``."""
    out = []
    for i, lay in enumerate(layouts):
        ok = lay.asyncpipe_verdict()[0] == "ok"
        out.append(lay.record("CUDA_SUCCESS" if ok != (i in flip) else "CUDA_ERROR_INVALID_VALUE"))
    return out


def test_disagreements_and_classes():
    layouts = tms.draw(400, _fresh_seed("classes"))
    ok = [i for i, lay in enumerate(layouts) if lay.asyncpipe_verdict()[0] == "ok"]
    bad = [i for i, lay in enumerate(layouts) if lay.asyncpipe_verdict()[0] != "ok"]
    records = _with_driver_verdicts(layouts, flip={ok[0], bad[0], bad[1]})
    found = tms.disagreements(records)
    assert sorted(cls for _, cls in found) == [tms.CLASSES[1], tms.CLASSES[2], tms.CLASSES[2]]
    assert tms.disagreements(_with_driver_verdicts(layouts)) == []
    assert tms.disagreements([lay.record(None) for lay in layouts]) == []     # no driver verdict: nothing to compare
    # the verdict compared is validate_tiled's now, not the one stored in the file
    stale = dict(records[ok[1]], asyncpipe="an older rule's message")
    assert tms.disagreements([stale]) == []
    assert tms.verdict_class("ok", "CUDA_SUCCESS") == "agree" and tms.verdict_class("x", "CUDA_ERROR_X") == "agree"


def test_write_read_round_trip(tmp_path):
    layouts = tms.draw(50, _fresh_seed("files"))
    path = tmp_path / "v.jsonl.gz"
    assert tms.write_records(path, {"seed": 1}, _with_driver_verdicts(layouts)) == 50
    meta, records = tms.read_records(path)
    assert meta == {"seed": 1} and [tms.Layout.from_record(r) for r in records] == layouts


def test_script_without_driver(tmp_path):
    out = tmp_path / "v.jsonl.gz"
    seed = _fresh_seed("script")
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        assert _script().main(["--n", "300", "--seed", str(seed), "--out", str(out), "--no-driver"]) == 0
    text = stdout.getvalue()
    assert f"300 layouts (seed {seed})" in text and "no driver verdicts (--no-driver)" in text, text
    meta, records = tms.read_records(out)
    assert meta["n"] == 300 and meta["seed"] == seed and "driver" not in meta
    assert [tms.Layout.from_record(r) for r in records] == tms.draw(300, seed)
    assert all(r["driver_verdict"] is None for r in records)
    assert [r["asyncpipe"] for r in records] == [lay.asyncpipe_verdict()[0] for lay in tms.draw(300, seed)]


def _stand_in_driver(alloc: int):
    """cuda.bindings' enums and types with stand-in calls: a device, an allocation at ``alloc``, and an encoder
    that refuses the made-up addresses (as if it looked at the memory) and ranks above 3 (a rule of its own)."""
    from cuda.bindings import driver

    ok, bad = driver.CUresult.CUDA_SUCCESS, driver.CUresult.CUDA_ERROR_INVALID_VALUE

    def cuTensorMapEncodeTiled(dt, rank, address, dims, strides, box, es, il, sw, l2, oob):
        made_up = tms.MADE_UP_BASE <= address < tms.MADE_UP_BASE + 256
        fine = (address % 16 == 0 and address and rank <= 3 and all(1 <= int(b) <= 256 for b in box)
                and all(1 <= int(n) <= 2 ** 32 for n in dims))
        return (bad if made_up or not fine else ok), None

    calls = {"cuInit": (ok,), "cuDeviceGet": (ok, 0), "cuDevicePrimaryCtxRetain": (ok, "ctx"), "cuCtxSetCurrent": (ok,),
             "cuDeviceGetAttribute": (ok, 9), "cuDeviceGetName": (ok, b"Stand-in H200\0\0"),
             "cuDriverGetVersion": (ok, 13000), "cuMemAlloc": (ok, alloc)}
    fns = {}
    for name, answer in calls.items():
        fns[name] = (lambda answer: lambda *args: answer)(answer)
        fns[name].__name__ = name
    return SimpleNamespace(**{k: getattr(driver, k) for k in dir(driver) if k.startswith(("CU", "cuuint"))},
                           cuTensorMapEncodeTiled=cuTensorMapEncodeTiled, **fns)


def test_script_with_a_stand_in_driver(tmp_path):
    """The driver path: probe, move into the allocation, one verdict per layout, the counts printed."""
    out, alloc, seed = tmp_path / "v.jsonl.gz", 0x1000_0000_0000, _fresh_seed("script, stand-in driver")
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        assert _script().main(["--n", "400", "--seed", str(seed), "--out", str(out)], _stand_in_driver(alloc)) == 0
    meta, records = tms.read_records(out)
    assert meta["driver"] == {"driver_version": 13000, "device": "Stand-in H200", "compute_capability": [9, 9]}
    assert meta["address_probe"]["verdicts_differ"] > 0 and meta["address_base"] == alloc
    drawn = tms.draw(400, seed)
    assert [tms.Layout.from_record(r) for r in records] == [lay.rebased(alloc) for lay in drawn]
    for r in records:
        d = r["driver"]
        fine = (d["globalAddress"] % 16 == 0 and d["globalAddress"] and d["tensorRank"] <= 3
                and all(1 <= b <= 256 for b in d["boxDim"]) and all(1 <= n <= 2 ** 32 for n in d["globalDim"]))
        assert r["driver_verdict"] == ("CUDA_SUCCESS" if fine else "CUDA_ERROR_INVALID_VALUE"), r
    counts = collections.Counter(tms.verdict_class(r["asyncpipe"], r["driver_verdict"]) for r in records)
    assert counts[tms.CLASSES[1]] > 0 and meta["classes"] == dict(counts)
    assert "; ".join(f"{c}: {counts[c]}" for c in tms.CLASSES) in stdout.getvalue()
    assert f"verdicts differ between a made-up address and a real allocation ({alloc:#x})" in stdout.getvalue()


@pytest.mark.skipif(gpu_cc() is not None, reason="a GPU is visible: the script would ask the driver")
def test_script_with_no_gpu_records_why(tmp_path):
    out = tmp_path / "v.jsonl.gz"
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        assert _script().main(["--n", "20", "--out", str(out)]) == 0
    meta, records = tms.read_records(out)
    assert meta["no_driver"] and all(r["driver_verdict"] is None for r in records)
    assert f"no driver verdicts ({meta['no_driver']})" in stdout.getvalue()


def test_script_summary_counts():
    layouts = tms.draw(200, _fresh_seed("summary"))
    ok = [i for i, lay in enumerate(layouts) if lay.asyncpipe_verdict()[0] == "ok"]
    bad = [i for i, lay in enumerate(layouts) if lay.asyncpipe_verdict()[0] != "ok"]
    records = _with_driver_verdicts(layouts, flip={ok[0], ok[1], bad[0]})
    text = "\n".join(_script()._summary(records, {"seed": 7}))
    assert (f"agree: {len(layouts) - 3}; asyncpipe accepts, driver refuses: 2; "
            "asyncpipe refuses, driver accepts: 1") in text, text
    assert tms.describe(records[ok[0]]) in text and tms.describe(records[bad[0]]) in text


@pytest.mark.parametrize("argv, rule, value", [
    (["--n", "0"], "--n must be at least 1", "0"),
    (["--out", "v.json"], "--out must name a .jsonl.gz file", "v.json"),
])
def test_script_argument_errors(argv, rule, value, capsys):
    assert _script().main(argv) == 2
    assert capsys.readouterr().err.strip() == f"tensor_map_verdicts: {rule}, got {value}"


# ---------------------------------------------------------------------------------------------
# The verdicts agree: fresh layouts on a Hopper GPU, and the committed driver verdicts
# ---------------------------------------------------------------------------------------------
def _as_the_driver_sees(rec: dict) -> dict:
    """The record with its innermost byte stride set to the element size: the driver has no such parameter, so
    there is nothing to compare there. Files drawn before the sampler's off:dtype_unknown kept the replaced dtype's
    innermost stride (fixed with these rules; 154 records of the seed-18 file), which validate_tiled refuses."""
    p = rec["numpy"]
    inner = max(1, tms.DATA_TYPES[p["dtype"]][1] // 8)
    if p["strides"][-1] == inner:
        return rec
    return dict(rec, numpy=dict(p, strides=p["strides"][:-1] + [inner]))


def _compare(records) -> tuple[list, list]:
    """(disagreements, the packed-dtype exception): records whose driver verdict differs from validate_tiled's now,
    and among them those of a packed dtype that asyncpipe refuses as unsupported and the driver accepts."""
    found = tms.disagreements([_as_the_driver_sees(r) for r in records])
    excepted = [(r, c) for r, c in found if c == tms.CLASSES[2] and r["numpy"]["dtype"] in PACKED_DTYPES
                and PACKED_RULE in r["asyncpipe"]]
    return [f for f in found if f not in excepted], excepted


def _report(found, excepted=()) -> str:
    counts = collections.Counter(cls for _, cls in found)
    lines = [f"{len(found)} disagreements: {dict(counts)} (besides {len(excepted)} packed-dtype layouts the driver "
             "accepts and asyncpipe does not support)"]
    for cls in tms.CLASSES[1:]:
        lines += [f"  {tms.describe(r)}" for r, c in found if c == cls][:5]
    return "\n".join(lines)


@pytest.mark.gpu
@pytest.mark.hopper
def test_verdicts_agree_on_gpu():
    from cuda.bindings import driver

    tms.open_driver(driver)
    enc = tms.DriverEncoder(driver)
    layouts = tms.draw(10_000, _fresh_seed("driver verdicts"))
    base, differ = tms.address_probe(driver, enc, layouts[:500])
    if differ:           # the driver looks at the memory: encode inside a real allocation
        layouts = [lay.rebased(base) for lay in layouts]
    found, excepted = _compare([lay.record(enc.verdict(lay)) for lay in layouts])
    print(f"{len(excepted)} packed-dtype layouts accepted by the driver, not supported by asyncpipe")
    assert not found, _report(found, excepted)


def _counted(lay) -> int:
    return math.prod(b // e for b, e in zip(lay.box, lay.element_strides)) * lay.itemsize


def _box_probes() -> list:
    """uint8 layouts around the box-bytes rule: each 16-byte step of the count from 232,448 to 236,544 bytes that a
    box reaches (an inner row of 16..256 bytes, three outer dimensions of 1..256), then the floor count (box 229
    with element stride 2 counts 114 rows, the TMA delivers 115; 230 counts 115) and a zero quotient (box 1 with
    element stride 2 lets a 16 MB box pass; box 2 does not)."""
    shapes = []
    for total in range(232_448, 236_544 + 1, 16):
        for inner in range(256, 15, -16):
            box = _outer_factors(total // inner) if total % inner == 0 else None
            if box:
                shapes.append((box + (inner,), (1, 1, 1, 1)))
                break
    shapes += [((1, 229, 8, 256), (1, 2, 1, 1)), ((1, 230, 8, 256), (1, 2, 1, 1)),
               ((1, 256, 256, 256), (2, 1, 1, 1)), ((2, 256, 256, 256), (2, 1, 1, 1))]
    return [tms.Layout(tms.MADE_UP_BASE, (256,) * 4, (1 << 24, 1 << 16, 1 << 8, 1), "uint8", box, es, "none",
                       "none", "none", "zero", "edge:box_bytes") for box, es in shapes]


def _outer_factors(n: int):
    """Three factors of ``n``, each 1..256, or None."""
    for a in range(min(n, 256), 0, -1):
        if n % a == 0:
            for b in range(min(n // a, 256), 0, -1):
                if (n // a) % b == 0 and n // a // b <= 256:
                    return (a, b, n // a // b)
    return None


def test_box_probes_straddle_the_limit():
    probes = _box_probes()
    steps = [_counted(lay) for lay in probes[:-4]]
    assert steps == sorted(steps) and steps[0] == 232_448 and steps[-1] == 236_544 and len(steps) > 100
    assert 233_472 in steps and 235_520 in steps and sum(233_472 < n < 235_520 for n in steps) > 40   # the unknown
    verdicts = [lay.asyncpipe_verdict()[0] == "ok" for lay in probes]
    assert verdicts[:-4] == [n <= TMA_BOX_BYTES_MAX for n in steps]
    assert verdicts[-4:] == [True, False, True, False]
    assert probes[-4].box_bytes == 115 * 8 * 256 and _counted(probes[-4]) == 114 * 8 * 256


@pytest.mark.gpu
@pytest.mark.hopper
def test_box_bytes_boundary_on_gpu():
    """The box-bytes limit pinned on the GPU: the data put it between 233,472 (accepted) and 235,520 (refused)."""
    from cuda.bindings import driver

    tms.open_driver(driver)
    enc = tms.DriverEncoder(driver)
    probes = _box_probes()
    found, _ = _compare([lay.record(enc.verdict(lay)) for lay in probes])
    accepted = [_counted(lay) for lay in probes[:-4] if enc.verdict(lay) == tms.ACCEPTED]
    print(f"{len(probes)} probes; the largest accepted count {max(accepted)} bytes")
    assert not found, _report(found)


def test_committed_driver_verdicts_agree():
    files = sorted(DATA.glob("tensor_map_verdicts*.jsonl.gz"))
    if not files:
        pytest.skip(f"no driver verdicts committed yet ({DATA}/tensor_map_verdicts*.jsonl.gz: "
                    "scripts/tensor_map_verdicts.py on an H200 writes them)")
    for path in files:
        meta, records = tms.read_records(path)
        assert records and all(r["driver_verdict"] is not None for r in records), f"{path}: no driver verdicts"
        found, excepted = _compare(records)
        print(f"{path.name}: {len(records)} records, {len(excepted)} packed-dtype layouts accepted by the driver, "
              "not supported by asyncpipe")
        assert not found, f"{path.name} (seed {meta.get('seed')}): " + _report(found, excepted)


def test_innermost_stride_and_packed_exception():
    """The comparison's two adjustments, on made-up records: an innermost stride that is not the element size is
    set to it (the driver never sees it), and a packed-dtype layout the driver accepts is the named exception,
    while one of a supported dtype is a disagreement."""
    lay = tms.Layout(tms.MADE_UP_BASE, (64, 128), (512, 2), "tfloat32", (16, 32), (1, 1), "none", "none", "none",
                     "zero", "off:dtype_unknown")
    rec = lay.record("CUDA_SUCCESS")
    assert "must be contiguous" in rec["asyncpipe"]
    assert _as_the_driver_sees(rec)["numpy"]["strides"] == [512, 4] and _compare([rec]) == ([], [])
    packed = tms.Layout(tms.MADE_UP_BASE, (64, 256), (128, 1), "16u4_align8b", (16, 128), (1, 1), "none", "none",
                        "none", "zero", "off:dtype_unknown").record("CUDA_SUCCESS")
    found, excepted = _compare([packed])
    assert found == [] and [r["numpy"]["dtype"] for r, _ in excepted] == ["16u4_align8b"]
    refused_int = tms.Layout(tms.MADE_UP_BASE, (64, 128), (512, 4), "int32", (16, 6), (1, 1), "none", "none",
                             "none", "zero", "valid").record("CUDA_SUCCESS")
    found, excepted = _compare([refused_int])
    assert [c for _, c in found] == [tms.CLASSES[2]] and excepted == []
    assert "0 packed-dtype layouts" in _report(found)
