#!/usr/bin/env python3
"""Renders STRATA_TRACE files as a PNG timeline (gnuplot; no other dependency).

  bench/scripts/trace_png.py -o OUT.png [--last-us US] PREFIX.0.json PREFIX.1.json ...

One lane per (rank, executor thread); one box per DAG node execution, coloured
by what it does, outlined per collective: application work (compute nodes) in
red, copies and reductions in blue, posts (put / signal) in green, waits and
flags in grey; allreduce boxes are drawn full height, alltoall boxes half height
(upper half), so fragments of the two can be told apart where they interleave.
Completion records of remote operations (zero duration) are left out.
--last-us keeps the last US microseconds of the run (default: all).
--all also draws, per rank, a lane of fast-path calls (orange, one box per
small call from post to completion) and a lane of transport events on the
progress threads (purple ticks: a completion or an arriving signal), so that a
trace of small and large calls shows both paths and what the network did.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

KIND_COLOR = {"fast": "#ff7f0e", "transport": "#9467bd","compute": "#d62728", "copy": "#1f77b4", "reduce": "#17becf", "put": "#2ca02c",
              "put_with_signal": "#2ca02c", "signal": "#98df8a", "get": "#2ca02c", "wait": "#aaaaaa",
              "flag_wait": "#7f7f7f", "flag_set": "#7f7f7f", "nop": "#cccccc"}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-o", "--out", required=True, help="PNG to write")
    ap.add_argument("--last-us", type=float, default=0.0, help="keep only the last US microseconds")
    ap.add_argument("--end-at", default="", help="end the window 10%% after the last node of this kind "
                    "(e.g. compute: the run's last application work; skips shutdown traffic)")
    ap.add_argument("--title", default="strata: two loose collectives and application work on one executor")
    ap.add_argument("--all", action="store_true", help="also draw fast-path calls and transport events")
    ap.add_argument("files", nargs="+", help="per-rank trace files (STRATA_TRACE prefix.RANK.json)")
    a = ap.parse_args()
    ev = []
    for f in a.files:
        with open(f) as fh:
            for line in fh:
                line = line.strip().rstrip(",")
                if not line.startswith("{"):
                    continue
                e = json.loads(line)
                cat = e.get("cat", "dag")
                if e.get("ph") != "X":
                    continue
                if a.all and cat in ("fast", "transport"):
                    # Own lanes (tid -1, -2) below the rank's executor threads.
                    lane = -1 if cat == "fast" else -2
                    kind = "fast" if cat == "fast" else "transport"
                    ev.append((float(e["ts"]), float(e.get("dur", 0)), int(e["pid"]), lane,
                               e["name"].split(" ")[0], kind))
                    continue
                if float(e.get("dur", 0)) <= 0.0 or cat != "dag":  # DAG node executions
                    continue
                name, _, kind = e["name"].rpartition(" ")
                coll = name.split("#")[0]
                ev.append((float(e["ts"]), float(e["dur"]), int(e["pid"]), int(e["tid"]), coll, kind))
    if not ev:
        sys.exit("trace_png.py: no events in " + " ".join(a.files))
    end = max(t + d for t, d, *_ in ev)
    if a.end_at:
        last = [t + d for t, d, _, _, _, k in ev if k == a.end_at]
        if last:
            end = max(last)
            if a.last_us > 0:
                end += 0.1 * a.last_us
            ev = [e for e in ev if e[0] <= end]
    start = min(t for t, *_ in ev)
    if a.last_us > 0:
        start = max(start, end - a.last_us)
        ev = [e for e in ev if e[0] + e[1] >= start]
    lanes = sorted({(r, t) for _, _, r, t, _, _ in ev})
    lane_of = {l: i for i, l in enumerate(lanes)}
    span = end - start
    minw = span / 1500.0  # tiny nodes stay visible
    objs = []
    for t, d, r, tid, coll, kind in ev:
        y = lane_of[(r, tid)]
        x0 = t - start
        x1 = x0 + max(d, minw)
        lo, hi = (y - 0.4, y + 0.4) if coll != "alltoall" else (y, y + 0.4)
        col = KIND_COLOR.get(kind, "#000000")
        objs.append('set object rect from {:.3f},{:.3f} to {:.3f},{:.3f} fc rgb "{}" fs solid 0.9 noborder'.format(
            x0, lo, x1, hi, col))
    def lane_name(r, t):
        return {-1: "rank {} fast path", -2: "rank {} transport"}.get(t, "rank {} thread " + str(t)).format(r)

    ytics = ", ".join('"{}" {}'.format(lane_name(r, t), i) for (r, t), i in lane_of.items())
    script = "\n".join([
        'set terminal pngcairo noenhanced size 1600,{} font "sans,11"'.format(180 + 60 * len(lanes)),
        'set output "{}"'.format(a.out),
        'set title "{}" offset 0,1'.format(a.title),
        "set xlabel 'microseconds'",
        "set xrange [0:{:.3f}]".format(span),
        "set yrange [-0.7:{}]".format(len(lanes) - 0.3),
        "set ytics ({})".format(ytics),
        "unset key",
        "set grid xtics",
    ] + objs + [
        # legend as labels
        'set label 1 "red: application work (on_block compute)   blue: copy/reduce   green: put/signal   '
        'grey: wait/flag   full-height: allreduce, upper half: alltoall'
        + ('   orange: fast-path call   purple: transport event' if a.all else '') + '" at graph 0.0, graph 1.03 font "sans,10"',
        "plot NaN notitle",
    ])
    with tempfile.NamedTemporaryFile("w", suffix=".gp", delete=False) as fh:
        fh.write(script)
        path = fh.name
    try:
        subprocess.run(["gnuplot", path], check=True)
    finally:
        os.unlink(path)
    print("trace_png.py: {} events, {} lanes, {:.1f} us -> {}".format(len(ev), len(lanes), span, a.out))


if __name__ == "__main__":
    main()
