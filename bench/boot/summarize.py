#!/usr/bin/env python3
"""Turns the console log of a bench/boot test-host run into JSON (stdout).

Usage: summarize.py LOG --kernel VERSION --runs N --rows "LIST" [--debian-rounds N] [--debian-rows "LIST"]
                    [--stamps FILE] [--git-rev REV] [--tern PATH] [--image IMG] [--duration-s S]
                    [--test-host "DESCRIPTION"] [--host-load "DESCRIPTION"]
Reads the lines bench/boot/scenario.sh prints (its header lists them) and from --stamps
(bench/lib/stamp_cpu.py) the host CPU time of the test host at each boot's BENCH-PROGRESS line and
at its BENCH-SAMPLE (busybox) or BENCH-DEBIAN-MARK (Debian) line: their difference is what one boot
cost the test host up to its marker. A row without a successful sample gets null statistics and its
first error. Comparisons: every tern row against every QEMU row of the same guest, by the medians, a
difference claimed only when the min-max ranges over the rounds do not overlap (bench/lib/compare.py).
"""
import argparse
import json
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from compare import binary_info, verdict  # noqa: E402
from console_fields import fields, stats  # noqa: E402
from kvm_trace import SVM_NAMES  # noqa: E402
from results import add_common_args, number, stamp  # noqa: E402

BUSYBOX_GUEST = {"memory_mib": 256, "vcpus": 1, "cmdline": "console=ttyS0 quiet tern.action=poweroff",
                 "kernel_and_initrd": "Debian's stock cloud kernel, the busybox guest initramfs of testhost/"}
DEBIAN_GUEST = {"memory_mib": 512, "vcpus": 2, "cmdline": "console=ttyS0 root=/dev/vda rw quiet",
                "disk": "the image as L1's /dev/vda (QEMU snapshot=on in L1: the file never changes), "
                        "virtio-blk, cache=writeback",
                "kernel_and_initrd": "Debian's kernel and its own initramfs-tools initrd (testhost --with-debian-initrd)",
                "marker": "TERN-DEBIAN-MARKER: the image's tern-marker.service printed it once "
                          "`systemctl is-system-running --wait` returned (multi-user.target reached, no job left; no "
                          "network in this guest, so no wait for an address)",
                "login": "agetty's 'login: root (automatic login)' line on ttyS0 (serial-getty autologin)",
                "exit": "the VMM's exit after `systemctl poweroff` typed at the shell (polled every 0.1 s)",
                "warm_up": "one untimed boot before the rounds: the image's first boot (machine id) and L1's page cache"}
STARTUP = re.compile(r"Startup finished in (.*) = ([0-9.]+(?:min )?[0-9.]*m?s)")
PART = re.compile(r"([0-9.]+(?:min [0-9.]+)?m?s) \((\w+)\)")
REACHED = re.compile(r"(\S+) reached after ([0-9.]+(?:min [0-9.]+)?m?s) in userspace")


def seconds(text):
    """systemd's '1min 2.345s' / '2.345s' / '345ms' as seconds."""
    total = 0.0
    for value, unit in re.findall(r"([0-9.]+)(min|ms|s)", text):
        total += float(value) * {"min": 60, "s": 1, "ms": 0.001}[unit]
    return round(total, 3)


def parse_analyze(lines):
    """systemd-analyze's 'Startup finished in ...' line as {kernel_s, initrd_s, userspace_s, total_s, target_s}."""
    out = {}
    for line in lines:
        m = STARTUP.search(line)
        if m:
            for value, part in PART.findall(m.group(1)):
                out[f"{part}_s"] = seconds(value)
            out["total_s"] = seconds(m.group(2))
        m = REACHED.search(line)
        if m:
            out["target"], out["target_userspace_s"] = m.group(1), seconds(m.group(2))
    return out or None


def parse_vmmstats(lines):
    """tern's --stats-on-exit text: {section: {name: number}} for its 'name   number' sections."""
    out, section = {}, None
    for line in lines:
        if line.startswith("    ") and section:
            m = re.match(r"\s+(.+?)\s{2,}([0-9.]+)( s)?$", line)
            if m:
                out[section][m.group(1)] = float(m.group(2)) if "." in m.group(2) else int(m.group(2))
        elif line.startswith("  ") and not line.startswith("   "):
            name = line.strip()
            section = {"exits by reason (all vCPUs)": "exits_by_reason", "PIO/MMIO accesses by device": "accesses_by_device",
                       "unclaimed accesses (bus address)": "unclaimed", "exits by vCPU": "exits_by_vcpu",
                       "time in device handlers (% of one CPU)": "handler_time_s"}.get(name)
            if section:
                out[section] = {}
    if "exits_by_reason" in out:
        out["exits_total"] = sum(out["exits_by_reason"].values())
    return out or None


def exits_by_reason(text, rows):
    """BENCH-EXITS* lines -> {vmm: {"boots", "total": stats, "reasons": {name: stats}, "tern_sum": stats, ...}}:
    in-kernel exits per boot by SVM exit reason from the test host's kvm_exit hist trigger (every VMM),
    and tern's own --kernel-exits count for tern rows. Medians over the boots; reasons sorted by median."""
    per = {}
    for line in text.splitlines():
        if not line.startswith("BENCH-EXITS"):
            continue
        kv = fields(line)
        if kv.get("vmm") not in rows:
            continue
        b = per.setdefault(kv["vmm"], {}).setdefault(int(kv["run"]), {"reasons": {}})
        if line.startswith("BENCH-EXITS "):
            name = SVM_NAMES.get(int(kv["code"]), "0x%x" % int(kv["code"]))
            b["reasons"][name] = b["reasons"].get(name, 0) + int(kv["count"])
        elif line.startswith("BENCH-EXITS-TOTAL"):
            b["total"], b["rc"] = int(kv["hist_total"]), int(kv["rc"])
        elif line.startswith("BENCH-EXITS-TERN"):
            b["tern_sum"], b["tern_kvm_exits"] = int(kv["sum"]), int(kv["kvm_exits"])
    out = {}
    for vmm, boots in per.items():
        ok = [b for b in boots.values() if b.get("rc") == 0 and "total" in b]
        names = sorted({n for b in ok for n in b["reasons"]})
        reasons = {n: stats([b["reasons"].get(n, 0) for b in ok]) for n in names}
        reasons = dict(sorted(reasons.items(), key=lambda kv: -(kv[1] or {}).get("median", 0)))
        out[vmm] = {"boots": len(ok), "source": "test host hist trigger on kvm:kvm_exit (keys=exit_reason) around the boot",
                    "total": stats([b["total"] for b in ok]), "reasons": reasons,
                    "tern_kernel_exits_sum": stats([b["tern_sum"] for b in ok if "tern_sum" in b]),
                    "tern_kvm_exits": stats([b["tern_kvm_exits"] for b in ok if "tern_kvm_exits" in b]),
                    "per_boot": [dict(b, run=r) for r, b in sorted(boots.items())]}
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("log")
    ap.add_argument("--runs", type=int, required=True)
    ap.add_argument("--rows", required=True)
    ap.add_argument("--debian-rounds", type=int, default=0)
    ap.add_argument("--debian-rows", default="")
    ap.add_argument("--stamps")
    ap.add_argument("--git-rev")
    ap.add_argument("--tern")
    ap.add_argument("--image")
    ap.add_argument("--duration-s", type=int)
    add_common_args(ap)
    args = ap.parse_args()
    rows, deb_rows = args.rows.split(), args.debian_rows.split() if args.debian_rounds else []

    # (kind, vmm, run) -> {"start": cpu_s, "end": cpu_s}; kind: boot | debian
    marks = {}
    if args.stamps and os.path.exists(args.stamps):
        with open(args.stamps, errors="replace") as f:
            for line in f:
                kv = fields(line)
                cpu = number(kv.get("l1_cpu_s"))
                if "vmm" not in kv or "run" not in kv or cpu is None:
                    continue
                run = int(kv["run"].split("/")[0])
                if line.startswith("BENCH-PROGRESS"):
                    kind, phase = line.split()[1], "start"
                else:
                    kind, phase = ("debian" if line.startswith("BENCH-DEBIAN-MARK") else "boot"), "end"
                marks.setdefault((kind, kv["vmm"], run), {})[phase] = cpu

    def cpu_ms(kind, vmm, run):
        m = marks.get((kind, vmm, run), {})
        return round((m["end"] - m["start"]) * 1000, 1) if "start" in m and "end" in m else None

    bb = {v: {"command": None, "samples": [], "memory": None, "errors": []} for v in rows}
    deb = {v: {"command": None, "samples": [], "errors": [], "analyze": {}, "vmmstats": {}} for v in deb_rows}
    general_errors = []
    with open(args.log, errors="replace") as f:
        for line in f:
            line = line.rstrip("\r\n")
            kind = line.split(" ", 1)[0]
            if not kind.startswith("BENCH-") or kind in ("BENCH-PROGRESS", "BENCH-T0", "BENCH-T1"):
                continue
            kv = fields(line)
            name = kv.get("vmm", "")
            if kind == "BENCH-ERROR":
                what = line.split(" what=", 1)[1] if " what=" in line else line
                if name.startswith("debian-") and name[7:] in deb:
                    deb[name[7:]]["errors"].append(what)
                elif name in bb:
                    bb[name]["errors"].append(what)
                else:
                    general_errors.append(f"{name}: {what}")
                continue
            if kind.startswith("BENCH-DEBIAN"):
                d = deb.get(name)
                if d is None:
                    continue
                if kind == "BENCH-DEBIAN-CMD":
                    d["command"] = line.split(" cmd=", 1)[1]
                elif kind == "BENCH-DEBIAN-SAMPLE":
                    run = int(kv["run"])
                    d["samples"].append({"run": run, "rc": int(kv["rc"]) if kv["rc"].isdigit() else None,
                                         "marker_ms": number(kv.get("marker_ms")), "login_ms": number(kv.get("login_ms")),
                                         "exit_ms": number(kv.get("exit_ms")),
                                         "guest_uptime_s": number(kv.get("guest_uptime_s")),
                                         "state": kv.get("state"), "failed_units": number(kv.get("failed")),
                                         "l1_host_cpu_ms": cpu_ms("debian", name, run)})
                elif kind == "BENCH-DEBIAN-ANALYZE":
                    d["analyze"].setdefault(kv["what"], []).append(line.split(" line=", 1)[1] if " line=" in line else "")
                elif kind == "BENCH-DEBIAN-VMMSTATS":
                    d["vmmstats"].setdefault(int(kv["run"]), []).append(line.split(" line=", 1)[1] if " line=" in line else "")
                continue
            v = bb.get(name)
            if v is None:
                continue
            if kind == "BENCH-CMD":
                v["command"] = line.split(" cmd=", 1)[1]
            elif kind == "BENCH-SAMPLE":
                run = int(kv["run"])
                v["samples"].append({"run": run, "rc": int(kv["rc"]) if kv["rc"].isdigit() else None,
                                     "marker_ms": number(kv["marker_ms"]), "exit_ms": number(kv["exit_ms"]),
                                     "l1_host_cpu_ms": cpu_ms("boot", name, run)})
            elif kind == "BENCH-MEM":
                v["memory"] = {k: int(kv[k]) for k in ("vmrss_kb", "guest_ram_rss_kb", "overhead_kb", "guest_ram_mappings")}

    def st(samples, key):
        return stats([s[key] for s in samples if s.get(key) is not None])

    busybox = {}
    for name, v in bb.items():
        ok = [s for s in v["samples"] if s["rc"] == 0 and s["marker_ms"] is not None]
        busybox[name] = {"command": v["command"], "to_marker_ms": st(ok, "marker_ms"), "to_exit_ms": st(ok, "exit_ms"),
                         "l1_host_cpu_ms": st(ok, "l1_host_cpu_ms"), "memory_overhead": v["memory"],
                         "samples": v["samples"], "error": v["errors"][0] if v["errors"] else (None if ok else "no samples")}
    debian = {}
    for name, d in deb.items():
        for s in d["samples"]:
            lines = d["vmmstats"].get(s["run"])
            if lines:
                s["tern_stats_on_exit"] = parse_vmmstats(lines)
                s["tern_stats_on_exit_text"] = lines
        ok = [s for s in d["samples"] if s["rc"] == 0 and s["marker_ms"] is not None]
        debian[name] = {"command": d["command"], "to_marker_ms": st(ok, "marker_ms"), "to_login_ms": st(ok, "login_ms"),
                        "to_exit_ms": st(ok, "exit_ms"), "guest_uptime_at_marker_s": st(ok, "guest_uptime_s"),
                        "l1_host_cpu_ms": st(ok, "l1_host_cpu_ms"),
                        "exits_total": stats([(s.get("tern_stats_on_exit") or {}).get("exits_total") for s in ok]),
                        "marker_states": sorted({f"{s['state']} failed={s['failed_units']:.0f}" for s in ok
                                                 if s["state"] and s["failed_units"] is not None}),
                        "systemd_analyze": parse_analyze(d["analyze"].get("time", [])),
                        "systemd_analyze_text": d["analyze"],
                        "samples": d["samples"],
                        "error": d["errors"][0] if d["errors"] else (None if ok else "no samples")}

    def compare(table, metrics, tern_rows, qemu_rows):
        out = {}
        for t in tern_rows:
            for q in qemu_rows:
                out[f"{t} vs {q}"] = {m: verdict(table[t][m], table[q][m], higher_is_better=False) for m in metrics}
        return out

    bb_tern = [r for r in rows if r.startswith("tern")]
    bb_qemu = [r for r in rows if r.startswith("qemu")]
    deb_tern = [r for r in deb_rows if r.startswith("tern")]
    deb_qemu = [r for r in deb_rows if r.startswith("qemu")]
    result = stamp("boot", args.kernel)
    result.update({
        "git_rev": args.git_rev,
        "tern": binary_info(args.tern) if args.tern and os.path.exists(args.tern) else None,
        "image": args.image if args.debian_rounds else None,
        "test_host": args.test_host,
        "host_load": args.host_load,
        "duration_s": args.duration_s,
        "clock": "test host (L1) wall clock from just before the VMM's exec; busybox ts stamps each console line "
                 "as it arrives (us)",
        "l1_host_cpu": "host CPU time (utime+stime) of the test host's QEMU from the boot's BENCH-PROGRESS line to its "
                       "marker (busybox: the BENCH-SAMPLE line after exit; Debian: BENCH-DEBIAN-MARK): the emulation "
                       "work one boot cost, all of L1 included",
        "verdicts": "ratio_of_medians = tern / QEMU; ranges: lower/higher only when the min-max ranges do not overlap, "
                    "else no measurable difference",
        "busybox": {"guest": BUSYBOX_GUEST, "runs": args.runs, "rows": rows, "vmms": busybox,
                    "comparisons": compare(busybox, ("to_marker_ms", "to_exit_ms", "l1_host_cpu_ms"), bb_tern, bb_qemu),
                    "memory_overhead_kb": {n: (v["memory_overhead"] or {}).get("overhead_kb") for n, v in busybox.items()},
                    "exits_by_reason": exits_by_reason(open(args.log, errors="replace").read().replace("\r", ""), rows)},
        "debian": {"guest": DEBIAN_GUEST, "rounds": args.debian_rounds, "rows": deb_rows, "vmms": debian,
                   "comparisons": compare(debian, ("to_marker_ms", "to_login_ms", "l1_host_cpu_ms"), deb_tern, deb_qemu)}
        if args.debian_rounds else None,
        "errors": general_errors,
    })
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
