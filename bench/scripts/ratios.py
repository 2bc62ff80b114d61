#!/usr/bin/env python3
"""Median strata / best-MPI ratios over several bench/compare result folders.

usage: bench/scripts/ratios.py DIR [DIR ...]
Each DIR holds the JSON files of one `bench/scripts/performance.sh --no-doc`
run (strata.json, strata-persistent.json, strata-shared.json, openmpi-blocking.json, ...). For every
(collective, bytes) it prints the median over the runs of strata / better
blocking MPI and strata / better nonblocking MPI (each ratio taken within one
run, so both sides saw the same machine state), with the range over the runs.
"""
import json
import os
import statistics
import sys


def load(path):
    try:
        with open(path) as f:
            return {(r["collective"], r["bytes"]): r["median_us"] for r in json.load(f) if r.get("library") != "memcpy"}
    except (OSError, ValueError):
        return {}


def main():
    dirs = sys.argv[1:]
    if not dirs:
        print(__doc__)
        return 2
    rows = {}
    for d in dirs:
        s = load(os.path.join(d, "strata.json"))
        p = load(os.path.join(d, "strata-persistent.json"))
        sh = load(os.path.join(d, "strata-shared.json"))
        blk = [load(os.path.join(d, f"{lib}-blocking.json")) for lib in ("openmpi", "mpich")]
        nb = [load(os.path.join(d, f"{lib}-nonblocking.json")) for lib in ("openmpi", "mpich")]
        for key, t in s.items():
            b = [m[key] for m in blk if key in m]
            n = [m[key] for m in nb if key in m]
            if not b or not n:
                continue
            r = rows.setdefault(key, {"blk": [], "nb": [], "pers": [], "shared": []})
            r["blk"].append(t / min(b))
            r["nb"].append(t / min(n))
            if key in p:
                r["pers"].append(p[key] / min(b))
            if key in sh:
                r["shared"].append(sh[key] / min(b))
    print(f"# {len(dirs)} runs; median (min-max) over runs of strata / better MPI")
    print("| collective | bytes | / blocking MPI | / nonblocking MPI + wait | persistent / blocking MPI |"
          " shared buffers / blocking MPI |")
    print("|---|---:|---|---|---|---|")

    def cell(v):
        return f"{statistics.median(v):.2f} ({min(v):.2f}-{max(v):.2f})" if v else "-"

    for (c, b) in sorted(rows, key=lambda k: (k[0], k[1])):
        r = rows[(c, b)]
        print(f"| {c} | {b} | {cell(r['blk'])} | {cell(r['nb'])} | {cell(r['pers'])} | {cell(r['shared'])} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
