#!/usr/bin/env python3
"""Prints Markdown tables (for docs) from bench/net's net.json: throughput / packet rate / latency per
test and configuration, host CPU per GB / per packet, tern against QEMU in the same vhost mode, and
one detail table per configuration. With several rounds a cell is the median (min-max).

Usage: table.py NET.json
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from markdown import footer, spread, table  # noqa: E402
from results import json_path, load  # noqa: E402


def main_figure(t):
    """(key, unit, format) of a test's headline figure."""
    if t.startswith("tcp"):
        return "mbit_s", "Mbit/s", "{:.0f}"
    if t.startswith("udp"):
        return "pps", "packets/s", "{:.0f}"
    return "p50_us", "µs", "{:.0f}"


def cpu_figure(t, outside=False):
    """(key, unit, format) of a test's host-CPU cost figure."""
    suffix = "_outside_guest" if outside else ""
    if t.startswith("tcp"):
        return "cpu_s_per_gb" + suffix, "CPU s/GB", "{:.1f}"
    if t.startswith("udp"):
        return "cpu_us_per_packet" + suffix, "CPU µs/packet", "{:.1f}"
    return ("cpu_us_per_packet" + suffix, "CPU µs/packet", "{:.1f}") if outside else \
        ("cpu_us_per_round_trip", "CPU µs/round trip", "{:.0f}")


def cell(cfg, t, key, fmt, collapse):
    s = cfg["tests"].get(t, {}).get("stats", {}).get(key)
    return spread(s, fmt, collapse=collapse)


def main():
    path = json_path(__file__, None)
    r = load(path)
    rounds = r.get("rounds", 1)
    collapse = rounds == 1
    cfgs = {n: c for n, c in r["configs"].items() if not c.get("skipped")}
    names = list(cfgs)
    print(f"iperf3 and ping between the test host (L1) and the guest over virtio-net on tap0 (kernel "
          f"{r['kernel']}, guest {r['guest']['memory_mib']} MiB, {r['guest']['vcpus']} vCPU, "
          f"{r['guest']['queues']} queue pair); build {r.get('git_rev', 'unknown')}."
          + (f" {rounds} rounds ({r['method']['order']}); median (min-max) over the rounds." if rounds > 1 else "")
          + "\n")
    for n, c in r["configs"].items():
        if c.get("skipped"):
            print(f"**{n}**: skipped: {c['skipped']}.\n")

    print("Throughput (TCP: receiver's Mbit/s; UDP: packets/s received) and ping round trip:\n")
    rows = []
    for t, label in r["tests"].items():
        key, unit, fmt = main_figure(t)
        rows.append([label, unit] + [cell(cfgs[n], t, key, fmt, collapse) for n in names])
        if t == "ping":
            rows.append([label + " p99", "µs"] + [cell(cfgs[n], t, "p99_us", "{:.0f}", collapse) for n in names])
        if t.startswith("udp"):
            rows.append([label + " loss", "%"] + [cell(cfgs[n], t, "loss_pct", "{:.1f}", collapse) for n in names])
    print("\n".join(table(["test", "unit"] + names, "ll" + "r" * len(names), rows)) + "\n")

    for outside in (False, True):
        print(("Host CPU outside guest mode (VMM threads minus guest_time, plus vhost workers)" if outside else
               "Host CPU (the VMM process, all threads, plus its vhost-net workers; includes guest mode)")
              + " per GB moved (TCP), per packet at the tap (UDP, ping"
              + (")" if outside else "; and per round trip)") + ":\n")
        rows = []
        for t, label in r["tests"].items():
            key, unit, fmt = cpu_figure(t, outside)
            rows.append([label, unit] + [cell(cfgs[n], t, key, fmt, collapse) for n in names])
        print("\n".join(table(["test", "unit"] + names, "ll" + "r" * len(names), rows)) + "\n")

    if any("l1_host_share" in (t.get("stats") or {}) for c in cfgs.values() for t in c["tests"].values()):
        print("Load-corrected (estimates): the share of a host core the test host had during the test, the "
              "throughput scaled to a whole core (÷ share) and the host CPU cost scaled by the share:\n")
        rows = []
        for t, label in r["tests"].items():
            key, unit, fmt = main_figure(t)
            ckey, cunit, cfmt = cpu_figure(t)
            row = [label]
            for n in names:
                row += [cell(cfgs[n], t, "l1_host_share", "{:.2f}", collapse),
                        "" if t == "ping" else cell(cfgs[n], t, key + "_per_core", fmt, collapse) + " " + unit,
                        cell(cfgs[n], t, ckey + "_host", cfmt, collapse) + " " + cunit.replace("CPU ", "")]
            rows.append(row)
        hdr = ["test"] + [h for n in names for h in (f"{n} share", f"{n} per core", f"{n} host CPU")]
        print("\n".join(table(hdr, "l" + "r" * (len(hdr) - 1), rows)) + "\n")

    vs = r.get("vs_qemu") or {}
    if vs:
        print("Against QEMU in the same vhost mode and round (ratio; > 1 is more throughput, or more CPU):\n")
        rows = []
        for t, label in r["tests"].items():
            key, _, _ = main_figure(t)
            ckey, _, _ = cpu_figure(t)
            ckey = "cpu_us_per_packet" if t == "ping" else ckey
            okey, _, _ = cpu_figure(t, True)
            row = [label]
            for o in vs:
                v = vs[o].get(t, {})
                row += [spread(v.get(key), "{:.2f}", collapse=collapse), spread(v.get(ckey), "{:.2f}", collapse=collapse),
                        spread(v.get(okey), "{:.2f}", collapse=collapse)]
            rows.append(row)
        hdr = ["test"]
        for o in vs:
            q = "qemu-vhost" if r["configs"][o]["vhost"] else "qemu"
            hdr += [f"{o}/{q} throughput (ping: p50)", f"{o}/{q} CPU", f"{o}/{q} CPU outside guest"]
        print("\n".join(table(hdr, "l" + "r" * (len(hdr) - 1), rows)) + "\n")

    for n, c in cfgs.items():
        b = c.get("binary")
        print(f"**{n}** (`{c['command']}`), status {c['status']}"
              + (f"; binary sha256 {b['sha256'][:16]}" if b else "") + ":\n")
        rows = []
        for t, label in r["tests"].items():
            if t not in c["tests"]:
                continue
            key, unit, fmt = main_figure(t)
            rows.append([label, cell(c, t, key, fmt, collapse) + " " + unit,
                         cell(c, t, "host_cpu_pct", "{:.0f}", collapse), cell(c, t, "vmm_cpu_s", "{:.2f}", collapse),
                         cell(c, t, "vhost_cpu_s", "{:.2f}", collapse), cell(c, t, "guest_mode_s", "{:.2f}", collapse),
                         cell(c, t, "l1_busy_pct", "{:.0f}", collapse), cell(c, t, "tap_packets", "{:.0f}", collapse),
                         cell(c, t, "tap_dropped", "{:.0f}", collapse)])
        print("\n".join(table(["test", "result", "host CPU %", "VMM CPU s", "vhost CPU s", "of VMM: guest mode s",
                               "L1 busy %", "tap packets", "tap drops"], "lrrrrrrrr", rows)))
        for e in c.get("errors") or []:
            print(f"\n- error: {e}")
        print()
    print(footer(r, path, f"Build {r.get('git_rev', 'unknown')}. "))


if __name__ == "__main__":
    main()
