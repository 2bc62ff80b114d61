#!/usr/bin/env python3
"""Scale studies with strata-sim (docs/scale.md): the papers' findings at thousands of ranks.

Usage: sim_scale.py --sim build/bin/strata-sim [--machines sim/machines] [--quick] > out.md

Prints markdown tables:
  1. hierarchical vs flat (single-level binomial) trees, 3072 ranks, broadcast (Mallón et al., fig. 11)
  2. fragmentation at 4096 ranks (Mallón et al., fig. 10)
  3. loose vs strict synchronization, streams of calls (Nishtala and Yelick)
  4. flat vs tree at the host level as the host count grows (Nishtala and Yelick)
  5. the best host-level radix as the host count grows (Nishtala and Yelick)
Every number is a simulated time (us) of the real compiled plans; see docs/simulator.md
for the model and its limits.
"""
import argparse
import re
import subprocess
import sys
import time


def run(sim, args):
    out = subprocess.run([sim] + args + ["--quiet"], capture_output=True, text=True)
    if out.returncode != 0:
        print(f"strata-sim {' '.join(args)} failed: {out.stderr.strip()}", file=sys.stderr)
        return None
    m = re.search(r"completion us: min ([\d.]+) median ([\d.]+) max ([\d.]+)", out.stdout)
    per = re.search(r"([\d.]+) us per call", out.stdout)
    return {"min": float(m.group(1)), "median": float(m.group(2)), "max": float(m.group(3)),
            "per_call": float(per.group(1)) if per else None}


def fmt(x):
    return "-" if x is None else (f"{x:.1f}" if x < 1000 else f"{x:,.0f}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sim", required=True)
    ap.add_argument("--machines", default="sim/machines")
    ap.add_argument("--quick", action="store_true", help="fewer sizes and host counts")
    a = ap.parse_args()
    S = a.sim
    juropa = ["--machine", f"{a.machines}/juropa.machine"]
    cluster = ["--machine", f"{a.machines}/cluster200g.machine"]
    t0 = time.time()

    # 1. Fig. 11: 512 hosts x 6 ranks = 3072, broadcast.
    sizes = ["64K", "16M"] if a.quick else ["64K", "1M", "16M"]
    variants = [("hierarchical (host:binomial, numa:binomial, core:flat)", []),
                ("flat binomial over all ranks (single:binomial)", ["--tree", "single:binomial"]),
                ("hierarchical, host:chain", ["--tree", "host:chain"]),
                ("hierarchical, pull at every level", ["--direction", "pull"]),
                ("hierarchical, 32 KiB fragments (the paper's)", ["--fragment", "fixed:32768"])]
    print("## 1. Hierarchical vs flat trees, broadcast, 3072 ranks (512 hosts x 6, JuRoPA-like)\n")
    print("Slowest rank's completion, us (`sim/machines/juropa.machine`).\n")
    print("| variant | " + " | ".join(sizes) + " |")
    print("|---|" + "---:|" * len(sizes))
    base = {}
    for name, extra in variants:
        cells = []
        for b in sizes:
            r = run(S, juropa + ["--bytes", b] + extra)
            v = r["max"] if r else None
            if not base.get(b):
                base[b] = v
            cells.append(f"{fmt(v)} ({base[b] / v:.2f}x)" if v and base[b] else fmt(v))
        print(f"| {name} | " + " | ".join(cells) + " |")
    print("\n(x: speed relative to the hierarchical default; > 1 is faster.)\n")

    # 2. Fig. 10: fragmentation, 4096 ranks = 512 hosts x 8.
    print("## 2. Pipelining: fragmentation of a 4096-rank broadcast (512 hosts x 8, JuRoPA-like)\n")
    sizes2 = ["1M", "16M"]
    frags = [("none", ["--fragment", "none"]), ("halves (8 KiB)", ["--fragment", "halves"]),
             ("fixed 32 KiB", ["--fragment", "fixed:32768"]), ("default (128 KiB)", [])]
    print("| fragmentation | " + " | ".join(sizes2) + " |")
    print("|---|" + "---:|" * len(sizes2))
    for name, extra in frags:
        cells = []
        for b in sizes2:
            r = run(S, juropa + ["--ppn", "8", "--bytes", b] + extra)
            cells.append(fmt(r["max"] if r else None))
        print(f"| {name} | " + " | ".join(cells) + " |")
    print()

    # 3. Loose vs strict (Nishtala and Yelick): 32 calls in a row.
    print("## 3. Loose vs strict synchronization: 32 calls in a row, us per call\n")
    hosts3 = [1, 16] if a.quick else [1, 16, 64]
    print("`sim/machines/cluster200g.machine` (32 ranks per host). Blocking loop and nonblocking "
          "(credits = 4 in flight).\n")
    print("| collective | bytes | hosts | ranks | loose blocking | strict blocking | strict/loose | "
          "loose nonblocking | strict nonblocking |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for coll in ["reduce", "broadcast"]:
        for b in ["8", "64K"]:
            for h in hosts3:
                common = cluster + ["--hosts", str(h), "--coll", coll, "--bytes", b, "--calls", "32"]
                lb = run(S, common)
                sb = run(S, common + ["--strict"])
                ln = run(S, common + ["--nonblocking"])
                sn = run(S, common + ["--strict", "--nonblocking"])
                ratio = sb["per_call"] / lb["per_call"] if lb and sb else None
                print(f"| {coll} | {b} | {h} | {h * 32} | {fmt(lb and lb['per_call'])} | {fmt(sb and sb['per_call'])} | "
                      f"{'-' if ratio is None else f'{ratio:.2f}'} | {fmt(ln and ln['per_call'])} | "
                      f"{fmt(sn and sn['per_call'])} |")
    print()

    # 4. Flat vs tree at the host level as hosts grow.
    print("## 4. Flat vs binomial host-level tree as the host count grows (broadcast, 8 ranks per host)\n")
    hosts4 = [2, 8, 32, 128] if a.quick else [2, 4, 8, 16, 32, 64, 128, 256]
    sizes4 = ["8", "64K", "1M"]
    print("Slowest rank's completion, us: flat / binomial (ratio flat/binomial; < 1: flat wins). "
          "`cluster200g.machine` with `--ppn 8`.\n")
    print("| hosts | ranks | " + " | ".join(sizes4) + " |")
    print("|---:|---:|" + "---:|" * len(sizes4))
    for h in hosts4:
        cells = []
        for b in sizes4:
            f = run(S, cluster + ["--hosts", str(h), "--ppn", "8", "--bytes", b, "--tree", "host:flat"])
            t = run(S, cluster + ["--hosts", str(h), "--ppn", "8", "--bytes", b, "--tree", "host:binomial"])
            cells.append(f"{fmt(f['max'])} / {fmt(t['max'])} ({f['max'] / t['max']:.2f})" if f and t else "-")
        print(f"| {h} | {h * 8} | " + " | ".join(cells) + " |")
    print()

    # 5. Best host radix as hosts grow.
    print("## 5. Best host-level radix as the host count grows (broadcast, 8 ranks per host)\n")
    hosts5 = [8, 64] if a.quick else [8, 64, 512]
    radices = [("chain", "chain"), ("2", "binomial"), ("4", "4"), ("8", "8"), ("flat", "flat")]
    sizes5 = ["64K", "16M"]
    print("| hosts | bytes | " + " | ".join(f"radix {r}" for r, _ in radices) + " | best |")
    print("|---:|---:|" + "---:|" * (len(radices) + 1))
    for h in hosts5:
        for b in sizes5:
            vals = []
            for _, spec in radices:
                r = run(S, cluster + ["--hosts", str(h), "--ppn", "8", "--bytes", b, "--tree", f"host:{spec}"])
                vals.append(r["max"] if r else None)
            best = min((v, radices[i][0]) for i, v in enumerate(vals) if v is not None)
            print(f"| {h} | {b} | " + " | ".join(fmt(v) for v in vals) + f" | {best[1]} |")
    print(f"\n(generated in {time.time() - t0:.0f} s of wall time by bench/scripts/sim_scale.py)")


if __name__ == "__main__":
    main()
