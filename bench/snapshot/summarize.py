#!/usr/bin/env python3
"""Turns the console log of a bench/snapshot test-host run into JSON (stdout).

Usage: summarize.py LOG --kernel VERSION --runs N [--test-host DESC] [--host-load DESC]
                    [--qemu-version TEXT] [--wall-s S]
Reads the BENCH-INFO / BENCH-CMD / BENCH-SAVE / BENCH-RESTORE / BENCH-ERROR lines printed by
bench/snapshot/scenario.sh. Per mode (qemu-default, qemu-unlimited, tern) and guest size: the samples
and the median / min / max of each figure over the successful runs. A mode without samples keeps its
first error.
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from console_fields import fields, stats  # noqa: E402
from results import add_common_args, number, stamp  # noqa: E402

MODES = ["qemu-default", "qemu-unlimited", "tern"]
SAVE_KEYS = ["save_wall_ms", "vmm_save_ms", "pause_ms", "save_mib_s", "file_mib", "file_alloc_mib"]
RESTORE_KEYS = ["first_tick_ms", "vmm_running_ms"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("log")
    ap.add_argument("--runs", type=int, required=True)
    ap.add_argument("--qemu-version", default="")
    ap.add_argument("--wall-s", type=float)
    add_common_args(ap)
    args = ap.parse_args()

    info, commands, errors = {}, {}, {}
    saves, restores = {}, {}  # (mode, size, run) -> fields
    with open(args.log, errors="replace") as f:
        for line in f:
            line = line.strip()
            kind = line.split(" ", 1)[0]
            f_ = fields(line)
            key = None
            if kind in ("BENCH-SAVE", "BENCH-RESTORE"):
                key = (f_.get("vmm"), int(f_["size_mib"]), int(f_["run"]))
            if kind == "BENCH-INFO":
                info = f_
            elif kind == "BENCH-CMD":
                commands[f_.get("vmm")] = line.split(" cmd=", 1)[1]
            elif kind == "BENCH-SAVE":
                saves[key] = f_
            elif kind == "BENCH-RESTORE":
                restores[key] = f_
            elif kind == "BENCH-ERROR":
                errors.setdefault(f_.get("vmm"), []).append(line.split(" what=", 1)[1] if " what=" in line else line)

    sizes = sorted({k[1] for k in list(saves) + list(restores)})
    modes = {}
    for mode in MODES:
        per_size = {}
        for size in sizes:
            samples = []
            for run in sorted({k[2] for k in list(saves) + list(restores) if k[0] == mode and k[1] == size}):
                s = saves.get((mode, size, run), {})
                r = restores.get((mode, size, run), {})
                sample = {"run": run}
                sample.update({k: number(s.get(k)) for k in SAVE_KEYS})
                sample.update({k: number(r.get(k)) for k in RESTORE_KEYS})
                sample["max_bandwidth"] = number(s.get("max_bandwidth"))
                for k in ("qemu_transferred_mib", "qemu_mbps"):
                    if k in s:
                        sample[k] = number(s[k])
                sample["restore_status"] = r.get("status")
                samples.append(sample)
            if not samples:
                continue
            entry = {k: stats([x[k] for x in samples]) for k in SAVE_KEYS + RESTORE_KEYS}
            bws = {x["max_bandwidth"] for x in samples if x["max_bandwidth"] is not None}
            entry["max_bandwidth_bytes_per_s"] = bws.pop() if len(bws) == 1 else (sorted(bws) or None)
            entry["samples"] = samples
            per_size[str(size)] = entry
        errs = errors.get(mode, [])
        if mode.startswith("qemu"):
            errs = errs + errors.get("qemu", [])
        modes[mode] = {
            "command": commands.get("tern" if mode == "tern" else "qemu"),
            "sizes": per_size,
            "errors": errs,
            "error": errs[0] if errs and not per_size else None,
        }
    result = stamp("snapshot", args.kernel)
    result.update({
        "qemu_version": args.qemu_version,
        "guest": {"vcpus": 1, "sizes_mib": sizes, "dirty": "half of RAM: anonymous memory of the guest program dirty-tick filled with xorshift64* output seeded from /dev/urandom",
                  "cmdline": "console=ttyS0 quiet loglevel=1 tern.action=dirty-tick snap.dirty_mib=<size/2>"},
        "snapshot_files": "tmpfs of the test host (L1): this measures the VMMs, not a disk",
        "test_host": args.test_host,
        "test_host_info": info,
        "host_load": args.host_load,
        "wall_s": args.wall_s,
        "runs": args.runs,
        "definitions": {
            "pause_ms": "how long the guest stays paused for the save, as the VMM reports it: QEMU "
                        "STOP event to MIGRATION completed event (QEMU's timestamps; the VM is stopped "
                        "for the whole save); tern: 'paused P ms' of tern snapshot's last line (pause "
                        "request to the reply of its power-off request)",
            "save_mib_s": "guest RAM size / pause_ms",
            "vmm_save_ms": "QEMU: = pause_ms; tern: 'in S s' of tern snapshot's last line (writing only)",
            "save_wall_ms": "L1 wall clock from just before the save request (QEMU: QMP stop; tern: exec "
                            "of tern snapshot --exit, so including that client's start) to its end "
                            "(QEMU: MIGRATION completed event read; tern: tern snapshot exited)",
            "first_tick_ms": "L1 wall clock from just before the restoring VMM's exec to the first "
                             "'TICK n' console line with n above the last one printed before the save "
                             "(busybox ts stamps, us; the guest ticks every ~10 ms)",
            "vmm_running_ms": "VMM-reported: QEMU's RESUME event timestamp minus the exec stamp; tern: "
                              "uptime_ms of its 'Running' state event (from tern's own start, not exec)",
            "file_mib": "size of the snapshot file(s); file_alloc_mib: blocks allocated in tmpfs",
        },
        "modes": modes,
    })
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
