#!/usr/bin/env python3
"""Turns the console log of a bench/boot/firmware.sh test-host run into JSON (stdout).

Usage: firmware_summarize.py LOG --kernel VERSION --family bios|uefi --rows "LIST" --rounds N
                             [--cpus N] [--memory MIB] [--stamps FILE] [--git-rev REV] [--tern PATH]
                             [--image IMG] [--duration-s S] [--test-host "..."] [--host-load "..."]
Reads the lines bench/boot/firmware_scenario.sh prints (its header lists them) and from --stamps
(bench/lib/stamp_cpu.py) the test host's CPU time at each timed boot's BENCH-PROGRESS and BENCH-FW-MARK
lines. Times: median/min/max over the rounds per row; every tern row against every QEMU row, a
difference claimed only when the ranges do not overlap (bench/lib/compare.py). Exits: per row and
phase (GRUB's menu, the marker) the test host's histograms, medians over the traced boots.
"""
import argparse
import json
import os
import re
import sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "lib"))
sys.path.insert(0, here)
from compare import binary_info, verdict  # noqa: E402
from console_fields import fields, stats  # noqa: E402
from kvm_trace import KVM_EXIT_NAMES, SVM_NAMES  # noqa: E402
from results import add_common_args, number, stamp  # noqa: E402
from summarize import parse_vmmstats  # noqa: E402

TIMES = (("fw_ms", "to_firmware_banner_ms"), ("grub_ms", "to_grub_menu_ms"), ("kernel_ms", "to_linux_ms"),
         ("marker_ms", "to_marker_ms"), ("login_ms", "to_login_ms"), ("exit_ms", "to_exit_ms"),
         ("l1_host_cpu_ms", "l1_host_cpu_to_marker_ms"))
# What sits at the ports the firmwares and the guest use (i440FX/PIIX as QEMU's -M pc and tern's
# firmware boots lay them out). "kernel": answered inside KVM (in-kernel PIC, PIT, speaker dummy).
PORTS = [((0x20, 0x21), "PIC master (kernel)"), ((0xa0, 0xa1), "PIC slave (kernel)"),
         ((0x40, 0x43), "PIT (kernel)"), ((0x61, 0x61), "port 61h (kernel)"), ((0x4d0, 0x4d1), "ELCR (kernel)"),
         ((0x60, 0x60), "i8042 data"), ((0x64, 0x64), "i8042 cmd"), ((0x70, 0x71), "CMOS/RTC"),
         ((0x80, 0x80), "POST 80h"), ((0x92, 0x92), "port 92h"), ((0x3f8, 0x3ff), "COM1"),
         ((0x2f8, 0x2ff), "COM2 probe"), ((0x3e8, 0x3ef), "COM3 probe"), ((0x2e8, 0x2ef), "COM4 probe"),
         ((0x378, 0x37f), "LPT probe"), ((0x1f0, 0x1f7), "ATA0"), ((0x3f6, 0x3f6), "ATA0 ctl"),
         ((0x170, 0x177), "ATA1"), ((0x376, 0x376), "ATA1 ctl"), ((0x3f0, 0x3f7), "floppy"),
         ((0x402, 0x402), "debugcon"), ((0x510, 0x510), "fw_cfg selector"), ((0x511, 0x511), "fw_cfg data"),
         ((0x514, 0x51b), "fw_cfg DMA"), ((0xcf8, 0xcfb), "PCI config address"),
         ((0xcfc, 0xcff), "PCI config data"), ((0xcf9, 0xcf9), "reset control"),
         ((0x600, 0x607), "PM block (0x600)"), ((0x608, 0x60b), "PM timer (0x600+8)"),
         ((0xb000, 0xb007), "PM block (0xb000)"), ((0xb008, 0xb00b), "PM timer (0xb000+8)"),
         ((0xb2, 0xb3), "APM control/status")]
MMIO_TYPES = {0: "read to userspace", 1: "read", 2: "write"}


def port_name(port):
    for (lo, hi), name in PORTS:
        if lo <= port <= hi:
            return name
    return "PCI I/O BAR" if port >= 0xc000 else "other"


def mmio_region(gpa):
    if 0xa0000 <= gpa < 0xc0000:
        return "VGA window 0xA0000"
    for base, size, name in ((0xfee00000, 0x1000, "LAPIC (kernel)"), (0xfec00000, 0x1000, "IOAPIC (kernel)"),
                             (0xfed00000, 0x400, "HPET"), (0xffc00000, 0x400000, "flash (pflash)")):
        if base <= gpa < base + size:
            return name
    return "page 0x%x" % (gpa & ~0xfff)


def parse_hist(rows):
    """BENCH-FW-HIST rows of one boot and phase -> the histograms, summed by what they say."""
    out = {"userspace_exits": {}, "pio": {}, "mmio": {}, "kernel_exits": {}}
    for kv in rows:
        n, ev = int(kv["count"]), kv["event"]
        if ev == "kvm_userspace_exit":
            key = KVM_EXIT_NAMES.get(int(kv["reason"]), "reason %s" % kv["reason"])
            out["userspace_exits"][key] = out["userspace_exits"].get(key, 0) + n
        elif ev == "kvm_pio":
            port = int(kv["port"])
            key = "0x%x %s %s" % (port, "out" if kv.get("rw") == "1" else "in", port_name(port))
            out["pio"][key] = out["pio"].get(key, 0) + n
        elif ev == "kvm_mmio":
            key = "%s %s" % (mmio_region(int(kv["gpa"])), MMIO_TYPES.get(int(kv["type"]), kv["type"]))
            out["mmio"][key] = out["mmio"].get(key, 0) + n
        elif ev == "kvm_exit":
            key = SVM_NAMES.get(int(kv["exit_reason"]), "0x%x" % int(kv["exit_reason"]))
            out["kernel_exits"][key] = out["kernel_exits"].get(key, 0) + n
    for k in list(out):
        out[k] = dict(sorted(out[k].items(), key=lambda kv: -kv[1]))
    out["userspace_exits_total"] = sum(out["userspace_exits"].values())
    out["kernel_exits_total"] = sum(out["kernel_exits"].values())
    return out


def median_hists(boots):
    """One phase's histograms over the traced boots: the median count of every key (0 where a boot lacks it)."""
    if not boots:
        return None
    out = {}
    for section in ("userspace_exits", "pio", "mmio", "kernel_exits"):
        keys = {k for b in boots for k in b[section]}
        med = {k: stats([b[section].get(k, 0) for b in boots])["median"] for k in keys}
        out[section] = dict(sorted(med.items(), key=lambda kv: -kv[1]))
    for total in ("userspace_exits_total", "kernel_exits_total", "read_at_ms"):
        out[total] = stats([b.get(total) for b in boots])
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("log")
    ap.add_argument("--family", required=True)
    ap.add_argument("--rows", required=True)
    ap.add_argument("--rounds", type=int, required=True)
    ap.add_argument("--cpus", type=int, default=1)
    ap.add_argument("--memory", type=int, default=512)
    ap.add_argument("--stamps")
    ap.add_argument("--git-rev")
    ap.add_argument("--tern")
    ap.add_argument("--image")
    ap.add_argument("--duration-s", type=int)
    add_common_args(ap)
    args = ap.parse_args()
    rows = args.rows.split()

    marks = {}  # (vmm, run) -> {"start": cpu_s, "end": cpu_s}
    if args.stamps and os.path.exists(args.stamps):
        with open(args.stamps, errors="replace") as f:
            for line in f:
                kv = fields(line)
                cpu = number(kv.get("l1_cpu_s"))
                if "vmm" in kv and "run" in kv and cpu is not None:
                    phase = "start" if line.startswith("BENCH-PROGRESS") else "end"
                    marks.setdefault((kv["vmm"], int(kv["run"].split("/")[0])), {})[phase] = cpu

    vm = {v: {"command": None, "samples": [], "errors": [], "hists": {}, "hist_at": {}, "vmmstats": {}} for v in rows}
    errors = []
    with open(args.log, errors="replace") as f:
        for line in f:
            line = line.rstrip("\r\n")
            kind = line.split(" ", 1)[0]
            if not kind.startswith("BENCH-") or kind == "BENCH-PROGRESS":
                continue
            kv = fields(line)
            v = vm.get(kv.get("vmm", ""))
            if kind == "BENCH-ERROR":
                what = line.split(" what=", 1)[1] if " what=" in line else line
                (v["errors"] if v else errors).append(what if v else f"{kv.get('vmm')}: {what}")
            elif v is None:
                continue
            elif kind == "BENCH-FW-CMD":
                v["command"] = line.split(" cmd=", 1)[1]
            elif kind == "BENCH-FW-SAMPLE":
                run = int(kv["run"])
                s = {"run": run, "rc": int(kv["rc"]) if kv["rc"].isdigit() else None}
                for key, _ in TIMES[:-1]:
                    s[key] = number(kv.get(key))
                # A kernel message can follow the marker on its line ("uptime=105.13[  111.88] kvm: ..."): the number.
                up = re.match(r"[0-9.]+", kv.get("guest_uptime_s", ""))
                s.update({"guest_uptime_s": number(up.group(0)) if up else None, "state": kv.get("state"),
                          "failed_units": number(kv.get("failed"))})
                m = marks.get((kv["vmm"], run), {})
                s["l1_host_cpu_ms"] = round((m["end"] - m["start"]) * 1000, 1) if "start" in m and "end" in m else None
                v["samples"].append(s)
            elif kind == "BENCH-FW-HIST":
                v["hists"].setdefault((int(kv["run"]), kv["phase"]), []).append(kv)
            elif kind == "BENCH-FW-HIST-AT":
                v["hist_at"][(int(kv["run"]), kv["phase"])] = number(kv.get("ms"))
            elif kind == "BENCH-FW-VMMSTATS":
                v["vmmstats"].setdefault(kv["run"], []).append(line.split(" line=", 1)[1] if " line=" in line else "")

    out_vmms, exits = {}, {}
    for name, v in vm.items():
        ok = [s for s in v["samples"] if s["rc"] == 0 and s["marker_ms"] is not None]
        row = {"command": v["command"]}
        for key, label in TIMES:
            row[label] = stats([s[key] for s in ok])
        row.update({"marker_states": sorted({f"{s['state']} failed={s['failed_units']:.0f}" for s in ok
                                             if s["state"] and s["failed_units"] is not None}),
                    "samples": v["samples"], "error": v["errors"][0] if v["errors"] else (None if ok else "no samples")})
        out_vmms[name] = row
        phases = {}
        for phase in ("grub", "marker"):
            boots = []
            for (run, ph), hist_rows in sorted(v["hists"].items()):
                if ph == phase:
                    b = parse_hist(hist_rows)
                    b["read_at_ms"], b["run"] = v["hist_at"].get((run, ph)), run
                    boots.append(b)
            phases[phase] = {"boots": len(boots), "median": median_hists(boots), "per_boot": boots}
        tern_stats = {run: parse_vmmstats(lines) for run, lines in v["vmmstats"].items()}
        exits[name] = {**phases, "tern_stats_on_exit": tern_stats or None,
                       "tern_stats_on_exit_text": v["vmmstats"] or None}

    tern_rows = [r for r in rows if r.startswith("tern")]
    qemu_rows = [r for r in rows if r.startswith("qemu")]
    comparisons = {}
    for t in tern_rows:
        for q in qemu_rows:
            c = {label: verdict(out_vmms[t][label], out_vmms[q][label], higher_is_better=False)
                 for _, label in TIMES if label != "to_exit_ms"}
            for phase in ("grub", "marker"):
                a, b = (exits[x][phase]["median"] for x in (t, q))
                for total in ("userspace_exits_total", "kernel_exits_total"):
                    if a and b and a[total] and b[total] and b[total]["median"]:
                        c[f"{total}_at_{phase}"] = {"ratio_of_medians": round(a[total]["median"] / b[total]["median"], 3)}
            comparisons[f"{t} vs {q}"] = c

    result = stamp("boot-firmware", args.kernel)
    result.update({
        "git_rev": args.git_rev,
        "tern": binary_info(args.tern) if args.tern and os.path.exists(args.tern) else None,
        "image": args.image, "family": args.family, "rows": rows, "rounds": args.rounds,
        "guest": {"vcpus": args.cpus, "memory_mib": args.memory,
                  "disk": "the image as L1's /dev/vda (QEMU snapshot=on in L1: the file never changes), virtio-blk, "
                          "cache=writeback", "firmware": "Debian's, unmodified, the same file for both VMMs",
                  "grub": "the image's grub.cfg: serial + console terminals, timeout=1 (the menu stays 1 s)",
                  "marker": "TERN-DEBIAN-MARKER (systemctl is-system-running --wait returned)"},
        "test_host": args.test_host, "host_load": args.host_load, "duration_s": args.duration_s,
        "clock": "test host (L1) wall clock from just before the VMM's exec; busybox ts stamps each console line "
                 "(ESC starts a line too) as it arrives",
        "exits_source": "test host tracefs hist triggers around untimed boots, read at GRUB's menu (polled every "
                        "0.2 s) and at the marker (0.5 s): kvm_userspace_exit keys=reason (KVM_RUN returns to the "
                        "VMM), kvm_pio keys=port,rw (every PIO exit, in-kernel ones too), kvm_mmio keys=type,gpa, "
                        "kvm_exit keys=exit_reason",
        "goals": {"time_ratio_max": 0.7, "userspace_exits_ratio_max": 0.5},
        "vmms": out_vmms, "comparisons": comparisons, "exits": exits, "errors": errors,
    })
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
