#!/usr/bin/env python3
"""Predicted (strata-sim) vs measured (strata-bench --coll --json) completion times.

Usage: sim_validate.py --sim build/bin/strata-sim [--topology SPEC] [--extra "ARGS"] BENCH.json ...

For every strata record (one collective, one size, n ranks on this one host) it runs
strata-sim on one host of `--topology` with n ranks, the shared-memory parameters
calibrated here at the record's size (--calibrate), and prints a markdown table:
measured median (the median over ranks of each rank's median blocking call, us),
predicted (the slowest rank's completion, us), and the error in percent. The last
lines give the median absolute error per rank count and over all records from 64 KiB.
docs/simulator.md, "Validation".
"""
import argparse
import json
import re
import statistics
import subprocess
import sys

COLL = {"bcast": "broadcast", "allreduce": "allreduce", "reduce": "reduce", "allgather": "allgather",
        "alltoall": "alltoall", "gather": "gather", "scatter": "scatter", "reduce_scatter": "reduce_scatter_block",
        "barrier": "barrier"}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sim", required=True)
    ap.add_argument("--topology", default="numa:1 core:2 pu:1")
    ap.add_argument("--hosts", type=int, default=1, help="virtual hosts the measurement used (block placement)")
    ap.add_argument("--variant", default="blocking", help="strata-bench variant to compare (blocking)")
    ap.add_argument("--calls", type=int, default=1,
                    help="simulate this many blocking calls back to back and compare the time per call "
                         "(as the benchmark's loop measures); 1 = one call's slowest rank")
    ap.add_argument("--extra", default="--shm-lat-us 0.5 --node-us 0.08 --progress-us 0.2 --numa-mem-gbs 60")
    ap.add_argument("--min-bytes", type=int, default=65536)
    ap.add_argument("--handoff", metavar="PROBE",
                    help="path of strata-handoff-probe: measure the cross-core hand-off at each record's size "
                         "(capped at 128 KiB, the plans' fragment size) and pass --handoff-write-gbs / --handoff-read-gbs "
                         "(docs/simulator.md, \"Hand-offs\"); run it in the placement the measurement saw")
    ap.add_argument("json", nargs="+")
    a = ap.parse_args()
    rows = []
    handoff = {}

    def probe(size, mode="memcpy"):
        iters = str(max(300, min(3000, 200_000_000 // max(size, 1))))
        out = subprocess.run([a.handoff, "--size", str(size), "--iters", iters, "--mode", mode], capture_output=True,
                             text=True)
        m = re.search(r"median ([\d.]+) us, writer's copy ([\d.]+) us", out.stdout)
        if out.returncode != 0 or not m:
            sys.exit(f"strata-handoff-probe failed at {size} B: {out.stderr.strip()}")
        return float(m.group(1)), float(m.group(2))

    def handoff_args(size):
        # Plans move messages above 128 KiB in 128 KiB fragments (pipeline_fragment,
        # sym_large_fragment): that is the size of one hand-off.
        size = min(size, 128 << 10)
        if size not in handoff:
            sync, _ = probe(64)  # the flag round trip alone
            # The shm transport's puts take the faster of memcpy and non-temporal stores
            # (STRATA_SHM_NT=auto, docs/transport.md): so does the model.
            total, writer = min(probe(size), probe(size, "nt") if size >= 8192 else (1e30, 0))
            reader = max(total - writer - sync, 0.05 * total)
            handoff[size] = (size / (writer * 1e3), size / (reader * 1e3))
        w, r = handoff[size]
        return ["--handoff-write-gbs", f"{w:.3f}", "--handoff-read-gbs", f"{r:.3f}"]

    for path in a.json:
        for r in json.load(open(path)):
            if r.get("library") != "strata" or r["collective"] not in COLL:
                continue
            if r.get("variant", "blocking") != a.variant:
                continue
            coll, n, b = COLL[r["collective"]], r["ranks"], r["bytes"]
            if n % a.hosts != 0:
                continue
            # strata-bench counts reduce_scatter by the whole vector, the compiler by one rank's block.
            sb = b // n if coll == "reduce_scatter_block" else b
            if sb % 4 != 0 or sb == 0:
                continue
            cmd = [a.sim, "--hosts", str(a.hosts), "--topology", a.topology, "--ppn", str(n // a.hosts), "--coll",
                   coll, "--bytes", str(sb), "--quiet", "--calibrate"] + a.extra.split()
            if a.calls > 1:
                cmd += ["--calls", str(a.calls)]
            if a.handoff:
                cmd += handoff_args(sb)
            out = subprocess.run(cmd, capture_output=True, text=True)
            if out.returncode != 0:
                print(f"strata-sim failed for {coll} {b} B n={n}: {out.stderr.strip()}", file=sys.stderr)
                continue
            m = re.search(r"completion us: min ([\d.]+) median ([\d.]+) max ([\d.]+)", out.stdout)
            cal = re.search(r"copy_gbs = ([\d.]+), reduce_gbs = ([\d.]+)", out.stdout)
            per = re.search(r"([\d.]+) us per call", out.stdout)
            pred = float(per.group(1)) if per else float(m.group(3))
            meas = r["median_us"]
            rows.append((n, r["collective"], b, meas, pred, 100.0 * (pred - meas) / meas, cal.group(1), cal.group(2)))
    print("| ranks | collective | bytes | measured us | predicted us | error % | copy GB/s | reduce GB/s |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|")
    for n, c, b, meas, pred, err, cg, rg in rows:
        print(f"| {n} | {c} | {b} | {meas:.1f} | {pred:.1f} | {err:+.0f} | {cg} | {rg} |")
    print()
    for n in sorted({r[0] for r in rows}):
        e = [abs(r[5]) for r in rows if r[0] == n and r[2] >= a.min_bytes]
        if e:
            print(f"ranks {n}: median |error| from {a.min_bytes} B = {statistics.median(e):.0f}% over {len(e)} records")
    e = [abs(r[5]) for r in rows if r[2] >= a.min_bytes]
    if e:
        print(f"all: median |error| from {a.min_bytes} B = {statistics.median(e):.0f}% over {len(e)} records")


if __name__ == "__main__":
    main()
