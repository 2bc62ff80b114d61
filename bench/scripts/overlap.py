#!/usr/bin/env python3
"""Overlap across hosts (docs/performance.md, "Overlap across hosts").

OSU's method (t_pure = the nonblocking collective alone, compute as long as
t_pure, t_ovl = start + compute + wait, overlap = 1 - (t_ovl - t_compute) /
t_pure), 2 ranks on 2 emulated hosts per link rate, for every collective and
size, side by side in one run and in interleaved rounds:

  strata        strata-run --hosts 2 --net RATE --bind core -- strata-bench --overlap
  openmpi       Open MPI (TCP BTL) under strata-net
  mpich         MPICH (ch4:ucx over tcp) under strata-net
  mpich-async   the same with MPIR_CVAR_ASYNC_PROGRESS=1 (a progress thread)

plus the floor of the same run: strata-bench measures, after each point, the
CPU time a raw blocking-TCP transfer of the collective's bytes costs the
rank's core (user + system + irq/softirq; bench/strata_bench/overlap_floor.cpp);
the reachable overlap of a library is 1 - that CPU / its own t_pure.

  bench/scripts/overlap.py [--build build] [--nets 10gbit,1gbit] [--colls allreduce,alltoall,bcast]
                           [--sizes 64K,1M,4M] [--rounds 3] [--iters N] [--out DIR] [--no-mpi]

Prints (and writes to DIR/report.md) one table per rate: per collective and
size, each library's overlap (median [min-max] over rounds), its t_ovl
(median, us), strata's floor, strata's distance to it in points, and whether
strata's t_ovl is at most each baseline's.
"""
import argparse
import datetime
import importlib.machinery
import importlib.util
import os
import re
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def load_compare():
    path = os.path.join(ROOT, "bench", "compare")
    loader = importlib.machinery.SourceFileLoader("strata_compare", path)
    spec = importlib.util.spec_from_loader("strata_compare", loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


OVL = re.compile(r"# overlap (\w+) (\d+) B: pure ([\d.]+) us, compute ([\d.]+) us, overlapped ([\d.]+) us -> ([\d.]+)%"
                 r"(?: \(rank 0; min over ranks ([\d.]+)%\))?")
FLOOR = re.compile(r"# floor (\w+) (\d+) B: raw TCP transfer ([\d.]+) us, CPU on the rank's core per transfer ([\d.]+) us")
PARTS = re.compile(r"# overlap parts (\w+) (\d+) B \(rank 0, medians\): in the call ([-\d.]+) us, compute stretched by "
                   r"([-\d.]+) us, wait after the compute ([-\d.]+) us(?:; progress server during the compute: "
                   r"(\d+) polls, (\d+) blocks)?")
OWN = re.compile(r"# own floor (\w+) (\d+) B: core busy per pure call with the caller asleep ([\d.]+) us")


def parse(log):
    """{(coll, bytes): {"pure", "ovl", "pct", "cpu"}} from one run's log."""
    out = {}
    try:
        text = open(log).read()
    except OSError:
        return out
    for m in OVL.finditer(text):
        key = (m.group(1), int(m.group(2)))
        pct = float(m.group(7) if m.group(7) is not None else m.group(6))  # strata: the smallest over ranks
        out[key] = {"pure": float(m.group(3)), "ovl": float(m.group(5)), "pct": pct}
    for m in FLOOR.finditer(text):
        key = (m.group(1), int(m.group(2)))
        out.setdefault(key, {})["cpu"] = float(m.group(4))
        out[key]["raw"] = float(m.group(3))
    for m in PARTS.finditer(text):
        key = (m.group(1), int(m.group(2)))
        out.setdefault(key, {}).update(call=float(m.group(3)), stretch=float(m.group(4)), wait=float(m.group(5)))
        if m.group(6) is not None:
            out[key].update(polls=float(m.group(6)), blocks=float(m.group(7)))
    for m in OWN.finditer(text):
        out.setdefault((m.group(1), int(m.group(2))), {})["own"] = float(m.group(3))
    return out


def human(b):
    for unit, k in (("M", 1 << 20), ("K", 1 << 10)):
        if b >= k and b % k == 0:
            return f"{b // k}{unit}"
    return str(b)


def spread(xs, fmt="{:.0f}"):
    if not xs:
        return "-"
    med = statistics.median(xs)
    if len(xs) == 1:
        return fmt.format(med)
    return f"{fmt.format(med)} [{fmt.format(min(xs))}-{fmt.format(max(xs))}]"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--nets", default="10gbit,1gbit")
    ap.add_argument("--colls", default="allreduce,alltoall,bcast")
    ap.add_argument("--sizes", default="64K,1M,4M")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--iters", type=int, default=0)
    ap.add_argument("--no-mpi", action="store_true", help="strata only")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    cmp = load_compare()
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    out_root = a.out or os.path.join(a.build, "bench-results", f"overlap-{stamp}")
    os.makedirs(out_root, exist_ok=True)
    report = [f"# Overlap across hosts ({stamp})\n",
              f"Command: `{' '.join(['bench/scripts/overlap.py'] + sys.argv[1:])}`; machine: {cmp.load_avg()}\n"]
    libs = ["strata"] + ([] if a.no_mpi else ["openmpi", "mpich", "mpich-async"])
    common = ["--coll", a.colls, "--sizes", a.sizes] + (["--iters", str(a.iters)] if a.iters else [])
    for net in a.nets.split(","):
        args = argparse.Namespace(build=a.build, hosts=2, net=net, ranks=2, out=os.path.join(out_root, net))
        R = cmp.Runner(args)
        have = {lib: lib == "strata" or R.have_mpi(lib.replace("-async", "")) for lib in libs}
        runs = {lib: [] for lib in libs}
        for rnd in range(a.rounds):
            for lib in libs:
                if not have[lib]:
                    continue
                name = f"{lib}-r{rnd}"
                if lib == "strata":
                    R.strata(name, common + ["--overlap"])
                elif lib == "mpich-async":
                    R.mpi("mpich", name, common + ["--mode", "overlap"], genv={"MPIR_CVAR_ASYNC_PROGRESS": "1"})
                else:
                    R.mpi(lib, name, common + ["--mode", "overlap"])
                runs[lib].append(parse(os.path.join(args.out, name + ".log")))
        keys = sorted({k for r in runs["strata"] for k in r}, key=lambda k: (k[0], k[1]))
        report.append(f"\n## {net} links, 2 ranks on 2 emulated hosts, {a.rounds} interleaved rounds\n")
        report.append("Overlap %: median [min-max] over rounds (strata: the smaller of its 2 ranks; MPI: rank 0). "
                      "t_ovl: median, us. Floor: 1 - (CPU of a raw TCP transfer of the same bytes on the rank's "
                      "core) / strata's t_pure, median over rounds.\n")
        hdr = "| collective | size | " + " | ".join(f"{lib} %" for lib in libs) + " | floor % | strata to floor | " + \
              " | ".join(f"{lib} t_ovl" for lib in libs) + " | strata t_ovl <= each |"
        report.append(hdr)
        report.append("|" + "---|" * (hdr.count("|") - 1))
        for k in keys:
            pct = {lib: [r[k]["pct"] for r in runs[lib] if k in r and "pct" in r[k]] for lib in libs}
            ovl = {lib: [r[k]["ovl"] for r in runs[lib] if k in r and "ovl" in r[k]] for lib in libs}
            floors = [100.0 * max(0.0, 1.0 - r[k]["cpu"] / r[k]["pure"]) for r in runs["strata"]
                      if k in r and "cpu" in r[k] and r[k].get("pure")]
            fmed = statistics.median(floors) if floors else None
            smed = statistics.median(pct["strata"]) if pct["strata"] else None
            dist = f"{fmed - smed:+.0f} pts" if fmed is not None and smed is not None else "-"
            so = statistics.median(ovl["strata"]) if ovl["strata"] else None
            better = [lib for lib in libs[1:] if ovl[lib] and so is not None and so <= statistics.median(ovl[lib])]
            worse = [lib for lib in libs[1:] if ovl[lib] and so is not None and so > statistics.median(ovl[lib])]
            verdict = "yes" if not worse else "no: " + ", ".join(worse)
            row = [k[0], human(k[1])] + [spread(pct[lib]) for lib in libs] + \
                  [f"{fmed:.0f}" if fmed is not None else "-", dist] + \
                  [spread(ovl[lib], "{:.0f}") for lib in libs] + [verdict if better or worse else "-"]
            report.append("| " + " | ".join(row) + " |")
        # Where strata's t_ovl - t_compute goes (rank 0), and the floor from
        # its own transfers (core busy per pure call, the caller asleep).
        report.append("\nstrata's t_ovl - t_compute, rank 0, us (median [min-max] over rounds): the call itself, the "
                      "compute stretched by other work on its core (progress server, kernel), and the wait after "
                      "the compute (transfer not done); the progress server's polls during the compute (0: it "
                      "never ran). Own floor: 1 - (busy time of the rank's core per pure call with the caller "
                      "asleep, max over ranks) / t_pure.\n")
        report.append("| collective | size | in the call | compute stretched | wait after compute | "
                      "server polls in compute | own floor % |")
        report.append("|---|---|---|---|---|---|---|")
        for k in keys:
            rs = [r[k] for r in runs["strata"] if k in r]
            part = {f: [x[f] for x in rs if f in x] for f in ("call", "stretch", "wait", "polls")}
            own = [100.0 * max(0.0, 1.0 - x["own"] / x["pure"]) for x in rs if "own" in x and x.get("pure")]
            cells = [spread(part[f]) for f in ("call", "stretch", "wait", "polls")] + [spread(own)]
            report.append("| " + " | ".join([k[0], human(k[1])] + cells) + " |")
        if R.failed:
            report.append("\nFailed runs: " + "; ".join(R.failed))
        report.append("\nCommands:\n```\n" + "\n".join(R.commands) + "\n```")
    text = "\n".join(report) + "\n"
    with open(os.path.join(out_root, "report.md"), "w") as f:
        f.write(text)
    print(text)
    print(f"[overlap] report: {os.path.join(out_root, 'report.md')}", file=sys.stderr)


if __name__ == "__main__":
    main()
