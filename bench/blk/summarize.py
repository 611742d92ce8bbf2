#!/usr/bin/env python3
"""Turns bench/blk's results directory (read from the test host's disk) into JSON (stdout).

Usage: summarize.py RESULTS_DIR --log LOG --kernel VERSION --runtime S --engine E --data-mib N
                    --jobs jobs.txt [--vmms "qemu tern"] [--rounds N] [--tern NAME=PATH]...
                    [--test-host DESC] [--host-load DESC]
RESULTS_DIR/<vmm>/<round>/ (rounds 1..N) holds status ("rc=N jobs=M" or "skipped=<why>"), cpu.txt
("<job> begin|end utime stime guest_time", clock ticks of the VMM in the test host) and <job>.json
(fio's report). --tern NAME=PATH records which binary the VMM NAME was (path, size, sha256).
With N > 1 each job's figures are the medians over the rounds, with the rounds themselves and the
median/min/max of the main figures next to them; vs_qemu has each VMM's per-round IOPS ratio to
QEMU's in the same round (median/min/max over the rounds).
"""
import argparse
import hashlib
import json
import os
import re
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from console_fields import stats  # noqa: E402
from results import add_common_args, stamp  # noqa: E402

CLK_TCK = 100  # USER_HZ on x86 Linux: the unit of /proc/PID/stat times
SPREAD_KEYS = ["iops", "lat_mean_us", "lat_p99_us"]


def job_list(path):
    jobs = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith("#"):
                name, _, opts = line.partition(" ")
                jobs.append((name, " ".join(opts.split())))
    return jobs


def side(d):
    """The read or write half of a fio job report, in µs."""
    lat = d.get("lat_ns", {})
    pct = lat.get("percentile", {})
    p99 = next((v for k, v in pct.items() if k.startswith("99.000")), None)
    return {"iops": round(d["iops"], 1), "ios": d["total_ios"], "bw_kib_s": d["bw"],
            "lat_mean_us": round(lat.get("mean", 0) / 1000, 1),
            "lat_p99_us": None if p99 is None else round(p99 / 1000, 1)}


def read_cpu(path):
    """{job: {"begin": (utime, stime, guest), "end": (...)}} in ticks."""
    cpu = {}
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                parts = line.split()
                if len(parts) == 5 and parts[1] in ("begin", "end"):
                    cpu.setdefault(parts[0], {})[parts[1]] = tuple(int(x) for x in parts[2:])
    return cpu


def job_result(path, cpu):
    with open(path) as f:
        report = json.load(f)
    j = report["jobs"][0]
    r, w = side(j["read"]), side(j["write"])
    ios = r["ios"] + w["ios"]
    res = {"iops": round(r["iops"] + w["iops"], 1), "read": r if r["ios"] else None,
           "write": w if w["ios"] else None,
           "lat_mean_us": round((r["lat_mean_us"] * r["ios"] + w["lat_mean_us"] * w["ios"]) / ios, 1) if ios else None,
           "lat_p99_us": max(x for x in (r["lat_p99_us"] if r["ios"] else None, w["lat_p99_us"] if w["ios"] else None, -1) if x is not None),
           "guest_cpu_usr_pct": round(j["usr_cpu"], 1), "guest_cpu_sys_pct": round(j["sys_cpu"], 1),
           "runtime_ms": j["job_runtime"] if "job_runtime" in j else j.get("elapsed", 0) * 1000,
           "fio_error": j.get("error", 0)}
    if res["lat_p99_us"] == -1:
        res["lat_p99_us"] = None
    if cpu and "begin" in cpu and "end" in cpu and ios:
        (u0, s0, g0), (u1, s1, g1) = cpu["begin"], cpu["end"]
        total_s = (u1 - u0 + s1 - s0) / CLK_TCK
        guest_s = (g1 - g0) / CLK_TCK
        res["vmm_cpu"] = {"total_s": total_s, "guest_mode_s": guest_s,
                          "us_per_io": round(total_s * 1e6 / ios, 1),
                          "us_per_io_outside_guest": round(max(total_s - guest_s, 0) * 1e6 / ios, 1)}
    else:
        res["vmm_cpu"] = None
    return res


def median_of(values):
    """Field by field median of job results of one shape (dicts recursively; numbers to 1 decimal,
    whole when all inputs are ints and it is whole; None when every value is None)."""
    present = [v for v in values if v is not None]
    if not present:
        return None
    if isinstance(present[0], dict):
        return {k: median_of([v.get(k) for v in present]) for k in present[0]}
    if isinstance(present[0], (int, float)) and not isinstance(present[0], bool):
        m = round(statistics.median(present), 1)
        return int(m) if all(isinstance(v, int) for v in present) and m == int(m) else m
    return present[0]


def read_round(d, jobs):
    """status, {job: result}, errors of one VMM's run (results/<vmm>/<round>/)."""
    sp = os.path.join(d, "status")
    status = open(sp).read().strip() if os.path.exists(sp) else "not run"
    cpu = read_cpu(os.path.join(d, "cpu.txt"))
    results, errors = {}, []
    for name, _ in jobs:
        p = os.path.join(d, name + ".json")
        if os.path.exists(p):
            try:
                results[name] = job_result(p, cpu.get(name))
            except (ValueError, KeyError, IndexError) as e:
                errors.append(f"{name}: unreadable fio report ({e})")
    return status, results, errors


def binary_info(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return {"path": os.path.abspath(path), "bytes": os.path.getsize(path), "sha256": h.hexdigest()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("results")
    ap.add_argument("--log", required=True)
    ap.add_argument("--runtime", type=int, required=True)
    ap.add_argument("--engine", required=True)
    ap.add_argument("--data-mib", type=int, required=True)
    ap.add_argument("--jobs", required=True)
    ap.add_argument("--vmms", default="qemu tern")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--tern", action="append", default=[], metavar="NAME=PATH")
    add_common_args(ap)
    args = ap.parse_args()
    vmms = args.vmms.split()
    binaries = dict(t.split("=", 1) for t in args.tern)

    jobs = job_list(args.jobs)
    commands, errors = {}, {v: [] for v in vmms}
    with open(args.log, errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            m = re.match(r"BLK-CMD vmm=(\S+) cmd=(.*)", line)
            if m:
                commands[m.group(1)] = m.group(2)
            m = re.match(r"BLK-(ERROR|WARN|FIO-ERROR) vmm=(\S+) (.*)", line)
            if m and m.group(2) in errors:
                errors[m.group(2)].append(m.group(3))

    out_vmms, curves, per_round = {}, {}, {}
    for v in vmms:
        rounds = [read_round(os.path.join(args.results, v, str(i)), jobs) for i in range(1, args.rounds + 1)]
        statuses = [s for s, _, _ in rounds]
        status = statuses[0] if len(set(statuses)) == 1 else "; ".join(
            f"round {i}: {s}" for i, s in enumerate(statuses, 1))
        entry = {"command": commands.get(v), "status": status,
                 "errors": (errors[v] + [e for _, _, es in rounds for e in es])[:10], "jobs": {}}
        if v in binaries:
            entry["binary"] = binary_info(binaries[v])
        if statuses[0].startswith("skipped="):
            entry["skipped"] = statuses[0][len("skipped="):]
        per_round[v] = [res for _, res, _ in rounds]
        for name, _ in jobs:
            got = [res.get(name) for res in per_round[v]]
            if not any(got):
                continue
            if args.rounds == 1:
                entry["jobs"][name] = got[0]
                continue
            j = median_of(got)
            j["spread"] = {k: stats([g[k] if g else None for g in got]) for k in SPREAD_KEYS}
            j["spread"]["us_per_io_outside_guest"] = stats(
                [(g.get("vmm_cpu") or {}).get("us_per_io_outside_guest") if g else None for g in got])
            j["rounds"] = got
            entry["jobs"][name] = j
        for name, r in entry["jobs"].items():
            m = re.match(r"(randread|randwrite)-qd(\d+)$", name)
            if m:
                curves.setdefault(v, {}).setdefault(m.group(1), {})[m.group(2)] = r["iops"]
        out_vmms[v] = entry

    # Each VMM's IOPS over QEMU's in the same round: interleaving makes these the least noisy figures.
    vs_qemu = {}
    for v in vmms:
        if v == "qemu" or "qemu" not in per_round:
            continue
        for name, _ in jobs:
            ratios = [mine[name]["iops"] / q[name]["iops"] for mine, q in zip(per_round[v], per_round["qemu"])
                      if name in mine and name in q and q[name]["iops"]]
            if ratios:
                vs_qemu.setdefault(v, {})[name] = {"iops_ratio": stats([round(x, 3) for x in ratios], digits=3)}

    result = stamp("blk", args.kernel)
    result.update({
        "guest": {"memory_mib": 1024, "vcpus": 1, "disk": f"/dev/vda: {args.data_mib} MiB raw file of random "
                  "bytes on ext4 in the test host", "fio_engine": args.engine, "runtime_s": args.runtime},
        "method": {
            "fio": "--filename=/dev/vda --direct=1 --time_based --norandommap --randrepeat=0 --lat_percentiles=1, "
                   "no ramp time, one job per point",
            "latency": "fio lat_ns (submission to completion) mean and 99th percentile, in µs",
            "vmm_cpu": "utime+stime of the VMM process in the test host (/proc/PID/stat) from the guest's "
                       "BLK-JOB-BEGIN to its BLK-JOB-END line, divided by the job's I/Os; it includes the "
                       "guest's own execution (guest mode counts as the vCPU thread's user time); "
                       "us_per_io_outside_guest subtracts guest_time (field 43)",
            "jobs": {name: opts for name, opts in jobs},
        },
        "test_host": args.test_host,
        "host_load": args.host_load,
        "vmms": out_vmms,
        "iops_vs_queue_depth": curves,
        "rounds": args.rounds,
        "order": "each round boots every VMM once, in this order: " + ", ".join(vmms),
        "vs_qemu": vs_qemu,
    })
    print(json.dumps(result, indent=2, ensure_ascii=False))


if __name__ == "__main__":
    main()
