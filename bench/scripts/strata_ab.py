#!/usr/bin/env python3
"""A/B of two strata configurations in interleaved rounds (A, B, A, B, ...):
two builds (a change's before and after) or two environments (e.g. two
libfabric providers, docs/fabric.md "Progress, waiting"). Latency of every
size and, optionally, OSU overlap.

  bench/scripts/strata_ab.py [--a-build build] [--b-build build] [--a-env K=V,...] [--b-env K=V,...]
                             [--a-args ARGS] [--b-args ARGS] [--ranks 2] [--hosts 1] [--net RATE] [--colls allreduce,bcast,alltoall]
                             [--sizes 8,64,1K,8K,64K,1M,4M] [--overlap-sizes 64K,1M,4M] [--rounds 3] [--out DIR]

Examples:
  providers across 2 emulated hosts:  --hosts 2 --net 10gbit --a-env STRATA_PROVIDER=net --b-env 'STRATA_PROVIDER=tcp;ofi_rxm'
  a change on one host:               --a-build build-before --b-build build --overlap-sizes ''
  one-shot against persistent plans:  --b-args=--persistent --overlap-sizes ''

Prints per collective and size the slowest rank's median time of each
(median [min-max] over rounds) and the ratio A / B per round (median
[min-max]); then the overlap of each.
"""
import argparse
import datetime
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from overlap import human, load_compare, parse, spread  # noqa: E402


def env_of(spec):
    out = {}
    for item in filter(None, spec.split(",")):
        k, _, v = item.partition("=")
        out[k] = v
    return out


def main():
    root_build = os.path.join(os.path.dirname(os.path.dirname(HERE)), "build")
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--a-build", default=root_build)
    ap.add_argument("--b-build", default=root_build)
    ap.add_argument("--a-env", default="")
    ap.add_argument("--b-env", default="")
    ap.add_argument("--a-args", default="", help="extra strata-bench arguments of A's latency runs (e.g. --persistent)")
    ap.add_argument("--b-args", default="", help="extra strata-bench arguments of B's latency runs")
    ap.add_argument("--hosts", type=int, default=1)
    ap.add_argument("--ranks", type=int, default=2, help="ranks, split evenly over the hosts (default 2)")
    ap.add_argument("--net", default=None)
    ap.add_argument("--colls", default="allreduce,bcast,alltoall")
    ap.add_argument("--sizes", default="8,64,1K,8K,64K,1M,4M")
    ap.add_argument("--overlap-sizes", default="64K,1M,4M")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    cmp = load_compare()
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    out = a.out or os.path.join(a.b_build, "bench-results", f"ab-{stamp}")
    side = {"A": (a.a_build, env_of(a.a_env)), "B": (a.b_build, env_of(a.b_env))}
    extra = {"A": a.a_args.split(), "B": a.b_args.split()}
    runners = {t: cmp.Runner(argparse.Namespace(build=b, hosts=a.hosts, net=a.net, ranks=a.ranks, out=out))
               for t, (b, _) in side.items()}
    lat = {"A": [], "B": []}
    ovl = {"A": [], "B": []}
    for rnd in range(a.rounds):
        for t in ("A", "B"):
            R, env = runners[t], side[t][1]
            recs = R.strata(f"lat-{t}-r{rnd}", ["--coll", a.colls, "--sizes", a.sizes, "--no-memcpy"] + extra[t],
                            env=env)
            lat[t].append({(r["collective"], r["bytes"]): r["max_us"] for r in recs
                           if r.get("variant", "").startswith(("blocking", "persistent"))})
            if a.overlap_sizes:
                R.strata(f"ovl-{t}-r{rnd}", ["--coll", a.colls, "--sizes", a.overlap_sizes, "--overlap"], env=env)
                ovl[t].append(parse(os.path.join(out, f"ovl-{t}-r{rnd}.log")))
    where = f"{a.ranks} ranks, {a.hosts} host(s)" + (f", {a.net} links" if a.net else "")
    lines = [f"# strata A/B ({stamp}): {where}\n",
             f"A = {side['A'][0]} {a.a_env} {a.a_args}; B = {side['B'][0]} {a.b_env} {a.b_args}\n",
             f"machine: {cmp.load_avg()}; {a.rounds} interleaved rounds; slowest rank's median, us\n",
             "| collective | size | A us | B us | A / B per round |", "|---|---|---|---|---|"]
    keys = sorted({k for r in lat["A"] for k in r}, key=lambda k: (k[0], k[1]))
    for k in keys:
        xa = [r[k] for r in lat["A"] if k in r]
        xb = [r[k] for r in lat["B"] if k in r]
        ratios = [ra[k] / rb[k] for ra, rb in zip(lat["A"], lat["B"]) if k in ra and k in rb and rb[k] > 0]
        lines.append(f"| {k[0]} | {human(k[1])} | {spread(xa, '{:.2f}')} | {spread(xb, '{:.2f}')} | "
                     f"{spread(ratios, '{:.2f}')} |")
    if a.overlap_sizes:
        lines += ["", "| collective | size | A overlap % | B overlap % | A t_ovl us | B t_ovl us |",
                  "|---|---|---|---|---|---|"]
        keys = sorted({k for r in ovl["A"] for k in r}, key=lambda k: (k[0], k[1]))
        for k in keys:
            pa = [r[k]["pct"] for r in ovl["A"] if k in r and "pct" in r[k]]
            pb = [r[k]["pct"] for r in ovl["B"] if k in r and "pct" in r[k]]
            ta = [r[k]["ovl"] for r in ovl["A"] if k in r and "ovl" in r[k]]
            tb = [r[k]["ovl"] for r in ovl["B"] if k in r and "ovl" in r[k]]
            lines.append(f"| {k[0]} | {human(k[1])} | {spread(pa)} | {spread(pb)} | {spread(ta)} | {spread(tb)} |")
    failed = runners["A"].failed + runners["B"].failed
    if failed:
        lines.append("\nFailed runs: " + "; ".join(failed))
    lines.append("\nCommands:\n```\n" + "\n".join(runners["A"].commands + runners["B"].commands) + "\n```")
    text = "\n".join(lines) + "\n"
    with open(os.path.join(out, "report.md"), "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    main()
