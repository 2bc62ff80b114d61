#!/usr/bin/env python3
"""After a CTest run: name every test that did not run, with the reason it gave,
and fail when a multi-host test skipped on a machine that can emulate hosts.

  skip-report.py BUILD_DIR

Reads BUILD_DIR/Testing/Temporary/LastTest.log (CTest writes each test's output
there). A GoogleTest skip prints "Skipped" and its message before "[  SKIPPED ]";
those lines are the reason. Multi-host tests (the emulated cluster: NetCluster,
NetCleanup, NetMatrix, NetSlurm, NetApps, NetMpirun, StrataNet, FabricNetns) may only skip
where `strata-run --net-check` fails; where it succeeds a skip is an error
(exit 1), because the summary would otherwise say "100% tests passed" for
tests that did not run.
"""
import os
import re
import subprocess
import sys

MULTI_HOST = re.compile(r"^(NetCluster|NetCleanup|ExitPaths/NetCleanup|NetMatrix|Hosts2x2/NetMatrix|NetSlurm|NetApps|NetMpirun|"
                        r"StrataNet|FabricBackend\.\w*Netns\w*|\w*Netns\w*)\b")


def skipped_tests(log_path):
    """[(test name, reason)] for every test whose output says [  SKIPPED ]."""
    out = []
    try:
        text = open(log_path, errors="replace").read()
    except OSError:
        return out
    blocks = re.split(r"^\d+/\d+ Testing: ", text, flags=re.M)
    for block in blocks[1:]:
        name = block.split("\n", 1)[0].strip()
        if "[  SKIPPED ]" not in block:
            continue
        lines = block.splitlines()
        reason = []
        for i, line in enumerate(lines):
            if re.search(r": Skipped$", line) or line.strip() == "Skipped":
                for follow in lines[i + 1:]:
                    if follow.startswith("[  SKIPPED ]") or follow.startswith("[       OK ]"):
                        break
                    if follow.strip():
                        reason.append(follow.strip())
                break
        out.append((name, " / ".join(reason)[:400] or "(no reason given)"))
    return out


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "build"
    skipped = skipped_tests(os.path.join(build, "Testing", "Temporary", "LastTest.log"))
    if not skipped:
        print("skip-report: no test skipped")
        return 0
    print(f"skip-report: {len(skipped)} test(s) did not run:")
    for name, reason in skipped:
        print(f"  SKIPPED {name}: {reason}")
    multi = [n for n, _ in skipped if MULTI_HOST.match(n)]
    if not multi:
        return 0
    run = os.path.join(build, "bin", "strata-run")
    check = subprocess.run([run, "--net-check"], capture_output=True, text=True) if os.access(run, os.X_OK) else None
    if check is not None and check.returncode == 0:
        print(f"skip-report: FAIL: {len(multi)} multi-host test(s) skipped although `strata-run --net-check` "
              f"succeeds on this machine: {', '.join(multi)}")
        return 1
    why = (check.stdout + check.stderr).strip() if check is not None else "strata-run is not built"
    print(f"skip-report: {len(multi)} multi-host test(s) skipped because this machine cannot emulate hosts: {why}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
