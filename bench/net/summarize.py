#!/usr/bin/env python3
"""Turns bench/net's results directory (read from the test host's disk) into JSON (stdout).

Usage: summarize.py RESULTS_DIR --log LOG --kernel VERSION --time S --pings N --configs "qemu ..."
                    [--rounds N] [--git-rev REV] [--tern NAME=PATH]... [--test-host DESC] [--host-load DESC]
RESULTS_DIR/<config>/<round>/ (rounds 1..N) holds status ("rc=N tests=M" or "skipped=<why>"),
samples.txt (KEY=VALUE counter lines around each test, see scenario.sh), <test>.json (iperf3 -J),
ping.txt (busybox ping) and console.txt. --tern NAME=PATH records which binary NAME was.
Each test's figures are per round; "stats" has the median/min/max over the rounds of each figure;
vs_qemu compares each tern configuration with QEMU in the same vhost mode, round by round.
"""
import argparse
import hashlib
import json
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from console_fields import fields, stats  # noqa: E402
from results import add_common_args, stamp  # noqa: E402
from stamps import read_marks  # noqa: E402

CLK_TCK = 100  # USER_HZ on x86 Linux: the unit of /proc/PID/stat times
TESTS = {
    "tcp-g2h-1": "TCP guest→L1, 1 stream", "tcp-g2h-4": "TCP guest→L1, 4 streams",
    "tcp-h2g-1": "TCP L1→guest, 1 stream", "tcp-h2g-4": "TCP L1→guest, 4 streams",
    "udp64-g2h": "UDP 64 B guest→L1", "udp64-h2g": "UDP 64 B L1→guest",
    "tcp-g2h-20m": "TCP guest→L1 at 20 Mbit/s", "tcp-h2g-20m": "TCP L1→guest at 20 Mbit/s",
    "udp64-g2h-1k": "UDP 64 B guest→L1 at 1000/s", "udp64-h2g-1k": "UDP 64 B L1→guest at 1000/s",
    "ping": "ping -i 0.01 L1→guest",
}
PING_TIME = re.compile(r"time=([0-9.]+) ms")


def percentile(sorted_values, p):
    """The p-th percentile (nearest rank) of a sorted list."""
    k = max(0, min(len(sorted_values) - 1, int(round(p / 100 * len(sorted_values) + 0.5)) - 1))
    return sorted_values[k]


def read_samples(path):
    """{test: {"begin": {...}, "end": {...}, "rc": N}}, plus the "info" line (vhost_threads_named)."""
    out, info = {}, {}
    if not os.path.exists(path):
        return out, info
    with open(path) as f:
        for line in f:
            kv = fields(line)
            if "test" not in kv:
                info.update(kv)
                continue
            t = out.setdefault(kv["test"], {})
            if "at" in kv:
                t[kv["at"]] = {k: float(v) for k, v in kv.items() if k not in ("test", "at")}
            elif "rc" in kv:
                t["rc"] = int(kv["rc"])
    return out, info


def cpu_figures(test, s):
    """Host CPU and tap counters over one test's window (from its begin/end samples)."""
    b, e = s["begin"], s["end"]
    d = {k: e[k] - b[k] for k in b if k in e}
    vmm_s = (d["utime"] + d["stime"]) / CLK_TCK
    vhost_s = d["vhost"] / CLK_TCK
    host_s = vmm_s + vhost_s
    guest_s = d["guest"] / CLK_TCK
    g2h = "g2h" in test
    data_bytes = d["tap_rx_bytes"] if g2h else d["tap_tx_bytes"]  # tap rx = from the guest
    packets = d["tap_rx_packets"] + d["tap_tx_packets"]
    r = {"window_s": round(d["uptime"], 2), "host_cpu_s": round(host_s, 2), "vmm_cpu_s": round(vmm_s, 2),
         "vhost_cpu_s": round(vhost_s, 2), "guest_mode_s": round(guest_s, 2),
         "outside_guest_s": round(max(host_s - guest_s, 0), 2),
         "host_cpu_pct": round(100 * host_s / d["uptime"], 1) if d["uptime"] else None,
         "l1_busy_pct": round(100 * d["l1_busy"] / d["l1_total"], 1) if d["l1_total"] else None,
         "tap_packets": int(packets), "tap_data_bytes": int(data_bytes),
         "tap_dropped": int(d["tap_rx_dropped"] + d["tap_tx_dropped"]),
         "vhost_threads": int(e["vhost_threads"])}
    if test != "ping":
        gb = data_bytes / 1e9
        r["cpu_s_per_gb"] = round(host_s / gb, 2) if gb else None
        r["cpu_s_per_gb_outside_guest"] = round(r["outside_guest_s"] / gb, 2) if gb else None
    r["cpu_us_per_packet"] = round(host_s * 1e6 / packets, 2) if packets else None
    r["cpu_us_per_packet_outside_guest"] = round(r["outside_guest_s"] * 1e6 / packets, 2) if packets else None
    return r


def iperf_figures(path):
    with open(path) as f:
        rep = json.load(f)
    if rep.get("error"):
        raise ValueError(rep["error"])
    end = rep["end"]
    rcv, snt = end["sum_received"], end["sum_sent"]
    if "udp" in rep["start"]["test_start"].get("protocol", "").lower():
        got = rcv["packets"] - rcv["lost_packets"]
        return {"pps": round(got / rcv["seconds"]), "sent_pps": round(snt["packets"] / snt["seconds"]),
                "loss_pct": round(rcv["lost_percent"], 2), "mbit_s": round(rcv["bits_per_second"] / 1e6, 1)}
    return {"mbit_s": round(rcv["bits_per_second"] / 1e6, 1), "bytes": rcv["bytes"],
            "retransmits": snt.get("retransmits")}


def ping_figures(path, pings):
    with open(path, errors="replace") as f:
        times = sorted(float(m.group(1)) * 1000 for m in PING_TIME.finditer(f.read()))
    if not times:
        raise ValueError("no ping replies")
    return {"p50_us": round(percentile(times, 50)), "p99_us": round(percentile(times, 99)),
            "mean_us": round(sum(times) / len(times)), "replies": len(times),
            "loss_pct": round(100 * (pings - len(times)) / pings, 2)}


def read_stamps(path):
    """{(cfg, round, test): {"l1_host_cpu_s", "host_wall_s", "l1_host_share"}} from stamp_cpu.py's file."""
    return read_marks(path, "NET-MARK", ("cfg", "round", "test"))


def load_corrected(r, st):
    """Adds the test host's share of a host core and the figures scaled by it: throughput as if L1 had
    had a whole core (figure / share), host CPU as what the host really spent (L1's accounting charges
    the task that was current for time L1 lost to the host's other load: L1 CPU × share)."""
    if not st or not st["l1_host_share"]:
        return
    share = min(st["l1_host_share"], 1.0)
    r.update(st)
    for k in ("mbit_s", "pps"):
        if r.get(k) is not None:
            r[k + "_per_core"] = round(r[k] / share, 1)
    for k in ("cpu_s_per_gb", "cpu_us_per_packet", "cpu_us_per_round_trip"):
        if r.get(k) is not None:
            r[k + "_host"] = round(r[k] * share, 2)


def read_round(d, pings, stamps=None, key=None):
    """status, {test: figures}, errors, info of one configuration's boot (results/<cfg>/<round>/)."""
    sp = os.path.join(d, "status")
    status = open(sp).read().strip() if os.path.exists(sp) else "not run"
    samples, info = read_samples(os.path.join(d, "samples.txt"))
    results, errors = {}, []
    for t in TESTS:
        s = samples.get(t)
        if not s or "begin" not in s or "end" not in s:
            continue
        try:
            r = ping_figures(os.path.join(d, "ping.txt"), pings) if t == "ping" else \
                iperf_figures(os.path.join(d, t + ".json"))
            if t == "ping":
                r["cpu_us_per_round_trip"] = None
            r.update(cpu_figures(t, s))
            if t == "ping":
                r["cpu_us_per_round_trip"] = round(r["host_cpu_s"] * 1e6 / r["replies"], 1)
            load_corrected(r, (stamps or {}).get((*key, t)) if key else None)
            results[t] = r
        except (OSError, ValueError, KeyError, IndexError, ZeroDivisionError) as e:
            errors.append(f"{t}: {type(e).__name__}: {e}")
    ready = None
    cp = os.path.join(d, "console.txt")
    if os.path.exists(cp):
        with open(cp, errors="replace") as f:
            ready = next((fields(line) for line in f if line.startswith("NET-GUEST-READY")), None)
    return status, results, errors, {**info, **({"guest": ready} if ready else {})}


def binary_info(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return {"path": os.path.abspath(path), "bytes": os.path.getsize(path), "sha256": h.hexdigest()}


def split_cfg(cfg):
    """(vmm, vhost) of a configuration name: qemu, qemu-vhost, NAME, NAME-vhost."""
    return (cfg[:-len("-vhost")], True) if cfg.endswith("-vhost") else (cfg, False)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("results")
    ap.add_argument("--log", required=True)
    ap.add_argument("--time", type=int, required=True)
    ap.add_argument("--pings", type=int, required=True)
    ap.add_argument("--configs", required=True)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--git-rev", default="unknown")
    ap.add_argument("--stamps", help="stamp_cpu.py's NET-MARK lines (L1's host CPU time per test)")
    ap.add_argument("--tern", action="append", default=[], metavar="NAME=PATH")
    add_common_args(ap)
    args = ap.parse_args()
    configs = args.configs.split()
    binaries = dict(t.split("=", 1) for t in args.tern)
    stamps = read_stamps(args.stamps)

    commands, errors, l1 = {}, {c: [] for c in configs}, {}
    with open(args.log, errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            m = re.match(r"NET-CMD cfg=(\S+) cmd=(.*)", line)
            if m:
                commands[m.group(1)] = m.group(2)
            m = re.match(r"NET-(ERROR|WARN) cfg=(\S+) (.*)", line)
            if m and m.group(2) in errors:
                errors[m.group(2)].append(m.group(3))
            if line.startswith("NET-INFO"):
                l1 = fields(line)

    out, per_round = {}, {}
    for c in configs:
        vmm, vhost = split_cfg(c)
        rounds = [read_round(os.path.join(args.results, c, str(i)), args.pings, stamps, (c, str(i)))
                  for i in range(1, args.rounds + 1)]
        statuses = [s for s, _, _, _ in rounds]
        status = statuses[0] if len(set(statuses)) == 1 else "; ".join(
            f"round {i}: {s}" for i, s in enumerate(statuses, 1))
        entry = {"vmm": vmm, "vhost": vhost, "command": commands.get(c), "status": status,
                 "errors": (errors[c] + [f"round {i}: {e}" for i, (_, _, es, _) in enumerate(rounds, 1) for e in es])[:12],
                 "boots": [info for _, _, _, info in rounds], "tests": {}}
        if vmm in binaries:
            entry["binary"] = binary_info(binaries[vmm])
        if statuses[0].startswith("skipped="):
            entry["skipped"] = statuses[0][len("skipped="):]
        per_round[c] = [res for _, res, _, _ in rounds]
        if vhost and any(res and all(x["vhost_threads"] == 0 for x in res.values()) for res in per_round[c]):
            entry["errors"].append("no kernel thread vhost-N during the tests: vhost-net was not in use")
        for t in TESTS:
            got = [res.get(t) for res in per_round[c]]
            if not any(got):
                continue
            keys = [k for k in next(g for g in got if g)]
            entry["tests"][t] = {"stats": {k: stats([g.get(k) if g else None for g in got], digits=2) for k in keys},
                                 "rounds": got}
        out[c] = entry

    # Each tern configuration against QEMU in the same vhost mode and round (interleaving makes these
    # the least noisy figures): throughput (or pps, or p50) ratio and host CPU per GB (per packet) ratio.
    vs_qemu = {}
    for c in configs:
        vmm, vhost = split_cfg(c)
        q = "qemu-vhost" if vhost else "qemu"
        if vmm == "qemu" or q not in per_round:
            continue
        for t in TESTS:
            for key in ("mbit_s", "pps", "p50_us", "p99_us", "cpu_s_per_gb", "cpu_us_per_packet",
                        "cpu_s_per_gb_outside_guest", "cpu_us_per_packet_outside_guest", "mbit_s_per_core",
                        "pps_per_core", "cpu_s_per_gb_host", "cpu_us_per_packet_host"):
                ratios = [mine[t][key] / theirs[t][key] for mine, theirs in zip(per_round[c], per_round[q])
                          if t in mine and t in theirs and mine[t].get(key) is not None and theirs[t].get(key)]
                if ratios:
                    vs_qemu.setdefault(c, {}).setdefault(t, {})[key] = stats([round(x, 3) for x in ratios], digits=3)

    result = stamp("net", args.kernel)
    result.update({
        "git_rev": args.git_rev,
        "guest": {"memory_mib": 512, "vcpus": 1, "address": "169.254.1.2/16 on eth0 (L1: 169.254.1.1/16 on tap0)",
                  "mac": "52:54:00:12:34:56", "queues": 1},
        "l1": l1,
        "method": {
            "iperf3": f"iperf3 3.x client in L1, server in the guest, -t {args.time} -J; g2h tests use -R (the "
                      "guest sends); UDP is -u -l 64 -b 0 (as fast as the sender goes); the paced tests add -b 20M (TCP) "
                      "or -u -l 64 -b 512K (1000 packets/s), a load every configuration reaches; throughput and pps are "
                      "the receiver's (pps = packets - lost over its seconds)",
            "ping": f"busybox ping -c {args.pings} -i 0.01 from L1 to the guest; p50/p99 of the per-reply time= "
                    "(nearest rank)",
            "host_cpu": "utime+stime of the VMM process in L1 (/proc/PID/stat, all threads) plus utime+stime "
                        "of every kernel thread named vhost-N (Linux 6.1's vhost-net workers; one VMM runs at a "
                        "time), from just before to just after each test (iperf3's start and end included). It "
                        "includes the guest's own execution (guest mode counts as the vCPU thread's time); "
                        "*_outside_guest subtracts the VMM's guest_time (field 43)",
            "per_gb": "host CPU seconds over the tap's bytes in the data direction (tap rx = from the guest, "
                      "tx = to the guest; frames with their headers) over the same window, per 10^9 bytes",
            "per_packet": "host CPU µs over all packets the tap counted both ways in the window (with TSO/GSO "
                          "a TCP 'packet' is a segment of up to 64 KiB; ACKs count)",
            "load_corrected": "NET-MARK lines around each test are stamped on the host with the CPU time of "
                              "L1's QEMU: l1_host_share = that over the host wall time (the share of a host core "
                              "L1 had). *_per_core = figure / share (as if L1 had had a whole core); *_host = "
                              "CPU figure × share (L1 charges time it lost to the host's load to its current "
                              "task). Assumes the loss is spread evenly; an estimate, not a measurement",
            "order": "each round boots every configuration once, in this order: " + ", ".join(configs),
        },
        "tests": TESTS,
        "test_host": args.test_host,
        "host_load": args.host_load,
        "rounds": args.rounds,
        "configs": out,
        "vs_qemu": vs_qemu,
    })
    print(json.dumps(result, indent=2, ensure_ascii=False))


if __name__ == "__main__":
    main()
