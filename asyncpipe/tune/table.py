"""The tuner's table: each candidate's footprint, the model's prediction beside the measurement."""

from __future__ import annotations


def _ms(x) -> str:
    return "" if x is None or x == float("inf") else f"{x:.3f}"


def format_table(res) -> str:
    """One line per candidate (stage count and options): shared memory and CTAs per SM, predicted / measured / refitted
    milliseconds, the spread of the measured rounds ((max - min) / median: differences between candidates smaller
    than it are noise), TFLOPS (GB/s for a kernel that gives its bytes and no flop), the check, registers per thread
    (compiled offline, or as the loaded kernel reports them), and why a candidate was pruned, that it spills, or
    that it is the pick."""
    head = f"{res.kernel} {'x'.join(map(str, res.problem))} on {res.gpu} (asyncpipe {res.version})"
    if res.from_cache:
        head += ", from the cache"
    rate = "GB/s" if getattr(res, "nbytes", None) and not res.flop else "TFLOPS"
    cols = ["config", "smem/CTA", "CTAs/SM", "regs", "predicted ms", "measured ms", "refit ms", "spread", rate, "check",
            "note"]
    lines = []
    best_ms = min((r.measured_ms for r in res.rows if r.measured_ms is not None and r.correct), default=None)
    for r in res.rows:
        if rate == "GB/s":
            tf = f"{res.nbytes / (r.measured_ms * 1e-3) / 1e9:.0f}" if r.measured_ms else ""
        else:
            tf = f"{res.flop / (r.measured_ms * 1e-3) / 1e12:.1f}" if res.flop and r.measured_ms else ""
        check = "" if r.correct is None else ("ok" if r.correct else f"FAIL {r.error:.1e}")
        note = []
        if r.config == res.best:
            note.append("<- pick" if res.measured else "<- model's pick")
        if r.pruned:
            why = f" ({r.limited_by})" if not r.ctas_per_sm and r.limited_by else ""     # could not launch: why
            note.append(f"pruned: {r.pruned}{why}" if r.measured_ms is None else f"(pruned: {r.pruned}; measured anyway)")
        if getattr(r, "spills", None):
            note.append(f"SPILLS ({r.local_bytes} B local a thread)")
        if best_ms and r.measured_ms and r.measured_ms > best_ms:
            note.append(f"+{100 * (r.measured_ms / best_ms - 1):.1f} %")
        smem = (f"{r.shared_per_cta / 1024:.{1 if r.shared_per_cta < 10240 else 0}f} KB" if r.shared_per_cta
                else "-")
        ctas = f"{r.ctas_per_sm} ({r.limited_by})" if r.ctas_per_sm else "-"
        spread = (f"{100 * (max(r.times_ms) - min(r.times_ms)) / r.measured_ms:.2f} %"
                  if len(r.times_ms) > 1 and r.measured_ms else "")
        regs = str(r.registers) if getattr(r, "registers", None) else ""
        lines.append([r.config.label(), smem, ctas, regs, _ms(r.predicted_ms), _ms(r.measured_ms), _ms(r.fitted_ms), spread,
                      tf, check, "  ".join(note)])
    widths = [max(len(c), *(len(l[i]) for l in lines)) for i, c in enumerate(cols)]
    def fmt(row):                            # the configuration left-aligned, the numbers right-aligned
        cells = (v.ljust(w) if i == 0 else v.rjust(w) if i < 10 else v for i, (v, w) in enumerate(zip(row, widths)))
        return "  ".join(cells)
    out = [head, fmt(cols), fmt(["-" * w for w in widths])] + [fmt(l) for l in lines]
    out.append("model: " + ", ".join(f"{k}={v}" for k, v in res.calibration.items() if k != "source"))
    if res.fitted_calibration:
        out.append("refit: " + ", ".join(f"{k}={v}" for k, v in res.fitted_calibration.items() if k != "source"))
    for k, v in res.checks().items():
        out.append(f"check {k}: {v:.4f}" if isinstance(v, float) else f"check {k}: {v}")
    out += [f"note: {n}" for n in res.notes]
    return "\n".join(out)
