#!/usr/bin/env python3
"""scripts/tuning-compare.py: strata with a tuning table vs the built-in defaults, one invocation.

Runs strata-bench --coll on N ranks (strata-run --bind core) alternately with
STRATA_TUNING=off and STRATA_TUNING=TABLE for R rounds (order alternating per
round, against drift), keeps each configuration's best median per (collective,
size), and prints tuned / default per point and their geometric mean
(docs/tuning.md, "Measured here"). Every other STRATA_* variable is cleared.

  scripts/tuning-compare.py TABLE [--build build] [--rounds 6] [--ranks 2]
                            [--colls bcast,reduce,allreduce,allgather,alltoall]
                            [--sizes 2K,8K,32K,256K,1M,4M,8M] [--json OUT]
"""
import argparse
import json
import math
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("table")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--colls", default="bcast,reduce,allreduce,allgather,alltoall")
    ap.add_argument("--sizes", default="2K,8K,32K,256K,1M,4M,8M")
    ap.add_argument("--json", help="also write the per-point results here")
    a = ap.parse_args()
    if not os.path.isfile(a.table):
        sys.exit(f"tuning-compare: no table at {a.table}")
    b = os.path.join(a.build, "bin")
    res = {"default": {}, "tuned": {}}
    probe = os.path.join(b, "strata-handoff-probe")

    def placement():
        # 64 KiB cross-core hand-off (docs/performance.md, "Two placements of the same VM"); 0: no probe.
        if not os.path.exists(probe):
            return 0.0
        out = subprocess.run([probe, "--iters", "2000"], capture_output=True, text=True).stdout
        m = re.search(r"median ([\d.]+) us", out)
        return float(m.group(1)) if m else 0.0

    probes = []
    redone = 0
    with tempfile.TemporaryDirectory(prefix="strata-tuning-compare.") as tmp:
        for r in range(a.rounds):
            # Both configurations of a round in one placement: a round whose probes
            # before and after differ by 1.5x or more is run again (up to 3 times).
            for attempt in range(3):
                before = placement()
                got = {"default": {}, "tuned": {}}
                for name in (["default", "tuned"] if r % 2 == 0 else ["tuned", "default"]):
                    env = {k: v for k, v in os.environ.items() if not k.startswith("STRATA_")}
                    env["STRATA_TUNING"] = "off" if name == "default" else os.path.abspath(a.table)
                    out = os.path.join(tmp, f"{name}-{r}.json")
                    cmd = [os.path.join(b, "strata-run"), "-n", str(a.ranks), "--bind", "core", "--timeout", "300",
                           "--", os.path.join(b, "strata-bench"), "--coll", a.colls, "--sizes", a.sizes,
                           "--no-memcpy", "--json", out, "--quiet"]
                    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                    with open(out) as f:
                        for rec in json.load(f):
                            if rec["library"] == "strata":
                                got[name][(rec["collective"], rec["bytes"])] = rec["median_us"]
                after = placement()
                steady = before <= 0 or after <= 0 or max(before, after) / min(before, after) < 1.5
                if steady or attempt == 2:
                    break
                redone += 1
            probes.append((before, after))
            for name in got:
                for k, us in got[name].items():
                    res[name][k] = min(res[name].get(k, float("inf")), us)
    print(f"# {a.table} vs STRATA_TUNING=off: {a.ranks} ranks, {a.rounds} alternating rounds, best median per point")
    if any(p for pair in probes for p in pair):
        print("# placement probes per round (64 KiB hand-off us, before/after): " +
              ", ".join(f"{x:.1f}/{y:.1f}" for x, y in probes) + f"; rounds run again: {redone}")
    print(f"{'collective':12s} {'bytes':>9s} {'default_us':>11s} {'tuned_us':>9s} {'tuned/def':>9s}")
    logs, rows = [], []
    for k in sorted(res["default"]):
        d, t = res["default"][k], res["tuned"].get(k)
        if t is None or d <= 0:
            continue
        logs.append(math.log(t / d))
        rows.append({"collective": k[0], "bytes": k[1], "default_us": d, "tuned_us": t, "ratio": t / d})
        print(f"{k[0]:12s} {k[1]:9d} {d:11.2f} {t:9.2f} {t / d:9.3f}")
    gm = math.exp(sum(logs) / len(logs)) if logs else float("nan")
    print(f"# geometric mean tuned/default: {gm:.3f} over {len(logs)} points; worst {max(r['ratio'] for r in rows):.3f}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"table": a.table, "rounds": a.rounds, "ranks": a.ranks, "points": rows, "geomean": gm}, f,
                      indent=1)


if __name__ == "__main__":
    main()
