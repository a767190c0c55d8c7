#!/usr/bin/env python3
"""Run `schedlab ... --json -` and print one metric's mean as a bare number.

Usage: bench/figure.py METRIC SCHEDLAB_ARGS...
The first benchmark of the run that has METRIC is used; for a latency
histogram the median is printed. Exits non-zero (printing nothing) if the
benchmark could not measure, so a script never compares a made-up figure.
"""
import json
import subprocess
import sys


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    metric, args = sys.argv[1], sys.argv[2:]
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
                acc = 0
                for v, c in buckets:
                    acc += c
                    if acc * 2 >= total:
                        print(v)
                        return
    sys.exit(f"no metric {metric} in the run")


if __name__ == "__main__":
    main()
