#!/usr/bin/env python3
"""latplot: one SVG per run with latency over time and a latency histogram.

    latplot.py RUN_DIR [--out RUN_DIR/latency.svg]
    latplot.py --detail mlperf_log_detail.txt [--samples LAT.csv | --trace mlperf_log_trace.json]
               [--out latency.svg] [--title TEXT]

Per-sample latencies come from (first found, or as given):
  1. a CSV with a header naming `latency_ns` and a time column (`scheduled_ns`, `issue_ns`,
     `issue_start_ns` or `time_ns`, nanoseconds from the start of the run); without a time column
     the sample order is the x axis. In RUN_DIR: mlperf_log_sample_latencies.csv or latencies.csv.
  2. the official LoadGen trace, mlperf_log_trace.json (Chrome trace events; not strictly JSON, so
     it is read line by line): each "Sample" async begin event gives the scheduled time (ts, us)
     and the latency (args.complete_ns), as LoadGen measures it; without those args the b/e pair.
The detail log (mlperf_log_detail.txt, `:::MLLOG {json}` lines) gives the scenario, the SUT name,
the target latency, the validity and the percentiles, drawn as reference lines. With only the
detail log (it holds no per-sample data) the plot shows its percentile ladder and says so.

The top panel shows, per time bucket, the min-max range, the median and the 99th percentile, with
the target latency and the run's 99th percentile as lines, and below it the samples scheduled per
bucket: warm-up is the early hump, a stall is a gap in the strip with a latency spike after it,
the tail is how far the p99 line sits above the median. The next panel is the histogram on a
log latency axis with a log count axis, so the tail's few samples stay visible. A token-latency run
(the CSV's `ttft_ns` and `n_tokens` columns, loadgen-node --sample-latencies) adds two panels of
the same kind over time: TTFT (time to first token) and TPOT (time per output token after the
first, (latency - TTFT) / (n_tokens - 1)), each with its bound from the detail log
(requested_server_ttft_latency, requested_server_tpot_latency) and its p99.
Python 3 standard library only. Exit status: 0, 1 when no data could be read, 2 bad arguments.
"""
import argparse
import csv
import json
import math
import os
import re
import sys

PROG = "latplot"
TIME_COLS = ("scheduled_ns", "issue_ns", "issue_start_ns", "time_ns")


class DataError(Exception):
    pass


# ---- readers ------------------------------------------------------------------------------------

def read_detail(path):
    """Key -> value of the :::MLLOG lines (last one wins); lines that are not JSON are skipped."""
    out = {}
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            i = line.find(":::MLLOG")
            if i < 0:
                i = line.find(":::ENDPTS")
                if i < 0:
                    continue
            brace = line.find("{", i)
            if brace < 0:
                continue
            try:
                rec = json.loads(line[brace:])
            except ValueError:
                continue
            if isinstance(rec, dict) and "key" in rec:
                out[rec["key"]] = rec.get("value")
    return out


def read_csv(path):
    with open(path, newline="", encoding="utf-8") as f:
        rows = csv.reader(f)
        try:
            header = [h.strip() for h in next(rows)]
        except StopIteration:
            raise DataError(f"{path} is empty")
        if "latency_ns" not in header:
            raise DataError(f"{path}: no latency_ns column (header: {', '.join(header)})")
        li = header.index("latency_ns")
        ti = next((header.index(c) for c in TIME_COLS if c in header), None)
        fi = header.index("ttft_ns") if "ttft_ns" in header else None
        ni = header.index("n_tokens") if "n_tokens" in header else None
        pts, tok = [], []
        for n, row in enumerate(rows):
            if not row:
                continue
            try:
                lat = int(float(row[li]))
                t = int(float(row[ti])) if ti is not None else n
                ttft = int(float(row[fi])) if fi is not None else -1
                ntok = int(float(row[ni])) if ni is not None else 0
            except (ValueError, IndexError):
                raise DataError(f"{path}:{n + 2}: not a number in {row}")
            pts.append((t, lat))
            # -1: no first token (not a token run, or the sample failed); TPOT needs 2 tokens.
            if ttft >= 0 and lat >= ttft:
                tok.append((t, ttft, (lat - ttft) // (ntok - 1) if ntok > 1 else None))
    return pts, ti is not None, tok


_NUM = r"(-?[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?)"


def read_trace(path):
    """(scheduled time ns, latency ns) of each Sample in an official mlperf_log_trace.json."""
    begin = {}
    pts = []
    name_re = re.compile(r'"name"\s*:\s*"Sample"')
    ph_re = re.compile(r'"ph"\s*:\s*"([a-zA-Z])"')
    id_re = re.compile(r'"id"\s*:\s*' + _NUM)
    ts_re = re.compile(r'"ts"\s*:\s*' + _NUM)
    cns_re = re.compile(r'"complete_ns"\s*:\s*' + _NUM)
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            if not name_re.search(line):
                continue
            ph, ts = ph_re.search(line), ts_re.search(line)
            if not ph or not ts:
                continue
            t_ns = float(ts.group(1)) * 1000.0
            sid = id_re.search(line)
            if ph.group(1) == "b":
                c = cns_re.search(line)
                if c:
                    pts.append((int(t_ns), int(float(c.group(1)))))
                elif sid:
                    begin[sid.group(1)] = t_ns
            elif ph.group(1) == "e" and sid and sid.group(1) in begin:
                t0 = begin.pop(sid.group(1))
                pts.append((int(t0), int(t_ns - t0)))
    if not pts:
        raise DataError(f"{path}: no \"Sample\" events (LoadGen writes none in Offline before 4.0, "
                        "and none when tracing is off)")
    return pts


# ---- statistics ---------------------------------------------------------------------------------

def percentile(sorted_vals, p):
    if not sorted_vals:
        return None
    k = min(len(sorted_vals) - 1, int(p * len(sorted_vals)))
    return sorted_vals[k]


def nice_step(span, target):
    raw = span / max(1, target)
    mag = 10 ** math.floor(math.log10(raw)) if raw > 0 else 1
    for m in (1, 2, 2.5, 5, 10):
        if raw <= m * mag:
            return m * mag
    return 10 * mag


def lin_ticks(lo, hi, target=6):
    step = nice_step(hi - lo, target)
    t = math.ceil(lo / step) * step
    out = []
    while t <= hi + step * 1e-9:
        out.append(t)
        t += step
    return out


def log_ticks(lo, hi):
    out = []
    e = math.floor(math.log10(lo))
    while 10 ** e <= hi * 1.0001:
        for m in (1, 2, 5):
            v = m * 10 ** e
            if lo * 0.9999 <= v <= hi * 1.0001:
                out.append(v)
        e += 1
    return out


def fmt_ms(ms):
    if ms >= 100:
        return f"{ms:.0f}"
    if ms >= 1:
        return f"{ms:.3g}"
    return f"{ms:.2g}"


def fmt_s(s):
    return f"{s:g}" if s < 10 else f"{s:.0f}"


# ---- SVG ----------------------------------------------------------------------------------------

def esc(s):
    return str(s).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


class Svg:
    def __init__(self, w, h):
        self.w, self.h = w, h
        self.parts = []

    def add(self, s):
        self.parts.append(s)

    def text(self, x, y, s, size=11, anchor="start", color="#222", weight="normal", rotate=None):
        tr = f' transform="rotate({rotate} {x:.1f} {y:.1f})"' if rotate is not None else ""
        self.add(f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" text-anchor="{anchor}" '
                 f'fill="{color}" font-weight="{weight}"{tr}>{esc(s)}</text>')

    def line(self, x1, y1, x2, y2, color="#999", width=1, dash=None):
        d = f' stroke-dasharray="{dash}"' if dash else ""
        self.add(f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" stroke="{color}" '
                 f'stroke-width="{width}"{d}/>')

    def rect(self, x, y, w, h, fill, opacity=1.0):
        self.add(f'<rect x="{x:.1f}" y="{y:.1f}" width="{max(w, 0.0):.2f}" height="{max(h, 0.0):.2f}" '
                 f'fill="{fill}" fill-opacity="{opacity}"/>')

    def polyline(self, pts, color, width=1.2):
        if len(pts) < 2:
            return
        p = " ".join(f"{x:.1f},{y:.1f}" for x, y in pts)
        self.add(f'<polyline points="{p}" fill="none" stroke="{color}" stroke-width="{width}"/>')

    def render(self):
        head = (f'<svg xmlns="http://www.w3.org/2000/svg" width="{self.w}" height="{self.h}" '
                f'viewBox="0 0 {self.w} {self.h}" font-family="Helvetica, Arial, sans-serif">\n'
                f'<rect width="{self.w}" height="{self.h}" fill="white"/>\n')
        return head + "\n".join(self.parts) + "\n</svg>\n"


class Axis:
    def __init__(self, lo, hi, a, b, log=False):
        self.log = log
        self.lo, self.hi = (math.log10(lo), math.log10(hi)) if log else (lo, hi)
        if self.hi <= self.lo:
            self.hi = self.lo + 1
        self.a, self.b = a, b

    def __call__(self, v):
        if self.log:
            v = math.log10(max(v, 10 ** self.lo))
        return self.a + (v - self.lo) / (self.hi - self.lo) * (self.b - self.a)


COL = {"band": "#c9d7ee", "p50": "#1f4e9c", "p99": "#e07b00", "target": "#c62828", "bar": "#5b7fbf",
       "dot": "#1f4e9c", "grid": "#e6e6e6", "strip": "#9aa9c4"}


def ref_lines(detail, lat_sorted):
    """(label, ms, color, dash) lines: the target latency and the run's percentiles."""
    out = []
    tgt = detail.get("effective_target_latency_ns") or detail.get("requested_server_target_latency_ns")
    scen = str(detail.get("effective_scenario", ""))
    if tgt and scen in ("Server", "SingleStream", "MultiStream") and float(tgt) > 0:
        out.append(("target", float(tgt) / 1e6, COL["target"], "6,4"))
    if lat_sorted:
        out.append(("p99", percentile(lat_sorted, 0.99) / 1e6, COL["p99"], "3,3"))
    elif detail.get("result_99.00_percentile_latency_ns"):
        out.append(("p99", float(detail["result_99.00_percentile_latency_ns"]) / 1e6, COL["p99"], "3,3"))
    return out


def token_refs(detail, key, vals_sorted):
    """The bound |key| of the detail log and the p99 of |vals_sorted|, as ref_lines gives them."""
    out = []
    tgt = detail.get(key)
    if isinstance(tgt, (int, float)) and tgt > 0:
        out.append(("target", float(tgt) / 1e6, COL["target"], "6,4"))
    out.append(("p99", percentile(vals_sorted, 0.99) / 1e6, COL["p99"], "3,3"))
    return out


def panel_time(svg, x0, y0, w, h, pts, has_time, detail, lat_sorted, nbuckets, refs=None,
               ylabel="latency"):
    strip_h = 46
    ph = h - strip_h - 18
    tmin = min(t for t, _ in pts)
    tmax = max(t for t, _ in pts)
    span = max(tmax - tmin, 1)
    lats_ms = [l / 1e6 for _, l in pts]
    lo_ms = max(min(lats_ms), 1e-4)
    hi_ms = max(max(lats_ms), lo_ms * 1.01)
    refs = ref_lines(detail, lat_sorted) if refs is None else refs
    for _, v, _, _ in refs:
        hi_ms = max(hi_ms, v * 1.05)
    use_log = hi_ms / max(percentile(lat_sorted, 0.5) / 1e6, 1e-6) > 20
    if use_log:
        y = Axis(lo_ms * 0.8, hi_ms * 1.25, y0 + ph, y0, log=True)
        ticks = log_ticks(lo_ms * 0.8, hi_ms * 1.25)
    else:
        y = Axis(0, hi_ms * 1.08, y0 + ph, y0)
        ticks = lin_ticks(0, hi_ms * 1.08)
    scale = 1e9 if has_time else 1.0
    x = Axis(0, span / scale, x0, x0 + w)

    for tv in ticks:
        svg.line(x0, y(tv), x0 + w, y(tv), COL["grid"])
        svg.text(x0 - 6, y(tv) + 4, fmt_ms(tv), size=10, anchor="end", color="#555")
    for tv in lin_ticks(0, span / scale, 8):
        svg.line(x(tv), y0 + ph, x(tv), y0 + ph + 4, "#555")
        svg.text(x(tv), y0 + h + 2, fmt_s(tv), size=10, anchor="middle", color="#555")
    svg.line(x0, y0 + ph, x0 + w, y0 + ph, "#555")
    svg.line(x0, y0, x0, y0 + ph, "#555")
    svg.text(x0 - 44, y0 + ph / 2, f"{ylabel} (ms)" + (", log scale" if use_log else ""), size=11,
             anchor="middle", rotate=-90)
    svg.text(x0 + w / 2, y0 + h + 16,
             "time since the first sample was scheduled (s)" if has_time else "sample (in order)",
             size=11, anchor="middle")

    buckets = [[] for _ in range(nbuckets)]
    for t, l in pts:
        k = min(nbuckets - 1, int((t - tmin) / span * nbuckets))
        buckets[k].append(l / 1e6)
    bw = w / nbuckets
    if len(pts) <= 4000:
        for t, l in pts:
            svg.add(f'<circle cx="{x((t - tmin) / scale):.1f}" cy="{y(max(l / 1e6, lo_ms)):.1f}" r="1.3" '
                    f'fill="{COL["dot"]}" fill-opacity="0.45"/>')
    else:
        for k, b in enumerate(buckets):
            if b:
                top, bot = y(max(b)), y(max(min(b), lo_ms))
                svg.rect(x0 + k * bw, top, max(bw, 0.8), bot - top, COL["band"])
    med, p99 = [], []
    for k, b in enumerate(buckets):
        if not b:
            continue
        b.sort()
        cx = x0 + (k + 0.5) * bw
        med.append((cx, y(max(percentile(b, 0.5), lo_ms))))
        p99.append((cx, y(max(percentile(b, 0.99), lo_ms))))
    svg.polyline(p99, COL["p99"], 1.0)
    svg.polyline(med, COL["p50"], 1.6)
    for name, v, color, dash in refs:
        svg.line(x0, y(v), x0 + w, y(v), color, 1.2, dash)
        svg.text(x0 + w + 4, y(v) + 4, f"{name} {fmt_ms(v)} ms", size=10, color=color)

    # Samples scheduled per bucket: a gap here is a stall in issuing; a gap in completions shows
    # as the latency spike above.
    sy = y0 + ph + 14
    counts = [len(b) for b in buckets]
    cmax = max(counts) or 1
    for k, c in enumerate(counts):
        if c:
            hh = (strip_h - 16) * c / cmax
            svg.rect(x0 + k * bw, sy + (strip_h - 16) - hh, max(bw, 0.8), hh, COL["strip"])
    svg.text(x0 - 6, sy + strip_h - 18, "samples", size=9, anchor="end", color="#555")

    legend = [("median per bucket", COL["p50"]), ("p99 per bucket", COL["p99"])]
    legend.append(("each sample" if len(pts) <= 4000 else "min-max per bucket",
                   COL["dot"] if len(pts) <= 4000 else COL["band"]))
    lx = x0 + 8
    for name, color in legend:
        svg.rect(lx, y0 + 6, 14, 4, color)
        svg.text(lx + 18, y0 + 11, name, size=10)
        lx += 26 + 6.2 * len(name)


def panel_hist(svg, x0, y0, w, h, lat_sorted, detail, nbins):
    lo = max(lat_sorted[0] / 1e6, 1e-4)
    hi = max(lat_sorted[-1] / 1e6, lo * 1.01)
    x = Axis(lo * 0.9, hi * 1.1, x0, x0 + w, log=True)
    lo_l, hi_l = math.log10(lo * 0.9), math.log10(hi * 1.1)
    counts = [0] * nbins
    for v in lat_sorted:
        k = int((math.log10(max(v / 1e6, lo)) - lo_l) / (hi_l - lo_l) * nbins)
        counts[min(max(k, 0), nbins - 1)] += 1
    cmax = max(counts)
    y = Axis(1, cmax * 1.5, y0 + h, y0, log=True)
    for tv in log_ticks(1, cmax * 1.5):
        svg.line(x0, y(tv), x0 + w, y(tv), COL["grid"])
        svg.text(x0 - 6, y(tv) + 4, f"{tv:g}", size=10, anchor="end", color="#555")
    bw = w / nbins
    for k, c in enumerate(counts):
        if c:
            top = y(c) if c > 1 else y(1) - 2
            svg.rect(x0 + k * bw + 0.5, top, bw - 1, y0 + h - top, COL["bar"])
    for tv in log_ticks(lo * 0.9, hi * 1.1):
        svg.line(x(tv), y0 + h, x(tv), y0 + h + 4, "#555")
        svg.text(x(tv), y0 + h + 16, fmt_ms(tv), size=10, anchor="middle", color="#555")
    svg.line(x0, y0 + h, x0 + w, y0 + h, "#555")
    svg.line(x0, y0, x0, y0 + h, "#555")
    svg.text(x0 + w / 2, y0 + h + 32, "latency (ms, log scale)", size=11, anchor="middle")
    svg.text(x0 - 44, y0 + h / 2, "samples (log)", size=11, anchor="middle", rotate=-90)
    marks = [("p50", 0.5, "#1f4e9c"), ("p90", 0.9, "#5e35b1"), ("p99", 0.99, COL["p99"]),
             ("p99.9", 0.999, "#8d6e63")]
    for i, (name, p, color) in enumerate(marks):
        v = percentile(lat_sorted, p) / 1e6
        svg.line(x(v), y0, x(v), y0 + h, color, 1.1, "4,3")
        svg.text(x(v) + 3, y0 + 12 + 12 * i, f"{name} {fmt_ms(v)}", size=10, color=color)
    for name, v, color, dash in ref_lines(detail, []):
        if name == "target" and lo * 0.9 <= v <= hi * 1.1:
            svg.line(x(v), y0, x(v), y0 + h, color, 1.4, dash)
            svg.text(x(v) - 3, y0 + 12, f"target {fmt_ms(v)}", size=10, anchor="end", color=color)


def panel_ladder(svg, x0, y0, w, h, detail):
    """Only the detail log: its percentile ladder as horizontal bars."""
    keys = [("min", "result_min_latency_ns"), ("p50", "result_50.00_percentile_latency_ns"),
            ("p90", "result_90.00_percentile_latency_ns"), ("p95", "result_95.00_percentile_latency_ns"),
            ("p97", "result_97.00_percentile_latency_ns"), ("p99", "result_99.00_percentile_latency_ns"),
            ("p99.9", "result_99.90_percentile_latency_ns"), ("max", "result_max_latency_ns")]
    vals = [(n, float(detail[k]) / 1e6) for n, k in keys if isinstance(detail.get(k), (int, float))]
    if not vals:
        raise DataError("the detail log has no result_*_latency_ns keys and no per-sample data was given")
    refs = [r for r in ref_lines(detail, []) if r[0] == "target"]
    hi = max([v for _, v in vals] + [v for _, v, _, _ in refs]) * 1.1
    x = Axis(0, hi, x0 + 50, x0 + w)
    bh = h / (len(vals) + 1)
    for i, (n, v) in enumerate(vals):
        yy = y0 + (i + 0.5) * bh
        svg.rect(x(0), yy, x(v) - x(0), bh * 0.6, COL["bar"])
        svg.text(x0 + 44, yy + bh * 0.45, n, size=11, anchor="end")
        svg.text(x(v) + 4, yy + bh * 0.45, f"{fmt_ms(v)} ms", size=10)
    for name, v, color, dash in refs:
        svg.line(x(v), y0, x(v), y0 + h - bh * 0.5, color, 1.4, dash)
        svg.text(x(v), y0 - 4, f"{name} {fmt_ms(v)} ms", size=10, anchor="middle", color=color)


def build(detail, pts, has_time, title, source, nbuckets=400, nbins=60, tok=None):
    tok = tok or []
    ttft = [(t, f) for t, f, _ in tok]
    tpot = [(t, p) for t, _, p in tok if p is not None]
    W, H = 1000, 720 + 300 * ((1 if ttft else 0) + (1 if tpot else 0))
    svg = Svg(W, H)
    scen = detail.get("effective_scenario") or detail.get("requested_scenario")
    sut = detail.get("sut_name", "")
    validity = detail.get("result_validity")
    default_title = "Latency" + (f": {scen}" if scen else "") + (f" \u2014 {sut}" if sut else "")
    svg.text(20, 26, title or default_title, size=16, weight="bold")
    lat_sorted = sorted(l for _, l in pts) if pts else []
    facts = []
    if validity:
        facts.append(f"result {validity}")
    if lat_sorted:
        facts.append(f"{len(lat_sorted)} samples")
        facts.append("p50 %s ms, p99 %s ms, max %s ms" % (fmt_ms(percentile(lat_sorted, 0.5) / 1e6),
                                                        fmt_ms(percentile(lat_sorted, 0.99) / 1e6),
                                                        fmt_ms(lat_sorted[-1] / 1e6)))
    for k in ("result_completed_samples_per_sec", "result_samples_per_second"):
        if isinstance(detail.get(k), (int, float)):
            facts.append(f"{detail[k]:.6g} samples/s")
    facts.append(f"data: {source}")
    svg.text(20, 46, " · ".join(facts), size=11, color="#444")
    if pts:
        panel_time(svg, 80, 70, W - 190, 330, pts, has_time, detail, lat_sorted, nbuckets)
        svg.text(20, 448, "Latency histogram", size=13, weight="bold")
        panel_hist(svg, 80, 462, W - 190, 200, lat_sorted, detail, nbins)
        y = 720
        for name, key, vals in (("TTFT (time to first token)", "requested_server_ttft_latency", ttft),
                                ("TPOT (time per output token)", "requested_server_tpot_latency",
                                 tpot)):
            if not vals:
                continue
            vs = sorted(v for _, v in vals)
            svg.text(20, y + 8, "%s: p50 %s ms, p99 %s ms" % (
                name, fmt_ms(percentile(vs, 0.5) / 1e6), fmt_ms(percentile(vs, 0.99) / 1e6)),
                size=13, weight="bold")
            panel_time(svg, 80, y + 24, W - 190, 240, vals, has_time, detail, vs, nbuckets,
                       refs=token_refs(detail, key, vs), ylabel=name.split(" ")[0])
            y += 300
    else:
        svg.text(20, 80, "Per-sample latencies are not in the detail log: this is its percentile "
                 "summary. Give --samples or --trace for the time series and histogram.",
                 size=11, color="#a33")
        panel_ladder(svg, 40, 100, W - 160, 360, detail)
    return svg.render()


def find_in(run_dir, names):
    for n in names:
        p = os.path.join(run_dir, n)
        if os.path.exists(p):
            return p
    return None


def main():
    ap = argparse.ArgumentParser(prog="latplot.py", description=__doc__.split("\n")[0],
                                 epilog="Inputs are described at the top of latplot.py and in deploy/README.md.")
    ap.add_argument("run_dir", nargs="?", help="a run's output folder (finds the files itself)")
    ap.add_argument("--detail", help="mlperf_log_detail.txt")
    ap.add_argument("--samples", help="per-sample CSV with latency_ns (and scheduled_ns)")
    ap.add_argument("--trace", help="official mlperf_log_trace.json")
    ap.add_argument("--out", help="output SVG (default RUN_DIR/latency.svg or latency.svg)")
    ap.add_argument("--title", help="plot title")
    ap.add_argument("--buckets", type=int, default=400, help="time buckets (default 400)")
    ap.add_argument("--bins", type=int, default=60, help="histogram bins (default 60)")
    a = ap.parse_args()
    if a.buckets < 10 or a.bins < 5:
        print(f"{PROG}: --buckets must be at least 10 and --bins at least 5", file=sys.stderr)
        return 2
    if a.run_dir:
        if not os.path.isdir(a.run_dir):
            print(f"{PROG}: {a.run_dir} is not a folder", file=sys.stderr)
            return 2
        a.detail = a.detail or find_in(a.run_dir, ["mlperf_log_detail.txt"])
        if not a.samples and not a.trace:
            a.samples = find_in(a.run_dir, ["mlperf_log_sample_latencies.csv", "latencies.csv"])
            if not a.samples:
                a.trace = find_in(a.run_dir, ["mlperf_log_trace.json"])
        a.out = a.out or os.path.join(a.run_dir, "latency.svg")
    if not (a.detail or a.samples or a.trace):
        print(f"{PROG}: nothing to plot: give RUN_DIR, --detail, --samples or --trace", file=sys.stderr)
        return 2
    a.out = a.out or "latency.svg"
    try:
        detail = read_detail(a.detail) if a.detail else {}
        pts, has_time, source, tok = [], True, "detail log only", []
        if a.samples:
            pts, has_time, tok = read_csv(a.samples)
            source = os.path.basename(a.samples)
        elif a.trace:
            pts = read_trace(a.trace)
            source = os.path.basename(a.trace)
        if a.samples or a.trace:
            if not pts:
                raise DataError(f"{source} holds no samples")
        svg = build(detail, pts, has_time, a.title, source, a.buckets, a.bins, tok)
    except (OSError, DataError) as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 1
    tmp = a.out + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(svg)
    os.replace(tmp, a.out)
    print(f"{PROG}: wrote {a.out} ({len(pts)} samples from {source})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
