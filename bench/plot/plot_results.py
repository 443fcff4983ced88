#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
# Debian's python3 with Debian's matplotlib (apt-get install python3-matplotlib);
# the first python3 on PATH may be another installation without it.
"""Turns a suite results file into PNG charts.

  plot_results.py RESULTS.jsonl [--out DIR]

Writes into DIR (default: RESULTS without .jsonl, plus -plots/):
  pingpong_speedup.png  Veneer's speedup over the library vs message size, per layout
  pack_speedup.png      MPI_Pack speedup vs packed bytes and vs contiguous block size
  coll_busbw.png        bus bandwidth vs message size: the library, the algorithm Veneer
                        picks and the fastest one measured (if collectives were measured)
  halo_time.png         halo3d time per exchange vs ranks, per method, and the speedup
Every chart is drawn from the same Veneer/library comparisons as the CSV.
"""

import argparse
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")  # no display on cluster nodes or in CI
import matplotlib.pyplot as plt  # noqa: E402  (after the backend is chosen)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "suite"))
import results  # noqa: E402  (the suite's own pairing of library and Veneer records)


def load(path):
    machine, records = {}, []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                r = json.loads(line)
                if r.get("bench") == "machine":
                    machine = r
                else:
                    records.append(r)
    return machine, records


def subtitle(machine):
    library = (machine.get("mpi_library") or machine.get("mpi_flavor") or "MPI").split(",")[0]
    return f"{machine.get('host', '?')}: {library}, Veneer {machine.get('veneer_version', '?')}"


def mark_parity(ax):
    ax.axhline(1.0, color="grey", linewidth=0.8, linestyle=":")


def size_axis(ax, label):
    ax.set_xscale("log", base=2)
    ax.set_xlabel(label)
    ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(human_bytes))


def human_bytes(value, _position=None):
    for unit, scale in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if value >= scale:
            return f"{value / scale:g}{unit}"
    return f"{value:g}"


def save(fig, out, name, written):
    path = os.path.join(out, name)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    written.append(path)


def plot_pingpong(rows, machine, out, written):
    mine = [r for r in rows if r["bench"] == "pingpong" and r["speedup"]]
    if not mine:
        return
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for case in dict.fromkeys(r["case"] for r in mine):
        points = sorted((r["bytes"], r["speedup"]) for r in mine if r["case"] == case)
        ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", markersize=3, label=case)
    size_axis(ax, "payload bytes")
    ax.set_yscale("log")
    ax.set_ylabel("speedup (library latency / Veneer latency)")
    mark_parity(ax)
    ax.legend(fontsize=8)
    ax.set_title(f"ping-pong, 2 ranks\n{subtitle(machine)}", fontsize=10)
    save(fig, out, "pingpong_speedup.png", written)


def plot_pack(rows, machine, out, written):
    mine = [r for r in rows if r["bench"] == "pack" and r["speedup"]]
    if not mine:
        return
    fig, (by_size, by_block) = plt.subplots(1, 2, figsize=(12, 4.8), sharey=True)
    by_size.scatter([r["bytes"] for r in mine], [r["speedup"] for r in mine], s=14)
    for r in mine:
        by_size.annotate(r["case"], (r["bytes"], r["speedup"]), fontsize=6, xytext=(3, 2),
                         textcoords="offset points")
    size_axis(by_size, "packed bytes")
    by_size.set_yscale("log")
    by_size.set_ylabel("speedup (Veneer GB/s / library GB/s)")
    mark_parity(by_size)
    by_size.set_title("MPI_Pack vs PMPI_Pack, per layout", fontsize=10)
    blocks = [r for r in mine if r.get("block_bytes")]
    by_block.scatter([r["block_bytes"] for r in blocks], [r["speedup"] for r in blocks], s=14, color="tab:orange")
    size_axis(by_block, "mean contiguous block (bytes)")
    mark_parity(by_block)
    by_block.set_title(subtitle(machine), fontsize=10)
    save(fig, out, "pack_speedup.png", written)


def plot_collectives(rows, machine, out, written):
    mine = [r for r in rows if r["bench"] not in ("pack", "pingpong", "halo3d") and r["bytes"]]
    busbw = [r for r in mine if "busbw" in r["metric"] or "bus_bw" in r["metric"] or "bus_gb" in r["metric"]]
    if not busbw:
        if mine:
            print("plot: collectives measured but no bus bandwidth field; coll_busbw.png not drawn")
        return
    cases = list(dict.fromkeys((r["case"], r["ranks"]) for r in busbw))
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, (case, ranks) in enumerate(cases):
        points = sorted((r["bytes"], r["library"], r["veneer"], r.get("reference")) for r in busbw
                        if r["case"] == case and r["ranks"] == ranks)
        colour = colours[i % len(colours)]
        ax.plot([p[0] for p in points], [p[1] for p in points], linestyle="--", color=colour, marker="s",
                markersize=5, fillstyle="none", label=f"{case} ({ranks} ranks), library")
        veneer = [(p[0], p[2]) for p in points if p[2] is not None]
        ax.plot([p[0] for p in veneer], [p[1] for p in veneer], linestyle="-", color=colour, marker="o",
                markersize=3, label=f"{case} ({ranks} ranks), Veneer's choice")
        fastest = [(p[0], p[3]) for p in points if p[3]]
        if fastest:
            ax.plot([p[0] for p in fastest], [p[1] for p in fastest], linestyle=":", color=colour,
                    label=f"{case} ({ranks} ranks), fastest algorithm measured")
    size_axis(ax, "message bytes")
    ax.set_yscale("log")
    ax.set_ylabel("bus bandwidth (GB/s)")
    ax.legend(fontsize=7)
    ax.set_title(f"collectives\n{subtitle(machine)}", fontsize=10)
    save(fig, out, "coll_busbw.png", written)


def plot_halo(rows, machine, records, out, written):
    mine = [r for r in rows if r["bench"] == "halo3d"]
    if not mine:
        return
    fig, (times, speedups) = plt.subplots(1, 2, figsize=(12, 4.8))
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, method in enumerate(dict.fromkeys(r["case"] for r in mine)):
        points = sorted((r["ranks"], r["library"], r["veneer"], r["speedup"]) for r in mine if r["case"] == method)
        colour = colours[i % len(colours)]
        ranks = [p[0] for p in points]
        times.plot(ranks, [p[1] for p in points], linestyle="--", marker=".", color=colour,
                   label=f"{method}, library")
        times.plot(ranks, [p[2] for p in points], linestyle="-", marker="o", markersize=4, color=colour,
                   label=f"{method}, Veneer")
        speedups.plot(ranks, [p[3] for p in points], marker="o", color=colour, label=method)
    all_ranks = sorted({r["ranks"] for r in mine})
    for ax in (times, speedups):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("ranks")
        ax.set_xticks(all_ranks)
        ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda value, _: f"{value:g}"))
        ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
    halo = next((r for r in records if r.get("bench") == "halo3d"), {})
    shape = f"{'x'.join(str(c) for c in halo.get('cells', []))} cells/rank, halo {halo.get('radius')}, " \
            f"{halo.get('quantities')} doubles/cell"
    times.set_yscale("log")
    times.set_ylabel("microseconds per exchange (slowest rank)")
    times.set_title(f"halo3d: {shape}", fontsize=10)
    times.legend(fontsize=7)
    speedups.set_ylabel("speedup (library time / Veneer time)")
    mark_parity(speedups)
    speedups.set_title(subtitle(machine), fontsize=10)
    speedups.legend(fontsize=7)
    save(fig, out, "halo_time.png", written)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", help="PREFIX.jsonl written by bench/suite/run_suite.sh")
    parser.add_argument("--out", help="folder for the PNG files")
    args = parser.parse_args()
    path = args.results if args.results.endswith(".jsonl") else args.results + ".jsonl"
    out = args.out or path[:-len(".jsonl")] + "-plots"
    os.makedirs(out, exist_ok=True)
    machine, records = load(path)
    rows = results.comparisons(records)
    written = []
    plot_pingpong(rows, machine, out, written)
    plot_pack(rows, machine, out, written)
    plot_collectives(rows, machine, out, written)
    plot_halo(rows, machine, records, out, written)
    for p in written:
        print(f"plot: {p}")
    if not written:
        print(f"plot: nothing to draw in {path}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
