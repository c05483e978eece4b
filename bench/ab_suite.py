#!/usr/bin/env python3
"""ab_suite.py -- ctorch against an older ctorch, case by case, alternating.

    python3 bench/ab_suite.py BASE_BENCH_SUITE NEW_BENCH_SUITE
            [--cases a,b] [--rounds N] [--big-rounds N] [--threads 2]

Runs bench_suite's ctorch side only (CT_BENCH_PYTHON=/bin/false, so the torch
side does not start) for one case at a time, alternating the two binaries
(ABBA order across rounds: who goes first alternates), and prints each
binary's median over the rounds of its per-run medians, and new/base.

Why this measures "within 5% of its ratio before this change": the suite's
ratio is ours/torch, and torch is the same program for both builds, so
ratio_new / ratio_base = ours_new / ours_base when both are timed in the same
stretch of time -- which the alternation gives, without torch's own swings
(on this shared host torch's time for one case has moved 20x between
back-to-back runs) entering the quotient.
"""
import argparse
import os
import platform
import re
import statistics
import subprocess
import sys

BIG = {"resnet50_train", "resnet50_infer1", "vgg16_train", "bert_train", "fashion_epoch",
       "transformer_train"}
ROW = re.compile(r"^(\S+)\s+(\d+)\s+([0-9.]+) \(([0-9.]+)\.\.([0-9.]+)\)")


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def run_one(binary, case, threads, reps):
    env = dict(os.environ, CT_BENCH_PYTHON="/bin/false")
    cmd = [binary, "/dev/null", "--threads", str(threads), "--cases", case]
    if reps:
        cmd += ["--reps", str(reps)]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800).stdout
    for line in out.splitlines():
        m = ROW.match(line)
        if m and m.group(1) == case:
            return float(m.group(3))
    raise RuntimeError("%s %s: no row in its output:\n%s" % (binary, case, out[-2000:]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("base")
    ap.add_argument("new")
    ap.add_argument("--cases", default=None)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--big-rounds", type=int, default=3)
    ap.add_argument("--big-reps", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    if a.cases:
        cases = a.cases.split(",")
    else:
        out = subprocess.run([a.new, "--list"], capture_output=True, text=True).stdout
        cases = [l.split()[0] for l in out.splitlines() if l.strip()]
    print("A/B, ctorch side only: base %s vs new %s" % (a.base, a.new))
    print("CPU: %s, %d threads; load %.2f at start" % (cpu_name(), a.threads, os.getloadavg()[0]))
    print("%-18s %-34s %-34s %7s" % ("case", "base ms: median of runs (runs)", "new ms: median of runs (runs)",
                                    "new/base"))
    worst = 0.0
    for case in cases:
        big = case in BIG
        rounds = a.big_rounds if big else a.rounds
        reps = a.big_reps if big else 0
        res = {a.base: [], a.new: []}
        for r in range(rounds):
            order = (a.base, a.new) if r % 2 == 0 else (a.new, a.base)
            for b in order:
                res[b].append(run_one(b, case, a.threads, reps))
        mb, mn = statistics.median(res[a.base]), statistics.median(res[a.new])
        ratio = mn / mb
        worst = max(worst, ratio)
        fmt = lambda v: " ".join("%.3g" % x for x in v)
        print("%-18s %-34s %-34s %7.3f" % (case, "%.3f (%s)" % (mb, fmt(res[a.base])),
                                           "%.3f (%s)" % (mn, fmt(res[a.new])), ratio), flush=True)
    print("worst new/base %.3f; load %.2f at the end" % (worst, os.getloadavg()[0]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
