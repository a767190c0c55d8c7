#!/usr/bin/env python3
"""Run `schedlab ... --json -` and print one metric's mean as a bare number.

Usage: bench/figure.py [--stat median|mean|p99|max] METRIC SCHEDLAB_ARGS...
The first benchmark of the run that has METRIC is used; for a latency
histogram the median is printed unless --stat says otherwise (mean, p99,
max; histogram values are ns). Samples metrics always print their mean.
Exits non-zero (printing nothing) if the benchmark could not measure, so a
script never compares a made-up figure.
"""
import json
import subprocess
import sys


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    argv = sys.argv[1:]
    stat = "median"
    if argv and argv[0] == "--stat":
        stat, argv = argv[1], argv[2:]
    if stat not in ("median", "mean", "p99", "max") or len(argv) < 2:
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
                buckets = data["histogram"]["buckets"]
                total = sum(c for _, c in buckets)
                if stat == "mean":
                    print(sum(v * c for v, c in buckets) / total)
                    return
                if stat == "max":
                    print(max(v for v, _ in buckets))
                    return
                q = 0.99 if stat == "p99" else 0.5
                acc = 0
                for v, c in buckets:
                    acc += c
                    if acc >= q * total:
                        print(v)
                        return
    sys.exit(f"no metric {metric} in the run")


if __name__ == "__main__":
    main()
