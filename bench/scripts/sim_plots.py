#!/usr/bin/env python3
"""Plots of the scale studies (docs/scale.md) with strata-sim and gnuplot.

Usage: sim_plots.py --sim build/bin/strata-sim [--machines sim/machines] [--out docs/scale] [--quick]

Writes, into --out, one PNG per study plus the data behind it (*.dat, one row per
point, the columns named in a header line):
  hier-vs-flat.png   3072 ranks (512 hosts x 6, JuRoPA-like), broadcast: slowest rank's
                     completion of the multilevel tree vs one binomial tree over all ranks,
                     by message size (Mallon et al., fig. 11)
  flat-vs-tree.png   broadcast, 8 ranks per host (cluster200g), host-level flat vs binomial
                     tree as the host count grows, one panel per size (Nishtala and Yelick)
  loose-strict.png   32 blocking calls in a row, us per call, loose vs strict, as the host
                     count grows (cluster200g, 32 ranks per host), reduce and broadcast of 8 B
  radix.png          broadcast, 8 ranks per host: host-level radix 2, 4, 8 and flat by host
                     count, 64 KiB and 16 MiB
Every number is a simulated time of the real compiled plans (docs/simulator.md).
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import time


def run(sim, args):
    out = subprocess.run([sim] + args + ["--quiet"], capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"strata-sim {' '.join(args)} failed: {out.stderr.strip()}")
    m = re.search(r"completion us: min ([\d.]+) median ([\d.]+) max ([\d.]+)", out.stdout)
    per = re.search(r"([\d.]+) us per call", out.stdout)
    return float(per.group(1)) if per else float(m.group(3))


def human(b):
    for unit, n in (("M", 1 << 20), ("K", 1 << 10)):
        if b >= n and b % n == 0:
            return f"{b // n}{unit}"
    return str(b)


def write_dat(path, header, rows):
    with open(path, "w") as f:
        f.write("# " + " ".join(header) + "\n")
        for r in rows:
            f.write(" ".join(str(x) for x in r) + "\n")


def gnuplot(gp, script):
    p = subprocess.run([gp], input=script, text=True, capture_output=True)
    if p.returncode != 0:
        sys.exit(f"gnuplot failed: {p.stderr}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sim", required=True)
    ap.add_argument("--machines", default="sim/machines")
    ap.add_argument("--out", default="docs/scale")
    ap.add_argument("--quick", action="store_true", help="fewer points (a smoke run)")
    a = ap.parse_args()
    gp = shutil.which("gnuplot")
    if gp is None:
        sys.exit("sim_plots.py: gnuplot not found (apt-get install gnuplot-nox)")
    os.makedirs(a.out, exist_ok=True)
    S = a.sim
    juropa = ["--machine", os.path.join(a.machines, "juropa.machine")]
    cluster = ["--machine", os.path.join(a.machines, "cluster200g.machine")]
    t0 = time.time()
    head = "set terminal pngcairo size 1200,450 font ',10'\nset grid\n"

    # 1. Hierarchical vs flat, 3072 ranks, by size.
    sizes = [65536, 1 << 20, 16 << 20] if a.quick else [8192, 65536, 262144, 1 << 20, 4 << 20, 16 << 20]
    rows = []
    for b in sizes:
        h = run(S, juropa + ["--bytes", str(b)])
        f = run(S, juropa + ["--bytes", str(b), "--tree", "single:binomial"])
        rows.append((b, h, f, f / h))
    dat1 = os.path.join(a.out, "hier-vs-flat.dat")
    write_dat(dat1, ["bytes", "hierarchical_us", "flat_binomial_us", "flat_over_hier"], rows)
    gnuplot(gp, head + f"""
set output '{a.out}/hier-vs-flat.png'
set multiplot layout 1,2 title 'broadcast, 3072 ranks (512 hosts x 6, juropa.machine), simulated'
set logscale xy 2
set xtics ({", ".join(f"'{human(b)}' {b}" for b in sizes)})
set xlabel 'message bytes'
set ylabel 'slowest rank (us)'
set key top left
plot '{dat1}' using 1:2 with linespoints title 'multilevel tree (host, NUMA, core)', \\
     '' using 1:3 with linespoints title 'one binomial tree over all ranks'
unset logscale y
set ylabel 'flat / multilevel (> 1: multilevel faster)'
plot '{dat1}' using 1:4 with linespoints title 'ratio', 1 with lines dt 2 notitle
unset multiplot
""")

    # 2. Flat vs binomial host tree as hosts grow.
    hosts = [2, 8, 32, 128] if a.quick else [2, 4, 8, 16, 32, 64, 128, 256]
    sizes2 = [8, 65536, 1 << 20]
    rows = []
    for h in hosts:
        row = [h]
        for b in sizes2:
            base = cluster + ["--hosts", str(h), "--ppn", "8", "--bytes", str(b)]
            row += [run(S, base + ["--tree", "host:flat"]), run(S, base + ["--tree", "host:binomial"])]
        rows.append(tuple(row))
    dat2 = os.path.join(a.out, "flat-vs-tree.dat")
    write_dat(dat2, ["hosts"] + [f"{k}_{b}" for b in sizes2 for k in ("flat_us", "binomial_us")], rows)
    panels = []
    for i, b in enumerate(sizes2):
        c = 2 + 2 * i
        name = "8 B" if b == 8 else ("64 KiB" if b == 65536 else "1 MiB")
        panels.append(f"""set title '{name}'
plot '{dat2}' using 1:{c} with linespoints title 'host level flat', \\
     '' using 1:{c + 1} with linespoints title 'host level binomial'""")
    gnuplot(gp, head.replace("1200,450", "1500,450") + f"""
set output '{a.out}/flat-vs-tree.png'
set multiplot layout 1,3 title 'broadcast, 8 ranks per host (cluster200g.machine), simulated'
set logscale xy 2
set xlabel 'hosts'
set ylabel 'slowest rank (us)'
set key top left
""" + "\n".join(panels) + "\nunset multiplot\n")

    # 3. Loose vs strict, 32 calls, us per call, by hosts.
    hosts3 = [1, 4, 16] if a.quick else [1, 2, 4, 8, 16, 32, 64]
    rows = []
    for h in hosts3:
        row = [h]
        for coll in ["reduce", "broadcast"]:
            base = cluster + ["--hosts", str(h), "--coll", coll, "--bytes", "8", "--calls", "32"]
            row += [run(S, base), run(S, base + ["--strict"])]
        rows.append(tuple(row))
    dat3 = os.path.join(a.out, "loose-strict.dat")
    write_dat(dat3, ["hosts", "reduce_loose", "reduce_strict", "bcast_loose", "bcast_strict"], rows)
    gnuplot(gp, head + f"""
set output '{a.out}/loose-strict.png'
set title '32 blocking calls of 8 B in a row, 32 ranks per host (cluster200g.machine), simulated'
set logscale x 2
set xlabel 'hosts'
set ylabel 'us per call'
set key top left
plot '{dat3}' using 1:2 with linespoints title 'reduce, loose', '' using 1:3 with linespoints title 'reduce, strict', \\
     '' using 1:4 with linespoints title 'broadcast, loose', '' using 1:5 with linespoints title 'broadcast, strict'
""")

    # 4. Host-level radix by host count.
    hosts4 = [8, 64] if a.quick else [8, 32, 64, 256, 512]
    radices = [("2", "binomial"), ("4", "4"), ("8", "8"), ("flat", "flat")]
    rows = []
    for h in hosts4:
        row = [h]
        for b in [65536, 16 << 20]:
            for _, spec in radices:
                row.append(run(S, cluster + ["--hosts", str(h), "--ppn", "8", "--bytes", str(b), "--tree",
                                             f"host:{spec}"]))
        rows.append(tuple(row))
    dat4 = os.path.join(a.out, "radix.dat")
    write_dat(dat4, ["hosts"] + [f"r{r}_{b}" for b in ("64K", "16M") for r, _ in radices], rows)
    p64 = ", ".join(f"'{dat4}' using 1:{2 + i} with linespoints title 'radix {r}'" for i, (r, _) in enumerate(radices))
    p16 = ", ".join(f"'{dat4}' using 1:{2 + len(radices) + i} with linespoints title 'radix {r}'"
                    for i, (r, _) in enumerate(radices))
    gnuplot(gp, head + f"""
set output '{a.out}/radix.png'
set multiplot layout 1,2 title 'broadcast, host-level tree radix, 8 ranks per host (cluster200g.machine), simulated'
set logscale xy 2
set xlabel 'hosts'
set ylabel 'slowest rank (us)'
set key top left
set title '64 KiB'
plot {p64}
set title '16 MiB'
plot {p16}
unset multiplot
""")
    print(f"sim_plots.py: wrote {a.out}/{{hier-vs-flat,flat-vs-tree,loose-strict,radix}}.png "
          f"in {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
