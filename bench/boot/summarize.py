#!/usr/bin/env python3
"""Turns the console log of a bench/boot test-host run into JSON (stdout).

Usage: summarize.py LOG --kernel VERSION --runs N [--test-host "DESCRIPTION"] [--stamps FILE]
                     [--host-load "DESCRIPTION"]
Reads the BENCH-CMD / BENCH-SAMPLE / BENCH-MEM / BENCH-ERROR lines printed by bench/boot/scenario.sh,
and from --stamps (bench/lib/stamp_cpu.py) the host CPU time of the test host at each boot's
BENCH-PROGRESS and BENCH-SAMPLE line: their difference is what one boot cost the test host.
A VMM without a successful sample gets null medians and its first error.
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from console_fields import fields, stats  # noqa: E402
from results import add_common_args, number, stamp  # noqa: E402

VMMS = ["tern", "qemu-microvm", "qemu-pc"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("log")
    ap.add_argument("--runs", type=int, required=True)
    ap.add_argument("--stamps")
    add_common_args(ap)
    args = ap.parse_args()

    # (vmm, run) -> {"start": (cpu_s, wall_s), "end": (cpu_s, wall_s)}
    stamps = {}
    if args.stamps:
        with open(args.stamps, errors="replace") as f:
            for line in f:
                f_ = fields(line)
                if "vmm" not in f_ or "run" not in f_ or number(f_.get("l1_cpu_s")) is None:
                    continue
                key = (f_["vmm"], int(f_["run"].split("/")[0]))
                phase = "start" if line.startswith("BENCH-PROGRESS") else "end"
                stamps.setdefault(key, {})[phase] = (float(f_["l1_cpu_s"]), float(f_["host_wall_s"]))

    vmms = {v: {"command": None, "samples": [], "memory": None, "errors": []} for v in VMMS}
    with open(args.log, errors="replace") as f:
        for line in f:
            line = line.strip()
            kind = line.split(" ", 1)[0]
            if kind not in ("BENCH-CMD", "BENCH-SAMPLE", "BENCH-MEM", "BENCH-ERROR"):
                continue
            f_ = fields(line)
            v = vmms.get(f_.get("vmm"))
            if v is None:
                continue
            if kind == "BENCH-CMD":
                v["command"] = line.split(" cmd=", 1)[1]
            elif kind == "BENCH-SAMPLE":
                run = int(f_["run"])
                st = stamps.get((f_["vmm"], run), {})
                cpu_ms = None
                if "start" in st and "end" in st:
                    cpu_ms = round((st["end"][0] - st["start"][0]) * 1000, 1)
                v["samples"].append({"run": run, "rc": int(f_["rc"]) if f_["rc"].isdigit() else None,
                                     "marker_ms": number(f_["marker_ms"]), "exit_ms": number(f_["exit_ms"]),
                                     "l1_host_cpu_ms": cpu_ms})
            elif kind == "BENCH-MEM":
                v["memory"] = {k: int(f_[k]) for k in ("vmrss_kb", "guest_ram_rss_kb", "overhead_kb",
                                                       "guest_ram_mappings")}
            else:
                v["errors"].append(line.split(" what=", 1)[1] if " what=" in line else line)

    out_vmms = {}
    for name, v in vmms.items():
        ok = [s for s in v["samples"] if s["rc"] == 0 and s["marker_ms"] is not None]
        out_vmms[name] = {
            "command": v["command"],
            "to_marker_ms": stats([s["marker_ms"] for s in ok]),
            "to_exit_ms": stats([s["exit_ms"] for s in ok]),
            "l1_host_cpu_ms": stats([s["l1_host_cpu_ms"] for s in ok if s["l1_host_cpu_ms"] is not None]),
            "memory_overhead": v["memory"],
            "samples": v["samples"],
            "error": v["errors"][0] if v["errors"] else (None if ok else "no samples"),
        }

    def ratio(metric):
        tern = out_vmms["tern"][metric]
        qemus = [(out_vmms[q][metric]["median"], q) for q in VMMS[1:] if out_vmms[q][metric]]
        if not tern or not qemus:
            return None
        best, which = min(qemus)
        return {"ratio": round(tern["median"] / best, 3), "faster_qemu": which}

    mem = {n: (v["memory_overhead"] or {}).get("overhead_kb") for n, v in out_vmms.items()}
    result = stamp("boot", args.kernel)
    result.update({
        "guest": {"memory_mib": 256, "vcpus": 1, "cmdline": "console=ttyS0 quiet tern.action=poweroff"},
        "test_host": args.test_host,
        "host_load": args.host_load,
        "clock": "test host (L1) wall clock; busybox ts stamps each console line as it arrives (us)",
        "l1_host_cpu": "host CPU time (utime+stime) of the test host's QEMU from the boot's BENCH-PROGRESS "
                       "line to its BENCH-SAMPLE line: the emulation work one boot cost, all of L1 included",
        "runs_per_vmm": args.runs,
        "vmms": out_vmms,
        "tern_vs_faster_qemu": {"to_marker": ratio("to_marker_ms"), "to_exit": ratio("to_exit_ms"),
                                "l1_host_cpu": ratio("l1_host_cpu_ms")},
        "memory_overhead_kb": mem,
    })
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
