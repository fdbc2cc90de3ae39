#!/usr/bin/env python3
"""The time check of `paraplan calibrate` (docs/calibration.md).

Calibrates this machine (bf16 and fp32 numbers), then runs `paraplan validate`
on 2-rank layouts of the timing specs (tests/data/validate/time-*.yaml), each
copied next to the calibrated cluster of its precision, and prints measured
against predicted step time with the error. Exit status 1 when a layout is
off by more than --tolerance.

    bench/calibration_check.py build/paraplan [--runs 3] [--prefix "chrt -f 1"]
        [--launch validate|mpirun] [--eager-limit BYTES] [--recalibrate]

--prefix runs every command under another (e.g. `chrt -f 1`: real-time
priority, so that other processes on a shared host do not stretch the timings).
--launch mpirun starts the ranks with `mpirun -np 2 paraplan validate
--launcher none` instead of letting validate launch them (no per-action
heartbeat files). --eager-limit sets Open MPI's shared-memory eager limit
(OMPI_MCA_btl_vader_eager_limit) for every run, so that a pipeline send
larger than the default 4 KiB completes without the sender re-entering MPI.
"""
import argparse
import json
import os
import pathlib
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "validate"
LAYOUTS = [
    "dp=2", "tp=2", "pp=2", "tp=2,sp=1", "dp=2,zero=1", "dp=2,zero=2", "dp=2,zero=3",
    "dp=2,recompute=selective", "dp=2,recompute=full", "tp=2,recompute=full", "pp=2,schedule=gpipe",
]
SPECS = ["gpt-fp32", "gpt-bf16", "llama-fp32", "llama-bf16"]


def run(cmd, prefix, env=None):
    full = shlex.split(prefix) + cmd if prefix else cmd
    r = subprocess.run(full, capture_output=True, text=True, env=env)
    if r.returncode not in (0, 1):  # validate exits 1 when a memory check fails; the timing is still there
        sys.exit(f"failed ({r.returncode}): {' '.join(full)}\n{r.stderr}")
    return r.stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("paraplan")
    ap.add_argument("--runs", type=int, default=3, help="validate runs per layout; the median counts")
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--prefix", default="", help='run every command under this, e.g. "chrt -f 1"')
    ap.add_argument("--tolerance", type=float, default=0.25)
    ap.add_argument("--quick", action="store_true", help="calibrate --quick")
    ap.add_argument("--keep", help="keep the calibrated clusters and specs in this folder")
    ap.add_argument("--launch", choices=["validate", "mpirun"], default="validate")
    ap.add_argument("--eager-limit", type=int, help="OMPI_MCA_btl_vader_eager_limit for every run")
    ap.add_argument("--recalibrate", action="store_true",
                    help="calibrate before every run (not once per precision) and compare each run with its own "
                         "calibration: on a host whose speed drifts, the prediction is made minutes, not a quarter "
                         "of an hour, before the steps")
    a = ap.parse_args()
    env = dict(os.environ)
    if a.eager_limit:
        env["OMPI_MCA_btl_vader_eager_limit"] = str(a.eager_limit)
    env.setdefault("OMPI_MCA_btl_vader_single_copy_mechanism", "none")
    if os.geteuid() == 0:
        env["OMPI_ALLOW_RUN_AS_ROOT"] = env["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1"
    exe = str(pathlib.Path(a.paraplan).resolve())
    work = pathlib.Path(a.keep or tempfile.mkdtemp(prefix="paraplan-timecheck-"))
    work.mkdir(parents=True, exist_ok=True)
    for f in ("gpt-small.yaml", "llama-small.yaml"):
        shutil.copy(DATA / f, work / f)
    rows, worst, worst_fastest = [], 0.0, 0.0
    # Per precision: calibrate, then its specs; the runs of one layout are spread
    # over the batch (run 1 of every layout, then run 2, ...) so that a burst of
    # load on a shared host does not hit all of them. --recalibrate calibrates
    # again before every run, and each run is compared with its own calibration.
    def calibrate(prec, r):
        cmd = [exe, "calibrate", "--ranks", "2", "--precision", prec, "--output", str(work / f"cluster-{prec}.yaml")]
        if a.quick:
            cmd.append("--quick")
        report = run(cmd, a.prefix, env)
        (work / f"calibrate-{prec}-{r}.txt").write_text(report)
        print(f"calibrated {prec} (run {r + 1}): " +
              "; ".join(l.strip() for l in report.splitlines() if l.strip().startswith("fit:")), flush=True)

    for prec in ("bf16", "fp32"):
        specs = [s for s in SPECS if s.endswith(prec)]
        for spec in specs:
            text = (DATA / f"time-{spec}.yaml").read_text().replace("cluster: cpu.yaml", f"cluster: cluster-{prec}.yaml")
            (work / f"time-{spec}.yaml").write_text(text)
        pairs = {}  # (spec, layout) -> [(predicted, measured)] per run
        for r in range(a.runs):
            if r == 0 or a.recalibrate:
                calibrate(prec, r)
            for spec in specs:
                for layout in LAYOUTS:
                    cmd = [exe, "validate", str(work / f"time-{spec}.yaml"), "--layout", layout, "--steps", str(a.steps),
                           "--format", "json"]
                    if a.launch == "mpirun":
                        cmd = ["mpirun", "-np", "2", "--bind-to", "none"] + cmd + ["--launcher", "none"]
                    j = json.loads(run(cmd, a.prefix, env))
                    pairs.setdefault((spec, layout), []).append(
                        (j["step_time_s"]["predicted"], j["step_time_s"]["measured"]))
        for spec in specs:
            for layout in LAYOUTS:
                pm = pairs[spec, layout]
                p = statistics.median(x for x, _ in pm)
                ms = [y for _, y in pm]
                m = statistics.median(ms)
                err = statistics.median((y - x) / x for x, y in pm)  # = (m - p) / p without --recalibrate
                fp, fm = min(pm, key=lambda q: q[1] / q[0])  # the fastest run against its own prediction
                err_fastest = (fm - fp) / fp
                worst = max(worst, abs(err))
                worst_fastest = max(worst_fastest, abs(err_fastest))
                rows.append((spec, layout, p, m, err, fm, err_fastest))
                print(f"{spec:<11} {layout:<26} predicted {p:8.4f} s  measured {m:8.4f} s  ({100 * err:+6.1f}%)"
                      f"  runs {min(ms):.4f}..{max(ms):.4f}", flush=True)
    print("\n| spec | layout | predicted s | measured s (median run) | error | fastest run | error |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
    for spec, layout, p, m, err, fm, err_fastest in rows:
        print(f"| time-{spec} | {layout} | {p:.4f} | {m:.4f} | {100 * err:+.1f}% | {fm:.4f} | {100 * err_fastest:+.1f}% |")
    within = sum(1 for r in rows if abs(r[4]) <= a.tolerance)
    within_fastest = sum(1 for r in rows if abs(r[6]) <= a.tolerance)
    print(f"\n{within} of {len(rows)} within {100 * a.tolerance:.0f}% on the median run, {within_fastest} on the fastest run")
    print(f"\nlargest error {100 * worst:.1f}% (median run), {100 * worst_fastest:.1f}% (fastest run); "
          f"tolerance {100 * a.tolerance:.0f}%; launch {a.launch}, "
          f"eager limit {a.eager_limit or 'default'}, prefix '{a.prefix}', load average {os.getloadavg()[0]:.1f}; "
          f"files in {work}")
    if not a.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if worst <= a.tolerance else 1


if __name__ == "__main__":
    sys.exit(main())
