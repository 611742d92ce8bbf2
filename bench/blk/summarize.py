#!/usr/bin/env python3
"""Turns bench/blk's results directory (read from the test host's disk) into JSON (stdout).

Usage: summarize.py RESULTS_DIR --log LOG --kernel VERSION --runtime S --engine E --data-mib N
                    --jobs jobs.txt [--test-host DESC] [--host-load DESC]
RESULTS_DIR/<vmm>/ holds status ("rc=N jobs=M" or "skipped=<why>"), cpu.txt ("<job> begin|end utime
stime guest_time", clock ticks of the VMM in the test host) and <job>.json (fio's report).
"""
import argparse
import datetime
import json
import os
import re

VMMS = ["qemu", "tern"]
CLK_TCK = 100  # USER_HZ on x86 Linux: the unit of /proc/PID/stat times


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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("results")
    ap.add_argument("--log", required=True)
    ap.add_argument("--kernel", required=True)
    ap.add_argument("--runtime", type=int, required=True)
    ap.add_argument("--engine", required=True)
    ap.add_argument("--data-mib", type=int, required=True)
    ap.add_argument("--jobs", required=True)
    ap.add_argument("--test-host", default="")
    ap.add_argument("--host-load", default="")
    args = ap.parse_args()

    jobs = job_list(args.jobs)
    commands, errors = {}, {v: [] for v in VMMS}
    with open(args.log, errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            m = re.match(r"BLK-CMD vmm=(\S+) cmd=(.*)", line)
            if m:
                commands[m.group(1)] = m.group(2)
            m = re.match(r"BLK-(ERROR|WARN|FIO-ERROR) vmm=(\S+) (.*)", line)
            if m and m.group(2) in errors:
                errors[m.group(2)].append(m.group(3))

    out_vmms, curves = {}, {}
    for v in VMMS:
        d = os.path.join(args.results, v)
        status = open(os.path.join(d, "status")).read().strip() if os.path.exists(os.path.join(d, "status")) else "not run"
        entry = {"command": commands.get(v), "status": status, "errors": errors[v][:10], "jobs": {}}
        if status.startswith("skipped="):
            entry["skipped"] = status[len("skipped="):]
        cpu = read_cpu(os.path.join(d, "cpu.txt"))
        for name, opts in jobs:
            p = os.path.join(d, name + ".json")
            if os.path.exists(p):
                try:
                    entry["jobs"][name] = job_result(p, cpu.get(name))
                except (ValueError, KeyError, IndexError) as e:
                    entry["errors"].append(f"{name}: unreadable fio report ({e})")
        for name, r in entry["jobs"].items():
            m = re.match(r"(randread|randwrite)-qd(\d+)$", name)
            if m:
                curves.setdefault(v, {}).setdefault(m.group(1), {})[m.group(2)] = r["iops"]
        out_vmms[v] = entry

    result = {
        "benchmark": "blk",
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "kernel": args.kernel,
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
    }
    print(json.dumps(result, indent=2, ensure_ascii=False))


if __name__ == "__main__":
    main()
