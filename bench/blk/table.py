#!/usr/bin/env python3
"""Prints Markdown tables (for docs) from bench/blk's blk.json: per figure (IOPS, mean and p99
latency, host CPU per I/O of the VMM plus the back-end, and the part outside guest mode, the
back-end's part) one row per job and one column per configuration, each cell the median (min-max)
over the rounds; then per random read/write job the exits per I/O by exit reason with the
interrupts, EOIs and kicks (the test host's hist triggers), issue 16's verdicts per tern
configuration against QEMU, then the issue's goals (each comparison's verdict, a difference claimed only when
the ranges do not overlap), and the per-round ratios to QEMU. Also reads the one-VMM-per-column
JSON of earlier runs (key "vmms", no "configs").

Usage: table.py BLK.json
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from markdown import footer, spread, table  # noqa: E402
from results import json_path, load  # noqa: E402

FIGURES = [("iops", "IOPS", "{:.0f}"), ("lat_mean_us", "mean latency (µs)", "{:.0f}"),
           ("lat_p99_us", "p99 latency (µs)", "{:.0f}"),
           ("cpu_us_per_io", "host CPU per I/O, VMM + back-end (µs; includes guest mode)", "{:.0f}"),
           ("cpu_us_per_io_outside_guest", "host CPU per I/O outside guest mode, VMM + back-end (µs)", "{:.0f}"),
           ("backend_us_per_io", "of which the back-end process (µs per I/O)", "{:.0f}"),
           ("guest_mode_us_per_io", "host CPU per I/O in guest mode (µs; the VMM's guest_time)", "{:.0f}"),
           ("exits_per_io", "KVM exits per I/O (every guest exit, also those KVM handles itself)", "{:.2f}"),
           ("vmm_exits_per_io", "exits to the VMM (port I/O + MMIO) per I/O", "{:.2f}"),
           ("mmio_exits_per_io", "MMIO exits to the VMM per I/O", "{:.2f}"),
           ("io_exits_per_io", "port I/O exits to the VMM per I/O", "{:.2f}"),
           ("halt_exits_per_io", "halt exits per I/O", "{:.2f}"),
           ("irq_injections_per_io", "interrupts injected per I/O", "{:.2f}"),
           ("kicks_per_io", "kicks (virtio notify writes) per I/O (test host's hist triggers; by exit reason below)", "{:.2f}"),
           ("irq_device_per_io", "device interrupts injected per I/O (kvm_inj_virq, vectors 0x20-0xeb: no timer)", "{:.2f}"),
           ("eoi_per_io", "EOIs per I/O (kvm_eoi: every EOI, paravirtual ones included)", "{:.2f}"),
           ("eoi_exits_per_io", "EOIs that exited per I/O (x2APIC MSR 0x80b writes + xAPIC EOI writes)", "{:.2f}"),
           ("l1_host_share", "share of a host core the test host had during the job", "{:.2f}"),
           ("iops_per_core", "IOPS / that share (estimate: as if the test host had had a whole core)", "{:.0f}")]
# Issue 16's checks (summarize.py ISSUE16), as column titles.
CHECKS16 = [("iops_2x", "IOPS ≥ 2x qemu (QD ≥ 4)"), ("exits_half", "exits/I/O ≤ 0.5x qemu"),
            ("cpu_guest_mode", "CPU/I/O in guest mode ≤ qemu"), ("cpu_outside_guest", "CPU/I/O outside guest ≤ qemu"),
            ("qd1_lat_mean", "QD1 mean lat. ≤ baseline"), ("qd1_lat_p99", "QD1 p99 lat. ≤ baseline")]
# Exit reasons under this many per I/O in every configuration of a job go to "other".
REASON_MIN = 0.02
GOALS = {"within10": "within 10% of", "within25": "within 25% of", "ahead": "ahead of",
         "ahead1.5": "at least 1.5x", None: "against"}


def cell(c, job, key, fmt, collapse):
    return spread(c["jobs"].get(job, {}).get("stats", {}).get(key), fmt, collapse=collapse)


def verdict_cell(v, fmt="{:.2f}"):
    if not v:
        return "n/a"
    if v["better"] is None:
        return f"{fmt.format(v['ratio_of_medians'])}x, one round" if v["ranges"].startswith("one") else \
            "no measurable difference"
    return f"{fmt.format(v['ratio_of_medians'])}x ({'better' if v['better'] else 'worse'})"


def reason_tables(r, cfgs, names, jobs, collapse):
    """Per random read/write job: exits per I/O by SVM exit reason (rows) per configuration (columns),
    then the other traced figures per I/O."""
    printed = False
    for job in jobs:
        if not job.startswith(("randread-", "randwrite-")):
            continue
        st = {n: cfgs[n]["jobs"].get(job, {}).get("stats", {}) for n in names}
        have = [n for n in names if st[n].get("exit_reasons_per_io")]
        if not have:
            continue
        reasons = {}
        for n in have:
            for k, v in st[n]["exit_reasons_per_io"].items():
                reasons[k] = max(reasons.get(k, 0), v["median"])
        main_r = [k for k, v in sorted(reasons.items(), key=lambda kv: -kv[1]) if v >= REASON_MIN]
        rows = [[k] + [spread(st[n]["exit_reasons_per_io"].get(k), "{:.2f}") for n in have]
                for k in main_r]
        other = [k for k in reasons if k not in main_r]
        if other:
            rows.append([f"other ({', '.join(sorted(other))})"] +
                        [f"{sum(st[n]['exit_reasons_per_io'].get(k, {}).get('median', 0) for k in other):.2f}" for n in have])
        rows.append(["**all exits (hist, traced rounds)**"] + [spread(st[n].get("traced_exits_per_io"), "{:.2f}") for n in have])
        rows.append(["all exits (KVM debugfs, timed rounds)"] + [spread(st[n].get("exits_per_io"), "{:.2f}", collapse=collapse) for n in have])
        for key, title in [("kicks_per_io", "kicks (notify writes)"), ("inj_virq_per_io", "interrupts injected"),
                           ("irq_device_per_io", "- device (0x20-0xeb)"), ("irq_timer_per_io", "- timer (0xec)"),
                           ("eoi_per_io", "EOIs"), ("pv_eoi_per_io", "- paravirtual (no exit)"),
                           ("eoi_exits_per_io", "- exiting (MSR 0x80b / xAPIC)"), ("wakeups_per_io", "HLT wakeups"),
                           ("userspace_exits_per_io", "returns to the VMM")]:
            rows.append([title] + [spread(st[n].get(key), "{:.2f}") for n in have])
        rows.append(["IOPS traced / untraced (the triggers' cost)"] +
                    [f"{st[n]['traced_iops']['median'] / st[n]['iops']['median']:.2f}"
                     if st[n].get("traced_iops") and (st[n].get("iops") or {}).get("median") else "n/a" for n in have])
        if not printed:
            untraced = [n for n in names if cfgs[n].get("kvm_trace") is False]
            tr = r.get("kvm_trace_rounds")
            print("**Exits per I/O by exit reason** (the test host's hist triggers on KVM's tracepoints, the "
                  "VMM's threads only, bench/lib/kvm_trace.sh"
                  + (f"; from {tr} traced round(s) after the timed ones, median (min-max) over those" if tr else "")
                  + "; SVM exit reasons as kvm_exit prints them: npf = "
                  "nested page fault, here the MMIO notify doorbell; msr = MSR access (x2APIC EOI, timer); "
                  "interrupt = a host interrupt; vintr = interrupt window; hlt; io = port I/O (the serial console "
                  f"line that ends the job); reasons under {REASON_MIN} per I/O everywhere are in \"other\""
                  + (f"; run without the triggers: {', '.join(untraced)}" if untraced else "") + "):\n")
            printed = True
        print(f"{job}:\n")
        print("\n".join(table(["per I/O"] + have, "l" + "r" * len(have), rows)) + "\n")


def goal_cell(v):
    """A goal's verdict with the per-round IOPS ratios' min-max it rests on."""
    pr = v.get("iops_per_round")
    rng = f" ({pr['min']:.2f}-{pr['max']:.2f})" if pr and pr.get("n", 0) > 1 else ""
    return (v.get("goal") or "n/a") + (rng if v.get("goal") else "")


def issue16_tables(r, cfgs, collapse):
    """Issue 16's verdicts: per tern configuration a row per job, a column per check."""
    for g in r.get("goals_issue16") or []:
        a = g["config"]
        print(f"**Issue 16 goals: {a} vs qemu** (same run; QD1 latency vs the baseline "
              f"{g.get('baseline') or '(none named: --baseline NAME, or a tern-before configuration)'}; "
              "each cell: ratio of the medians, the per-round ratios' min-max, then the verdict; a ratio is "
              "claimed only when the min-max ranges do not overlap (\"not shown\": they overlap), and a factor goal "
              "(2x, 0.5x) is met only when every round's ratio meets it (\"not shown\": the rounds disagree)):\n")
        rows = []
        for job, checks in g["jobs"].items():
            cells = []
            for check, _ in CHECKS16:
                v = checks.get(check)
                pr = (v or {}).get("per_round")
                rng = f" ({pr['min']:.2f}-{pr['max']:.2f})" if pr and pr.get("n", 0) > 1 else ""
                cells.append(f"{v['ratio_of_medians']:.2f}x{rng} {v['goal']}" if v else "")
            rows.append([job] + cells)
        print("\n".join(table(["job"] + [t for _, t in CHECKS16], "l" + "r" * len(CHECKS16), rows)) + "\n")


def main():
    path = json_path(__file__, None)
    r = load(path)
    if "configs" not in r:
        sys.exit(f"{path}: an earlier run's JSON (no 'configs'); its tables are next to it (blk.md)")
    g = r["guest"]
    rounds = r.get("rounds", 1)
    collapse = rounds == 1
    cfgs = {n: c for n, c in r["configs"].items() if not c.get("skipped")}
    names = list(cfgs)
    jobs = list(r["method"]["jobs"])
    builds = sorted({(c["binary"]["path"], c["binary"].get("git_describe") or "?", c["binary"]["sha256"][:12])
                     for c in r["configs"].values() if c.get("binary")})
    where = {"test-host": "in the nested test host", "direct": "directly on this machine"}
    print(f"Ran {where.get(r.get('where', 'test-host'))}. "
          f"fio in the guest ({g['fio_engine']}, direct I/O, {g['runtime_s']} s per point) on {g['disk']}; "
          f"kernel {r['kernel']}, {g['memory_mib']} MiB, {g['vcpus']} vCPU; bench scripts {r.get('git_rev', '?')}"
          + "".join(f"; tern {p} = {d} (sha256 {s})" for p, d, s in builds) + "."
          + (f" Test host's shmem_enabled: {r['l1']['shmem_enabled']}." if r.get("l1", {}).get("shmem_enabled") else "")
          + (f" {rounds} rounds ({r['method']['order']}); median (min-max) over the rounds." if rounds > 1 else "")
          + "\n")
    print("\n".join(table(["configuration", "what serves the disk", "status"], "lll",
                          [[n, c["description"], c.get("skipped") and f"skipped: {c['skipped']}" or c["status"]]
                           for n, c in r["configs"].items()])) + "\n")

    for key, title, fmt in FIGURES:
        rows = [[job] + [cell(cfgs[n], job, key, fmt, collapse) for n in names] for job in jobs]
        if all(x == "n/a" for row in rows for x in row[1:]):
            continue
        print(f"{title}:\n")
        print("\n".join(table(["job"] + names, "l" + "r" * len(names), rows)) + "\n")

    reason_tables(r, cfgs, names, jobs, collapse)
    issue16_tables(r, cfgs, collapse)

    for gl in r.get("goals") or []:
        a, b = gl["config"], gl["reference"]
        print(f"**{a} {GOALS[gl['goal']]} {b}** (a ratio is claimed only when the min-max ranges of the two "
              "do not overlap; CPU: lower is better; goal: met only when every round's IOPS ratio (same round) "
              "meets it, its min-max over the rounds in brackets):\n")
        rows = []
        for job in jobs:
            v = gl["jobs"].get(job) or {}
            rows.append([job, cell(cfgs[a], job, "iops", "{:.0f}", collapse), cell(cfgs[b], job, "iops", "{:.0f}", collapse),
                         verdict_cell(v.get("iops")), cell(cfgs[a], job, "cpu_us_per_io", "{:.0f}", collapse),
                         cell(cfgs[b], job, "cpu_us_per_io", "{:.0f}", collapse), verdict_cell(v.get("cpu_us_per_io"))]
                        + ([goal_cell(v)] if gl["goal"] else []))
        hdr = ["job", f"{a} IOPS", f"{b} IOPS", "IOPS", f"{a} CPU/I/O (µs)", f"{b} CPU/I/O (µs)", "CPU/I/O"]
        print("\n".join(table(hdr + (["goal"] if gl["goal"] else []), "l" + "r" * (len(hdr) - 1) + ("l" if gl["goal"] else ""), rows)) + "\n")

    vs = r.get("vs") or {}
    others = [n for n in names if "qemu" in vs.get(n, {})]
    if others:
        print("IOPS over QEMU's (built-in virtio-blk-pci) in the same round"
              + (" (median (min-max) of the per-round ratios)" if rounds > 1 else "") + ":\n")
        rows = [[job] + [spread(vs[o]["qemu"].get(job, {}).get("iops"), "{:.2f}", collapse=collapse) for o in others]
                for job in jobs]
        print("\n".join(table(["job"] + [f"{o} / qemu" for o in others], "l" + "r" * len(others), rows)) + "\n")

    others = [n for n in names if "host" in vs.get(n, {})]
    if others:
        print("IOPS as a share of the host row (fio on the disk file without a VMM: the ceiling) in the same round"
              + (" (median (min-max) of the per-round ratios)" if rounds > 1 else "") + ":\n")
        rows = [[job] + [spread(vs[o]["host"].get(job, {}).get("iops"), "{:.2f}", collapse=collapse) for o in others]
                for job in jobs]
        print("\n".join(table(["job"] + [f"{o} / host" for o in others], "l" + "r" * len(others), rows)) + "\n")

    for n, c in r["configs"].items():
        if c.get("command"):
            print(f"- **{n}**: `{c['command']}`" + (f"; back-end: `{c['backend_command']}`" if c.get("backend_command") else "")
                  + (f" (--tern-extra {c['tern_extra']})" if c.get("tern_extra") else ""))
        for e in c.get("errors") or []:
            print(f"  - error: {e}")
    print()
    print(footer(r, path))


if __name__ == "__main__":
    main()
