#!/usr/bin/env python3
"""bench/kernel-exits: KEX-BENCH lines of console.log -> kernel-exits.json + kernel-exits.md.
Usage: summarize.py CONSOLE.LOG OUTDIR REV"""
import json, re, statistics, sys

log, outdir, rev = sys.argv[1], sys.argv[2], sys.argv[3]
text = open(log, errors="replace").read().replace("\r", "")
runs = [dict(kv.split("=", 1) for kv in m.group(1).split())
        for m in re.finditer(r"^KEX-BENCH (round=.*)$", text, re.M)]
bad = [r for r in runs if r["rc"] != "0" or r["marker"] != "1"]
if not runs or bad:
    sys.exit("summarize: %d runs, failed: %r" % (len(runs), bad[:3]))
by = {(r["round"], r["mode"], r["kind"], int(r["loops"])): r for r in runs}
loops = max(int(r["loops"]) for r in runs)
rounds = sorted({r["round"] for r in runs}, key=int)
def stats(xs):
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs), "values": xs}
res = {"rev": rev, "loops": loops, "rounds": len(rounds), "kinds": {}}
for kind in ("cpuid", "pio"):
    per = {}
    for mode in ("off", "on"):
        per[mode] = [(int(by[(rd, mode, kind, loops)]["wall_ns"]) - int(by[(rd, mode, kind, 0)]["wall_ns"])) / loops
                     for rd in rounds]
    over = [on - off for on, off in zip(per["on"], per["off"])]
    counted = [int(by[(rd, "on", kind, loops)]["counted"]) for rd in rounds]
    base = {m: [int(by[(rd, m, kind, 0)]["wall_ns"]) / 1e6 for rd in rounds] for m in ("off", "on")}
    res["kinds"][kind] = {"ns_per_exit_off": stats(per["off"]), "ns_per_exit_on": stats(per["on"]),
                          "overhead_ns_per_exit": stats(over), "counted_on": counted,
                          "zero_loop_run_ms_off": stats(base["off"]), "zero_loop_run_ms_on": stats(base["on"])}
json.dump(res, open(outdir + "/kernel-exits.json", "w"), indent=1)
def f(s, nd=0):
    return "%.*f (%.*f–%.*f)" % (nd, s["median"], nd, s["min"], nd, s["max"])
md = ["# In-kernel exit accounting: cost per exit (bench/kernel-exits, rev %s)" % rev, "",
      "Nested test host (QEMU TCG, SVM), tern, tiny PVH guest, 1 vCPU; %d exits per timed run, %d interleaved "
      "rounds; ns per exit = (wall(N) - wall(0)) / N; medians (min–max)." % (loops, len(rounds)), "",
      "| exit kind | off: ns/exit | on: ns/exit | overhead ns/exit (on − off) | exits counted (on) | 0-loop run ms off / on |",
      "| --- | --- | --- | --- | --- | --- |"]
for kind, k in res["kinds"].items():
    md.append("| %s | %s | %s | %s | %s | %s / %s |" % (
        kind, f(k["ns_per_exit_off"]), f(k["ns_per_exit_on"]), f(k["overhead_ns_per_exit"]),
        ", ".join(map(str, k["counted_on"])), f(k["zero_loop_run_ms_off"]), f(k["zero_loop_run_ms_on"])))
open(outdir + "/kernel-exits.md", "w").write("\n".join(md) + "\n")
print("\n".join(md))
