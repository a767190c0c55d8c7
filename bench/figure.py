#!/usr/bin/env python3
"""Run `schedlab ... --json -` and print one metric's mean as a bare number.

Usage: bench/figure.py [--stat STAT[,STAT...]] METRIC SCHEDLAB_ARGS...
The first benchmark of the run that has METRIC is used; for a latency
histogram the median is printed unless --stat says otherwise (median, mean,
p99, max, min; histogram values are ns; several stats of the same run are
printed on one line, space-separated). Samples metrics always print their
mean.
Exits non-zero (printing nothing) if the benchmark could not measure, so a
script never compares a made-up figure.
"""
import json
import subprocess
import sys


STATS = ("median", "mean", "p99", "max", "min")


def histogram_stat(hist, stat):
    buckets = hist["buckets"]
    total = sum(c for _, c in buckets)
    if stat == "mean":
        return sum(v * c for v, c in buckets) / total
    if stat in ("min", "max"):  # exact, kept beside the buckets
        return hist[stat + "_ns"]
    q = 0.99 if stat == "p99" else 0.5
    acc = 0
    for v, c in buckets:
        acc += c
        if acc >= q * total:
            return v
    return buckets[-1][0]


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    argv = sys.argv[1:]
    stats = ["median"]
    if argv and argv[0] == "--stat":
        stats, argv = argv[1].split(","), argv[2:]
    if any(s not in STATS for s in stats) or len(argv) < 2:
        sys.exit(__doc__)
    metric, args = argv[0], argv[1:]
    out = subprocess.run(args + ["--json", "-"], capture_output=True, text=True)
    if out.returncode != 0:
        sys.stderr.write(out.stderr)
        sys.exit(out.returncode)
    run = json.loads(out.stdout)
    for bench in run["benchmarks"]:
        for m in bench["metrics"]:
            if m["name"] != metric:
                continue
            data = m["data"]
            if data["type"] == "samples":
                values = data["values"]
                print(sum(values) / len(values))
                return
            if data["type"] == "histogram":
                print(" ".join(str(histogram_stat(data["histogram"], s)) for s in stats))
                return
    sys.exit(f"no metric {metric} in the run")


if __name__ == "__main__":
    main()
