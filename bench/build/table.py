#!/usr/bin/env python3
"""Prints Markdown tables (for docs) from bench/build's build.json: per configuration the build time
(median (min-max) over the rounds), its ratio to the host row and to QEMU with the same disk, the
VMM's host CPU in and outside guest mode, KVM's exits per second of build, tern's own exits by reason
per second; then the issue's goals and any errors.

Usage: table.py BUILD.json
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from markdown import footer, spread, table  # noqa: E402
from results import json_path, load  # noqa: E402

EXITS = [("exits_per_s", "KVM exits"), ("io_exits_per_s", "port I/O"), ("mmio_exits_per_s", "MMIO"),
         ("halt_exits_per_s", "halt"), ("irq_exits_per_s", "external interrupt"),
         ("irq_injections_per_s", "interrupts injected")]


def cell(c, key, fmt="{:.1f}"):
    return spread(c["stats"].get(key), fmt, collapse=False)


def qemu_cell(r, name):
    v = r["vs_qemu"].get(name)
    if not v or not v.get(r["time_key"]):
        return "—"
    verdict = v[r["time_key"]]
    if verdict["better"] is None:
        return f"{verdict['ratio_of_medians']:.2f}x: {verdict['ranges']}"
    return f"{verdict['ratio_of_medians']:.2f}x ({spread(v['per_round_ratio'], '{:.2f}', collapse=False)})"


def main():
    path = json_path(__file__, None)
    r = load(path)
    sl, g = r["slice"], r["guest"]
    cfgs = r["configs"]
    binary = next((c["binary"] for c in cfgs.values() if c.get("binary")), None)
    print(f"`make -j{sl['jobs']:.0f}` of {sl['objects']} object files ({', '.join(sl['list'])}) of {sl['source']}; "
          f"gcc {sl['gcc']}, {(sl['make'] or '?').replace('_', ' ')}. Guest: {g['vcpus']} vCPUs, {g['memory_mib']} MiB, "
          f"kernel {r['kernel']}; the test host: {r['l1'].get('l1_cpus', '?')} vCPU, {r['l1'].get('l1_mem_mib', '?')} MiB. "
          f"{r['rounds']} interleaved rounds ({', '.join(r['order'])}); median (min-max) over the rounds; "
          f"ratios per round (to the same round's host or QEMU run), median (min-max). Bench scripts {r['git_rev']}"
          + (f"; tern {binary['git_describe']} (sha256 {binary['sha256'][:12]})" if binary else "") + ".\n")

    rows = []
    for n, c in cfgs.items():
        vh, vc = r["vs_host"].get(n), r.get("vs_host_l1_cpu", {}).get(n)
        rows.append([n, cell(c, "make_s"), cell(c, "wall_s"),
                     spread(vh, "{:.2f}", collapse=False) if vh else "—", qemu_cell(r, n), cell(c, "l1_host_cpu_s"),
                     spread(vc, "{:.2f}", collapse=False) if vc else "—",
                     cell(c, "vmm_cpu_s"), cell(c, "vmm_guest_s"), cell(c, "vmm_outside_guest_s"),
                     cell(c, "vmm_cores", "{:.2f}"), cell(c, "boot_s", "{:.0f}"), cell(c, "l1_host_share", "{:.2f}"),
                     c["status"]])
    print("\n".join(f"- **{n}**: {c['description']}" for n, c in cfgs.items()) + "\n")
    print("\n".join(table(["configuration", "build (s)", "test host's clock (s)", "guest/host",
                           "tern/QEMU", "test host's host CPU (s)", "guest/host by it", "VMM CPU (s)", "of it in guest mode (s)", "outside guest mode (s)",
                           "VMM cores", "boot (s)", "test host's share of a host core", "status"],
                          "lrrrrrrrrrrrrl", rows)) + "\n")

    vms = {n: c for n, c in cfgs.items() if c["vmm"] != "host"}
    if any("exits_per_s" in c["stats"] for c in vms.values()):
        print("KVM exits per second of build (the test host's debugfs counters of the VM, summed over its vCPUs):\n")
        print("\n".join(table(["configuration"] + [t for _, t in EXITS], "l" + "r" * len(EXITS),
                              [[n] + [cell(c, k, "{:.0f}") for k, _ in EXITS] for n, c in vms.items()])) + "\n")
    terns = {n: c for n, c in vms.items() if any(k.startswith("tern_KVM_EXIT") for k in c["stats"])}
    if terns:
        reasons = sorted({k for c in terns.values() for k in c["stats"] if k.startswith("tern_KVM_EXIT")})
        print("tern's own exit accounting per second of build (exits that returned to tern, by reason; GET /tern/stats):\n")
        print("\n".join(table(["configuration"] + [k[len("tern_KVM_EXIT_"):-len("_per_s")] for k in reasons],
                              "l" + "r" * len(reasons),
                              [[n] + [cell(c, k, "{:.1f}") for k in reasons] for n, c in terns.items()])) + "\n")

    if r["goals"]:
        print("Goals (a difference is claimed only when the min-max ranges do not overlap):\n")
        for gl in r["goals"]:
            ratio = lambda k: spread(gl.get(k), "{:.2f}", collapse=False)  # noqa: E731
            print(f"- **{gl['config']}**: {gl['goal']}: by build time **{gl['verdict']}** (per-round ratio "
                  f"{ratio('per_round_ratio')}); by the test host's host CPU per build **{gl.get('by_l1_host_cpu')}** "
                  f"({ratio('per_round_ratio_l1_host_cpu')})")
        print()
    for n, c in cfgs.items():
        for e in c.get("errors") or []:
            print(f"- {n}: error: {e}")
    print(footer(r, path))


if __name__ == "__main__":
    main()
