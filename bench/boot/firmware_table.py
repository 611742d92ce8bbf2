#!/usr/bin/env python3
"""Prints Markdown tables (for docs) from a bench/boot/firmware.sh results JSON (DIR/firmware.json).

Usage: firmware_table.py FIRMWARE.json
Times per row with the tern/QEMU verdicts and the issue's goals (time <= 0.7x, exits to userspace
<= 0.5x QEMU's with the same firmware file), then the exits to userspace by reason, the PIO ports and
MMIO regions with the most exits, and tern's own accounting by device, each at GRUB's menu and at
the marker.
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from markdown import spread, table  # noqa: E402
from results import json_path, load  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from table import closing  # noqa: E402

TIMES = (("to_firmware_banner_ms", "to firmware banner"), ("to_grub_menu_ms", "to GRUB menu"),
         ("to_linux_ms", "to \"Linux version\""), ("to_marker_ms", "to marker"), ("to_login_ms", "to login prompt"),
         ("l1_host_cpu_to_marker_ms", "test host CPU to marker"))


def verdict_text(v):
    if not v:
        return "n/a"
    if v.get("ranges") in ("lower", "higher"):
        return f"**{v['ratio_of_medians']:.2f}x** ({'faster' if v['ranges'] == 'lower' else 'slower'}: ranges do not overlap)"
    return f"{v['ratio_of_medians']:.2f}x" + (f" ({v['ranges']})" if v.get("ranges") else "")


def goals(r):
    g = r["goals"]
    for pair, c in r["comparisons"].items():
        for key, label, limit in (("to_grub_menu_ms", "time to GRUB menu", g["time_ratio_max"]),
                                  ("to_marker_ms", "time to marker", g["time_ratio_max"]),
                                  ("userspace_exits_total_at_grub", "exits to userspace to GRUB menu",
                                   g["userspace_exits_ratio_max"]),
                                  ("userspace_exits_total_at_marker", "exits to userspace to marker",
                                   g["userspace_exits_ratio_max"])):
            v = c.get(key)
            if v:
                met = "met" if v["ratio_of_medians"] <= limit else "**not met**"
                print(f"- goal {pair}, {label} <= {limit}x: {met} ({verdict_text(v)})")


def exits_tables(r, phase, top=12):
    ex = {n: (e.get(phase) or {}).get("median") for n, e in r["exits"].items()}
    ex = {n: e for n, e in ex.items() if e}
    if not ex:
        return
    boots = sorted({r["exits"][n][phase]["boots"] for n in ex})
    where = {"grub": "from the VMM's exec to GRUB's menu", "marker": "from the VMM's exec to the marker"}[phase]
    print(f"\n**Exits {where}** ({'/'.join(map(str, boots))} traced boot(s) per row; the test host's hist "
          "triggers; medians)\n")
    reasons = sorted({k for e in ex.values() for k in e["userspace_exits"]},
                     key=lambda k: -sum(e["userspace_exits"].get(k, 0) for e in ex.values()))
    rows = [[n, f"{(e['userspace_exits_total'] or {}).get('median', 0):.0f}",
             *(f"{e['userspace_exits'].get(k, 0):.0f}" for k in reasons),
             f"{(e['kernel_exits_total'] or {}).get('median', 0):.0f}",
             spread(e.get("read_at_ms"), collapse=True)] for n, e in ex.items()]
    print("\n".join(table(["VMM", "exits to userspace", *reasons, "in-kernel exits (all)", "read at (ms)"],
                          "l" + "r" * (len(reasons) + 3), rows)))
    for section, title in (("pio", "PIO exits by port (in-kernel ones included)"),
                           ("mmio", "MMIO accesses by region (kvm_mmio)")):
        keys = sorted({k for e in ex.values() for k in e[section]},
                      key=lambda k: -max(e[section].get(k, 0) for e in ex.values()))[:top]
        if not keys:
            continue
        print(f"\n{title}, top {len(keys)}:\n")
        rows = [[k, *(f"{e[section].get(k, 0):.0f}" for e in ex.values())] for k in keys]
        print("\n".join(table(["port / region", *ex], "l" + "r" * len(ex), rows)))


def tern_devices(r):
    """tern's own accounting per boot: timed boots (to exit after poweroff) and traced ones (run tN:
    SIGTERM right after the marker)."""
    for name, e in r["exits"].items():
        rows = []
        for run, s in sorted((e.get("tern_stats_on_exit") or {}).items()):
            if not s:
                continue
            what = f"traced boot {run[1:]}, to the marker" if run.startswith("t") else f"timed boot {run}, to exit"
            dev = s.get("accesses_by_device") or {}
            ht = s.get("handler_time_s") or {}
            rows.append([what, ", ".join(f"{k} {v}" for k, v in (s.get("exits_by_reason") or {}).items()),
                         ", ".join(f"{k} {v}" for k, v in list(dev.items())[:6]),
                         ", ".join(f"{k} {v:.1f}" for k, v in list(ht.items())[:3])])
        if rows:
            print(f"\n{name}, tern's own accounting (`--stats-on-exit`):\n")
            print("\n".join(table(["boot", "exits by reason", "PIO/MMIO accesses by device (top 6)",
                                    "time in device handlers, s (top 3)"], "llll", rows)))


def main():
    path = json_path(__file__, None)
    r = load(path)
    g = r["guest"]
    print(f"Build {r.get('git_rev') or 'unknown'}; {r['date']}; test host kernel {r['kernel']}; firmware family "
          f"{r['family']}; {g['vcpus']} vCPU, {g['memory_mib']} MiB, the image from virtio-blk; {r['rounds']} "
          "interleaved rounds; medians (min-max), ms of the test host's clock from the VMM's exec.\n")
    rows = []
    for name, v in r["vmms"].items():
        rows.append([name, *(spread(v.get(k), collapse=False) for k, _ in TIMES),
                     ", ".join(v.get("marker_states") or []) + (f" {v['error']}"[:160] if v.get("error") else "")])
    print("\n".join(table(["VMM", *(label for _, label in TIMES), "marker / note"], "l" + "r" * len(TIMES) + "l", rows)))
    print()
    for pair, c in r["comparisons"].items():
        parts = [f"{label} {verdict_text(c.get(k))}" for k, label in TIMES if c.get(k)]
        print(f"- {pair}: " + "; ".join(parts))
    goals(r)
    for phase in ("grub", "marker"):
        exits_tables(r, phase)
    tern_devices(r)
    cmds = [f"- {n}: `{v['command']}`" for n, v in r["vmms"].items() if v.get("command")]
    if cmds:
        print("\nCommands (in the test host):\n\n" + "\n".join(cmds))
    print("\n" + closing(r, path))


if __name__ == "__main__":
    main()
