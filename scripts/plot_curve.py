#!/usr/bin/python3
"""Draws the load curve of scripts/bench.sh (BENCH_RUNS=curve) from its CSV.

Usage: /usr/bin/python3 scripts/plot_curve.py CURVE.csv OUT.png [--title TEXT]

Two panels against the offered load (one position per point, in the CSV's
order; "sat" is the closed loop): system CPU per payment, per process and
their sum, with the CPU floor per payment of the parts alone at that rate
(bench/floor.h; none at "sat"); and p99 latencies, create and create->SENT.
Each build in the CSV (and each broker, with CURVE_BROKERS) has its own line style; a point run more than once is
drawn at its median.
Needs Debian's python3-matplotlib.
"""
import argparse
import csv
import math
import statistics

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after the backend is chosen)
from matplotlib.ticker import FuncFormatter  # noqa: E402

PROCESSES = [  # column, label, colour
    ("cpu_us_payment", "payment_service", "tab:blue"),
    ("cpu_us_accounting", "accounting_service", "tab:green"),
    ("cpu_us_broker", "RabbitMQ", "tab:orange"),
    ("cpu_us_system", "sum", "black"),
    ("floor_us_payment", "floor (parts alone)", "tab:gray"),
]
LATENCIES = [
    ("create_p99_ms", "create p99", "tab:purple"),
    ("to_sent_p99_ms", "create->SENT p99", "tab:red"),
]
STYLES = ["-", "--", ":", "-."]


def read(path):
    """Rows by build, then by point, in the CSV's order."""
    builds, points = {}, []
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            if row["point"] not in points:
                points.append(row["point"])
            name = row["build"]
            if row.get("broker"):  # CURVE_BROKERS: a line per build and broker
                name = f"{name} on RabbitMQ {row['broker']}"
            builds.setdefault(name, {}).setdefault(row["point"], []).append(row)
    return builds, points


def median(rows, column):
    values = [float(r[column]) for r in rows if r.get(column)]
    return statistics.median(values) if values else float("nan")


def tick(point, builds):
    """The offered load; under "sat", what each build achieved."""
    if point != "sat":
        return f"{point}/s"
    rows = next(b[point] for b in builds.values() if point in b)
    achieved = [f"{median(b[point], 'achieved_per_s'):.0f}/s" + (f" {name}" if len(builds) > 1 else "")
                for name, b in builds.items() if point in b]
    return f"sat ({rows[0]['concurrency']} in flight)\n" + "\n".join(achieved)


def plain(value, _):
    return f"{value:g}"


def plain_minor(value, _):
    """Minor ticks of a log axis: only 2x and 5x a power of ten."""
    leading = f"{value:.0e}"[0]
    return f"{value:g}" if leading in "25" else ""


def panel(ax, builds, points, series, ylabel):
    x = range(len(points))
    for style, (build, by_point) in zip(STYLES * 4, builds.items()):
        for column, label, colour in series:
            y = [median(by_point.get(p, []), column) for p in points]
            if all(math.isnan(v) for v in y):
                continue  # not measured (e.g. a CSV from before the floor)
            name = label if len(builds) == 1 else f"{label} ({build})"
            ax.plot(x, y, linestyle=style, marker="o", color=colour, label=name,
                    linewidth=2.5 if column == "cpu_us_system" else 1.5)
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(FuncFormatter(plain))
    ax.yaxis.set_minor_formatter(FuncFormatter(plain_minor))
    ax.set_ylabel(ylabel)
    ax.set_xticks(list(x))
    ax.set_xticklabels([tick(p, builds) for p in points])
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize="small")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("csv")
    parser.add_argument("png")
    parser.add_argument("--title", default="outbox load curve")
    args = parser.parse_args()
    builds, points = read(args.csv)
    if not points:
        raise SystemExit(f"plot_curve: no rows in {args.csv}")
    fig, (cpu, latency) = plt.subplots(2, 1, figsize=(10, 9), sharex=True)
    panel(cpu, builds, points, PROCESSES, "CPU per payment (µs, whole run)")
    cpu.set_title("system CPU per payment")
    panel(latency, builds, points, LATENCIES, "latency (ms)")
    latency.set_title("p99 latency")
    latency.set_xlabel("offered load (payments/s)")
    fig.suptitle(args.title)
    fig.tight_layout()
    fig.savefig(args.png, dpi=110)


if __name__ == "__main__":
    main()
