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
    with tempfile.TemporaryDirectory(prefix="strata-tuning-compare.") as tmp:
        for r in range(a.rounds):
            for name in (["default", "tuned"] if r % 2 == 0 else ["tuned", "default"]):
                env = {k: v for k, v in os.environ.items() if not k.startswith("STRATA_")}
                env["STRATA_TUNING"] = "off" if name == "default" else os.path.abspath(a.table)
                out = os.path.join(tmp, f"{name}-{r}.json")
                cmd = [os.path.join(b, "strata-run"), "-n", str(a.ranks), "--bind", "core", "--timeout", "300", "--",
                       os.path.join(b, "strata-bench"), "--coll", a.colls, "--sizes", a.sizes, "--no-memcpy",
                       "--json", out, "--quiet"]
                subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                with open(out) as f:
                    for rec in json.load(f):
                        if rec["library"] != "strata":
                            continue
                        k = (rec["collective"], rec["bytes"])
                        res[name][k] = min(res[name].get(k, float("inf")), rec["median_us"])
    print(f"# {a.table} vs STRATA_TUNING=off: {a.ranks} ranks, {a.rounds} alternating rounds, best median per point")
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
