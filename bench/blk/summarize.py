#!/usr/bin/env python3
"""Turns bench/blk's results directory (read from the test host's disk) into JSON (stdout).

Usage: summarize.py RESULTS_DIR --log LOG --kernel VERSION --runtime S --engine E --data-mib N
                    --jobs jobs.txt [--only NAME,...] --configs "qemu qemu-qsd tern ..." [--rounds N]
                    [--git-rev REV] [--stamps FILE] [--tern NAME=PATH]... [--where test-host|direct]
                    [--test-host DESC] [--host-load DESC] [--tern-extra NAME=OPTS]... [--tern-disk OPTS]
                    [--kvm-trace on|off] [--kvm-trace-off "CFG ..."] [--baseline CFG]
RESULTS_DIR/<config>/<round>/ (rounds 1..N) holds status ("rc=N jobs=M" or "skipped=<why>"), cpu.txt
("<job> begin|end vmm_utime vmm_stime vmm_guest be_utime be_stime l1_busy l1_total", clock ticks in
the test host; older runs have the first three only), exits.txt ("<job> begin|end exits io_exits
mmio_exits halt_exits irq_exits irq_injections", KVM's per-VM counters; "-" unreadable; runs before
the NVMe rows have none), fio.json (fio's report, every job; older runs: <job>.json, one per job)
and backend.txt, and with the hist triggers trace.txt ("<job> begin|end EVENT KEYS COUNT",
bench/lib/kvm_trace.sh; figures by bench/lib/kvm_trace.py).
--tern NAME=PATH records which binary NAME was (path, sha256, git describe of its tree);
--tern-extra NAME=OPTS its extra disk options; --tern-disk, --kvm-trace, --kvm-trace-off are recorded;
--baseline CFG is issue 16's QD1 latency reference ("goals_issue16").
Each job's figures are per round ("rounds"); "stats" has median/min/max over the rounds of each.
"vs" has each configuration's per-round ratio to the reference configurations (qemu, qemu-qsd, the
first tern's built-in disk); "goals" the issue's comparisons with a verdict that claims a difference
only when the min-max ranges of the two configurations do not overlap, and calls a factor goal (2x,
1.5x, within 10%...) met only when every round's ratio (same round) meets it.

summarize.py --regoal blk.json recomputes "goals" and "goals_issue16" of an existing JSON from its
per-round figures (stdout), e.g. after a change to the rule.
"""
import argparse
import json
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from console_fields import fields, stats  # noqa: E402
from results import add_common_args, stamp  # noqa: E402
from compare import binary_info, factor_goal, verdict  # noqa: E402
from stamps import read_marks  # noqa: E402
from kvm_trace import TRACE_KEYS, per_io as trace_per_io, read_trace  # noqa: E402

CLK_TCK = 100  # USER_HZ on x86 Linux: the unit of /proc/PID/stat times
BACKENDS = {"none": "the VMM's own virtio-blk", "qsd": "qemu-storage-daemon (vhost-user-blk export)",
            "vub": "tern vhost-user-blk"}
GUEST_DISK = {"virtio": "/dev/vda", "nvme": "/dev/nvme0n1", "ide": "/dev/sda"}
# KVM's per-VM counters in exits.txt, in its order; each becomes <name>_per_io.
EXIT_STATS = ["exits", "io_exits", "mmio_exits", "halt_exits", "irq_exits", "irq_injections"]


IMAGES = {"raw": "blk.raw", "qcow2": "blk.qcow2 (qcow2, every cluster allocated)",
          "qcow2new": "a fresh empty qcow2 image (writes allocate)"}


def image_of(cfg, terns):
    """(the configuration without its image suffix, image): raw, or qcow2 / qcow2new for
    VMM[-...]-qcow2 / -qcow2new."""
    if cfg not in terns:
        for img in ("qcow2new", "qcow2"):
            if cfg.endswith("-" + img):
                return cfg[: -len(img) - 1], img
    return cfg, "raw"


def split_cfg(cfg, terns):
    """(vmm, backend, iface) of a configuration name: host, or VMM[-qsd|-vub|-nvme|-ide][-qcow2|-qcow2new]."""
    cfg = image_of(cfg, terns)[0]
    if cfg not in terns and cfg != "qemu":
        for b in ("qsd", "vub", "nvme", "ide"):
            if cfg.endswith("-" + b):
                return (cfg[: -len(b) - 1], b, "virtio") if b in ("qsd", "vub") else (cfg[: -len(b) - 1], "none", b)
    return cfg, "none", "virtio"


def describe(cfg, vmm, backend, iface, first_tern):
    if vmm == "host":
        return "no VMM: fio in the machine that runs the VMMs, on the disk file itself"
    if iface != "virtio":
        return {("qemu", "nvme"): "QEMU emulated NVMe (-device nvme)",
                ("qemu", "ide"): "QEMU emulated IDE disk (-device ide-hd, PIIX3, guest ata_piix)"}.get(
            (vmm, iface), f"{vmm} emulated NVMe controller (--disk ...,interface=nvme)")
    front = ("QEMU virtio-blk-pci" if vmm == "qemu" else f"{vmm} built-in virtio-blk") if backend == "none" else \
        ("QEMU vhost-user-blk-pci" if vmm == "qemu" else f"{vmm} vhost-user-blk front-end")
    if backend == "none":
        return front
    return front + " + " + (BACKENDS["qsd"] if backend == "qsd" else
                            f"{vmm if vmm != 'qemu' else first_tern} vhost-user-blk back-end")


def job_list(path, only):
    prefixes = [p for p in (only or "").split(",") if p]
    jobs = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith("#"):
                name, _, opts = line.partition(" ")
                if not prefixes or any(name == p or name.startswith(p + "-") for p in prefixes):
                    jobs.append((name, " ".join(opts.split())))
    return jobs


def side(d):
    """The read or write half of a fio job report, in µs."""
    lat = d.get("lat_ns", {})
    pct = lat.get("percentile", {})
    p99 = next((v for k, v in pct.items() if k.startswith("99.000")), None)
    return {"iops": d["iops"], "ios": d["total_ios"], "lat_mean_us": lat.get("mean", 0) / 1000,
            "lat_p99_us": None if p99 is None else p99 / 1000}


def read_cpu(path):
    """{job: {"begin": (8 ints), "end": (...)}} in ticks (missing back-end/L1 fields as 0)."""
    cpu = {}
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                parts = line.split()
                if len(parts) in (5, 9) and parts[1] in ("begin", "end"):
                    vals = [int(x) for x in parts[2:]] + [0] * (9 - len(parts))
                    cpu.setdefault(parts[0], {})[parts[1]] = vals
    return cpu


def read_exits(path):
    """{job: {"begin": [EXIT_STATS values or None], "end": [...]}} from exits.txt."""
    ex = {}
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                parts = line.split()
                if len(parts) == 2 + len(EXIT_STATS) and parts[1] in ("begin", "end"):
                    ex.setdefault(parts[0], {})[parts[1]] = [int(x) if x.isdigit() else None for x in parts[2:]]
    return ex


def read_stamps(path):
    """{(cfg, round, job): l1_host_share} from stamp_cpu.py's BLK-MARK lines."""
    return {k: v["l1_host_share"] for k, v in read_marks(path, "BLK-MARK", ("cfg", "round", "job")).items()}


def job_result(j, cpu, share, backend, exits=None, trace=None):
    """The figures of one job (fio's report of it) in one round (flat: every value a number or None)."""
    r, w = side(j["read"]), side(j["write"])
    ios = r["ios"] + w["ios"]
    res = {"iops": round(r["iops"] + w["iops"], 1), "read_iops": round(r["iops"], 1), "write_iops": round(w["iops"], 1),
           "ios": ios,
           "lat_mean_us": round((r["lat_mean_us"] * r["ios"] + w["lat_mean_us"] * w["ios"]) / ios, 1) if ios else None,
           "lat_p99_us": max([x["lat_p99_us"] for x in (r, w) if x["ios"] and x["lat_p99_us"] is not None], default=None),
           "guest_cpu_pct": round(j["usr_cpu"] + j["sys_cpu"], 1), "fio_error": j.get("error", 0),
           "l1_host_share": share,
           "iops_per_core": round((r["iops"] + w["iops"]) / min(share, 1.0), 1) if share else None}
    if res["lat_p99_us"] is not None:
        res["lat_p99_us"] = round(res["lat_p99_us"], 1)
    if cpu and "begin" in cpu and "end" in cpu and ios:
        d = [b - a for a, b in zip(cpu["begin"], cpu["end"])]
        vmm_s, guest_s, be_s = (d[0] + d[1]) / CLK_TCK, d[2] / CLK_TCK, (d[3] + d[4]) / CLK_TCK
        per_io = lambda s: round(s * 1e6 / ios, 1)  # noqa: E731
        res.update({"vmm_cpu_s": vmm_s, "vmm_guest_mode_s": guest_s, "backend_cpu_s": be_s,
                    "cpu_us_per_io": per_io(vmm_s + be_s),
                    "cpu_us_per_io_outside_guest": per_io(max(vmm_s - guest_s, 0) + be_s),
                    "vmm_us_per_io": per_io(vmm_s), "vmm_us_per_io_outside_guest": per_io(max(vmm_s - guest_s, 0)),
                    "guest_mode_us_per_io": per_io(guest_s),
                    "backend_us_per_io": per_io(be_s) if backend != "none" else None})
        if d[6] > 0:
            res.update({"l1_busy_pct": round(100 * d[5] / d[6], 1), "l1_busy_us_per_io": per_io(d[5] / CLK_TCK)})
    if exits and "begin" in exits and "end" in exits and ios:
        for name, a, b in zip(EXIT_STATS, exits["begin"], exits["end"]):
            if a is not None and b is not None:
                res[f"{name}_per_io"] = round((b - a) / ios, 3)
        if "io_exits_per_io" in res and "mmio_exits_per_io" in res:  # the exits that reach the VMM
            res["vmm_exits_per_io"] = round(res["io_exits_per_io"] + res["mmio_exits_per_io"], 3)
    if ios:
        res.update(trace_per_io(trace, ios))  # the hist triggers' figures (bench/lib/kvm_trace.py)
    return res


# The counts per I/O (3 decimals; the other figures 1).
COUNT_WORDS = ("exits", "injections", "kicks", "eoi", "irq", "virq", "wakeups", "halt_polls", "mmio", "pio", "msr")


def round_stats(got, k):
    """stats() over the rounds of figure k; for a dict of figures (by reason, vector, ...) a dict of
    stats() per entry, an entry missing from a round that has the dict counting as 0."""
    digits = 3 if k == "l1_host_share" or ("us_per_io" not in k and any(w in k for w in COUNT_WORDS)) else 1
    vals = [g.get(k) if g else None for g in got]
    if any(isinstance(v, dict) for v in vals):
        subs = list(dict.fromkeys(s for v in vals if isinstance(v, dict) for s in v))
        out = {s: stats([v.get(s, 0) if isinstance(v, dict) else None for v in vals], digits=3) for s in subs}
        return dict(sorted(out.items(), key=lambda kv: -kv[1]["median"])) or None
    return stats(vals, digits=digits)


def read_round(d, jobs, stamps, key, backend):
    """status, {job: result}, errors of one configuration's boot (results/<cfg>/<round>/)."""
    sp = os.path.join(d, "status")
    status = open(sp).read().strip() if os.path.exists(sp) else "not run"
    cpu = read_cpu(os.path.join(d, "cpu.txt"))
    exits = read_exits(os.path.join(d, "exits.txt"))
    trace = read_trace(os.path.join(d, "trace.txt"))
    results, errors, reports = {}, [], {}
    try:  # fio.json: one report with every job; <job>.json: a report per job (runs before 2026-12-01)
        if os.path.exists(os.path.join(d, "fio.json")):
            with open(os.path.join(d, "fio.json")) as f:
                reports = {j["jobname"]: j for j in json.load(f)["jobs"]}
        for name, _ in jobs:
            p = os.path.join(d, name + ".json")
            if name not in reports and os.path.exists(p):
                with open(p) as f:
                    reports[name] = json.load(f)["jobs"][0]
    except (ValueError, KeyError, IndexError) as e:
        errors.append(f"unreadable fio report ({e})")
    for name, _ in jobs:
        if name in reports:
            try:
                results[name] = job_result(reports[name], cpu.get(name), stamps.get((*key, name)), backend,
                                           exits.get(name), trace.get(name))
            except (ValueError, KeyError, IndexError) as e:
                errors.append(f"{name}: unreadable fio report ({e})")
    return status, results, errors


# A goal: the configuration's IOPS at least FACTOR x the reference's. within*: a floor below the
# reference (overlapping ranges are consistent with it: "no measurable difference"); ahead*: a lead
# over it (overlapping ranges do not show one: "not shown").
GOAL_FACTORS = {"within10": 0.9, "within25": 0.75, "ahead": 1.0, "ahead1.5": 1.5}


def goal(kind, iops, per_round=None):
    """Whether an IOPS verdict meets the goal kind (GOAL_FACTORS): with the ranges apart, "met" /
    "not met" / "not shown" as the per-round ratios say (compare.factor_goal: met only when every
    round's ratio clears the factor, not the ratio of the medians); ranges overlapping: "no
    measurable difference" (within*) / "not shown" (ahead*); or "one round"."""
    if not iops or not kind:
        return None
    if iops["ranges"].startswith("one"):
        return "one round"
    if iops["better"] is None:
        return "no measurable difference" if kind.startswith("within") else "not shown"
    return factor_goal(per_round, GOAL_FACTORS[kind]) or "not shown"


def round_ratios(out, a, b, name, key):
    """stats() of configuration a's figure `key` over b's in each round (same round: interleaved), or None."""
    ra = (out[a]["jobs"].get(name) or {}).get("rounds") or []
    rb = (out[b]["jobs"].get(name) or {}).get("rounds") or []
    ratios = [round(x[key] / y[key], 3) for x, y in zip(ra, rb)
              if x and y and x.get(key) is not None and y.get(key)]
    return stats(ratios, digits=3) if ratios else None


# Issue 16's goals for each tern built-in virtio-blk configuration against QEMU's virtio-blk-pci (and
# the QD1 latency against a named baseline configuration, e.g. tern-before): (check, figure, which
# jobs, kind, factor). "atleast"/"atmost": a lead of at least/most FACTOR x the reference's median,
# claimed only when the min-max ranges do not overlap ("not shown" when they do); "notworse": not
# above the reference (overlapping ranges: "no measurable difference", consistent with the goal).
ISSUE16 = [("iops_2x", "iops", "qd>=4", "atleast", 2.0),
           ("exits_half", "exits_per_io", "all", "atmost", 0.5),
           ("cpu_guest_mode", "guest_mode_us_per_io", "all", "notworse", None),
           ("cpu_outside_guest", "cpu_us_per_io_outside_guest", "all", "notworse", None),
           ("qd1_lat_mean", "lat_mean_us", "qd1", "notworse", None),
           ("qd1_lat_p99", "lat_p99_us", "qd1", "notworse", None)]


def goal16(kind, factor, v, per_round=None):
    """The verdict of one issue-16 check from a compare.verdict() dict and the stats() of the
    per-round ratios: a factor goal is met only when every round's ratio meets it."""
    if not v:
        return None
    if v["ranges"].startswith("one"):
        return "one round"
    if kind == "notworse":
        return "no measurable difference" if v["better"] is None else ("met (better)" if v["better"] else "not met")
    if v["better"] is None:
        return "not shown"
    if not v["better"]:
        return "not met"
    return factor_goal(per_round, factor, at_least=kind == "atleast") or "not shown"


def issue16_goals(out, terns, jobs, baseline):
    """[{config, reference, baseline, jobs: {job: {check: verdict + goal}}}] for every tern built-in
    virtio-blk configuration that ran (not the baseline itself), against qemu."""
    res = []
    ok = lambda c: c in out and not out[c].get("skipped")  # noqa: E731
    if not ok("qemu"):
        return res
    for c in out:
        e = out[c]
        if e["vmm"] not in terns or e["backend"] != "none" or e["interface"] != "virtio" or not ok(c) or c == baseline:
            continue
        g = {"config": c, "reference": "qemu", "baseline": baseline if ok(baseline or "") else None, "jobs": {}}
        for name, _ in jobs:
            m = re.match(r"(randread|randwrite)-qd(\d+)$", name)
            if not m:
                continue
            qd = int(m.group(2))
            checks = {}
            for check, key, which, kind, factor in ISSUE16:
                if (which == "qd>=4" and qd < 4) or (which == "qd1" and qd != 1):
                    continue
                ref = g["baseline"] if which == "qd1" else "qemu"
                if not ref:
                    continue
                sa = (e["jobs"].get(name) or {}).get("stats", {})
                sb = (out[ref]["jobs"].get(name) or {}).get("stats", {})
                if key == "exits_per_io" and not (sa.get(key) and sb.get(key)):
                    key = "traced_exits_per_io"  # no debugfs counters: the hist trigger's count
                v = verdict(sa.get(key), sb.get(key), higher_is_better=key == "iops")
                if v:
                    per_round = round_ratios(out, c, ref, name, key)
                    checks[check] = dict(v, figure=key, reference=ref, per_round=per_round,
                                         goal=goal16(kind, factor, v, per_round))
            if checks:
                g["jobs"][name] = checks
        if g["jobs"]:
            res.append(g)
    return res


def issue_goals(out, jobs, first_tern):
    """The issues' goals: tern's NVMe at least 1.5x QEMU's and within 25% of tern's virtio-blk (issue
    12); the out-of-process path within 10% of tern's built-in device, ahead of QEMU's (issue 11)."""
    goals = []
    if not first_tern:
        return goals
    t = first_tern
    pairs = [(f"{t}-nvme", "qemu-nvme", "ahead1.5"), (f"{t}-nvme", t, "within25"),
             (f"{t}-vub", t, "within10"), (f"{t}-qsd", t, "within10"),
             (f"{t}-vub", "qemu-qsd", "ahead"), (f"{t}-qsd", "qemu-qsd", "ahead"),
             (t, "qemu", None), ("qemu-qsd", "qemu", None), ("qemu-nvme", "qemu", None),
             # issue 27: allocated qcow2 within 10% of tern's raw disk and ahead of QEMU's qcow2;
             # a fresh (allocating) image ahead of QEMU's.
             (f"{t}-qcow2", t, "within10"), (f"{t}-qcow2", "qemu-qcow2", "ahead"),
             (f"{t}-qcow2new", "qemu-qcow2new", "ahead")]
    for a, b, kind in pairs:
        if a not in out or b not in out or out[a].get("skipped") or out[b].get("skipped"):
            continue
        g = {"config": a, "reference": b, "goal": kind, "jobs": {}}
        for name, _ in jobs:
            ja, jb = out[a]["jobs"].get(name), out[b]["jobs"].get(name)
            if not ja or not jb:
                continue
            iops = verdict(ja["stats"].get("iops"), jb["stats"].get("iops"))
            cpu = verdict(ja["stats"].get("cpu_us_per_io"), jb["stats"].get("cpu_us_per_io"), False)
            per_round = round_ratios(out, a, b, name, "iops")
            g["jobs"][name] = {"iops": iops, "cpu_us_per_io": cpu, "iops_per_round": per_round,
                               "goal": goal(kind, iops, per_round)}
        goals.append(g)
    return goals


def regoal(path):
    """Recomputes "goals" and "goals_issue16" of a committed blk.json from its per-round figures (the
    raw results are not kept) and prints the JSON."""
    with open(path) as f:
        r = json.load(f)
    out = r["configs"]
    jobs = list(r["method"]["jobs"].items())
    # The first tern configuration in boot order (the run's first --tern binary).
    terns = [c for c in out if out[c]["vmm"] == c and c not in ("qemu", "host")]
    first_tern = terns[0] if terns else None
    if "goals" in r:
        r["goals"] = issue_goals(out, jobs, first_tern)
    if "goals_issue16" in r:
        r["goals_issue16"] = issue16_goals(out, sorted({e["vmm"] for e in out.values()} - {"qemu", "host"}),
                                           jobs, r.get("baseline") or "")
    if "goals_issue16" in r.get("method", {}):
        r["method"]["goals_issue16"] = r["method"]["goals_issue16"].replace(
            "a ratio is claimed only when the min-max ranges over the rounds do not overlap",
            GOALS16_RULE)
    print(json.dumps(r, indent=2, ensure_ascii=False))


def disk_options(cmd, backend_cmd):
    """The disk options a configuration really ran with: tern's --disk arguments (the back-end's
    too), QEMU's -drive/-device ones (from the BLK-CMD lines)."""
    words = []
    for text in (cmd, backend_cmd):
        words += re.findall(r"(?:--disk|-drive|-device|--blockdev|--export) (\S+)", text or "")
    return words


GOALS16_RULE = ("a ratio is claimed only when the min-max ranges over the rounds do not overlap, and a "
                "factor goal (2x, 0.5x) is met only when every round's ratio (same round) meets it")


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--regoal":
        regoal(sys.argv[2])
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("results")
    for a in ("--log", "--engine", "--jobs", "--configs"):
        ap.add_argument(a, required=True)
    ap.add_argument("--runtime", type=int, required=True)
    ap.add_argument("--data-mib", type=int, required=True)
    ap.add_argument("--only", default="")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--git-rev", default="unknown")
    ap.add_argument("--stamps")
    ap.add_argument("--tern", action="append", default=[], metavar="NAME=PATH")
    ap.add_argument("--where", default="test-host", choices=["test-host", "direct"])
    ap.add_argument("--tern-extra", action="append", default=[], metavar="NAME=OPTS")
    ap.add_argument("--tern-disk", default="cache=none,io=io_uring")
    ap.add_argument("--kvm-trace", default="on", choices=["on", "off"])
    ap.add_argument("--kvm-trace-off", default="", help="configurations run without the hist triggers")
    ap.add_argument("--kvm-trace-rounds", type=int, default=0, help="traced rounds after the --rounds timed ones")
    ap.add_argument("--baseline", default="", help="issue 16's QD1 latency baseline configuration "
                    "(default tern-before when it ran)")
    add_common_args(ap)
    args = ap.parse_args()
    configs = args.configs.split()
    binaries = dict(t.split("=", 1) for t in args.tern)
    extras = dict(t.split("=", 1) for t in args.tern_extra)
    terns = list(binaries) or sorted({split_cfg(c, [])[0] for c in configs} - {"qemu", "host"})
    first_tern = terns[0] if terns else None
    jobs = job_list(args.jobs, args.only)
    stamps = read_stamps(args.stamps)

    commands, backends, errors, l1 = {}, {}, {c: [] for c in configs}, {}
    with open(args.log, errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            m = re.match(r"BLK-CMD cfg=(\S+) (cmd|backend)=(.*)", line)
            if m:
                (commands if m.group(2) == "cmd" else backends)[m.group(1)] = m.group(3)
            m = re.match(r"BLK-(ERROR|WARN|FIO-ERROR) cfg=(\S+) (.*)", line)
            if m and m.group(2) in errors:
                errors[m.group(2)].append(m.group(3))
            if line.startswith("BLK-INFO"):
                l1 = fields(line)

    out, per_round, curves = {}, {}, {}
    for c in configs:
        vmm, backend, iface = split_cfg(c, terns)
        rounds = [read_round(os.path.join(args.results, c, str(i)), jobs, stamps, (c, str(i)), backend)
                  for i in range(1, args.rounds + 1)]
        # The traced rounds (after the timed ones): only their hist-trigger figures count, and
        # their IOPS and CPU as traced_iops / traced_cpu_us_per_io (what tracing cost).
        trounds = [read_round(os.path.join(args.results, c, str(i)), jobs, stamps, (c, str(i)), backend)
                   for i in range(args.rounds + 1, args.rounds + args.kvm_trace_rounds + 1)]
        statuses = [s for s, _, _ in rounds]
        status = statuses[0] if len(set(statuses)) == 1 else "; ".join(
            f"round {i}: {s}" for i, s in enumerate(statuses, 1))
        entry = {"vmm": vmm, "backend": backend, "interface": iface,
                 "guest_disk": None if vmm == "host" else GUEST_DISK[iface],
                 "image": image_of(c, terns)[1],
                 "description": describe(c, vmm, backend, iface, first_tern)
                 + ("" if image_of(c, terns)[1] == "raw" else ", disk " + IMAGES[image_of(c, terns)[1]]),
                 "command": commands.get(c), "backend_command": backends.get(c), "status": status,
                 "errors": (errors[c] + [f"round {i}: {e}" for i, (_, _, es) in enumerate(rounds + trounds, 1)
                                         for e in es])[:12],
                 "disk_options": disk_options(commands.get(c), backends.get(c)),
                 "kvm_trace": args.kvm_trace == "on" and c not in args.kvm_trace_off.split() and vmm != "host",
                 "trace_rounds_status": [s for s, _, _ in trounds],
                 "jobs": {}}
        if vmm in extras or (backend == "vub" and vmm == "qemu" and first_tern in extras):
            entry["tern_extra"] = extras[vmm if vmm in extras else first_tern]
        bin_name = vmm if vmm != "qemu" else (first_tern if backend == "vub" else None)
        if bin_name in binaries:
            entry["binary"] = binary_info(binaries[bin_name])
        if statuses[0].startswith("skipped="):
            entry["skipped"] = statuses[0][len("skipped="):]
        per_round[c] = [{j: {k: v for k, v in x.items() if k not in TRACE_KEYS} for j, x in res.items()}
                        for _, res, _ in rounds]
        traced = [{j: dict({k: v for k, v in x.items() if k in TRACE_KEYS}, traced_iops=x.get("iops"),
                           traced_cpu_us_per_io=x.get("cpu_us_per_io"))
                   for j, x in res.items()} for _, res, _ in trounds]
        for name, _ in jobs:
            got = [res.get(name) for res in per_round[c]]
            tgot = [res.get(name) for res in traced]
            if not any(got) and not any(tgot):
                continue
            keys = list(dict.fromkeys(k for g in got if g for k in g))
            st = {k: round_stats(got, k) for k in keys}
            st.update({k: round_stats(tgot, k) for k in dict.fromkeys(k for g in tgot if g for k in g)})
            entry["jobs"][name] = {"stats": {k: v for k, v in st.items() if v}, "rounds": got}
            if any(tgot):
                entry["jobs"][name]["traced_rounds"] = tgot
            m = re.match(r"(randread|randwrite)-qd(\d+)$", name)
            if m and st.get("iops"):
                curves.setdefault(c, {}).setdefault(m.group(1), {})[m.group(2)] = st["iops"]["median"]
        out[c] = entry

    # Per-round ratios to each reference configuration: interleaving makes these the least noisy figures.
    refs = [x for x in ("qemu", "qemu-qsd", "qemu-nvme", first_tern, "host") if x in configs]
    vs = {}
    for c in configs:
        for ref in refs:
            if ref == c:
                continue
            for name, _ in jobs:
                for key in ("iops", "cpu_us_per_io", "cpu_us_per_io_outside_guest", "exits_per_io"):
                    ratios = [m[name][key] / t[name][key] for m, t in zip(per_round[c], per_round[ref])
                              if name in m and name in t and m[name].get(key) is not None and t[name].get(key)]
                    if ratios:
                        vs.setdefault(c, {}).setdefault(ref, {}).setdefault(name, {})[key] = \
                            stats([round(x, 3) for x in ratios], digits=3)

    goals = issue_goals(out, jobs, first_tern)
    baseline = args.baseline or ("tern-before" if "tern-before" in configs else "")
    goals16 = issue16_goals(out, terns, jobs, baseline)

    result = stamp("blk", args.kernel)
    result.update({
        "git_rev": args.git_rev,
        "where": args.where,
        "guest": {"memory_mib": 1024, "vcpus": 1, "disk": f"{args.data_mib} MiB raw file of random bytes on "
                  + ("ext4 in the test host" if args.where == "test-host" else "a disk of this machine")
                  + " (guest: /dev/vda, NVMe /dev/nvme0n1, IDE /dev/sda)",
                  "fio_engine": args.engine, "runtime_s": args.runtime},
        "l1": l1,
        "method": {
            "where": "test-host: the VMMs (and the host row's fio) ran in the nested test host L1 (QEMU TCG "
                     "with SVM); direct: on this machine, which has hardware virtualization",
            "fio": "--filename=<the guest's disk> --direct=1 --time_based --norandommap --randrepeat=0 "
                   "--lat_percentiles=1, no ramp time, one job per point; the host row runs the same jobs on "
                   "the disk file itself",
            "exits": "KVM's per-VM statistics in debugfs (/sys/kernel/debug/kvm/<VMM pid>-<vm fd>/: exits, "
                     "io_exits, mmio_exits, halt_exits, irq_exits, irq_injections, summed over the vCPUs) read "
                     "at the guest's BLK-JOB-BEGIN and BLK-JOB-END lines, divided by the job's I/Os: exits = every "
                     "guest exit (also those KVM handles itself, e.g. an ioeventfd doorbell or a halt); io_exits "
                     "and mmio_exits = port and MMIO accesses that reached the VMM",
            "kvm_trace": ("off (--kvm-trace off)" if args.kvm_trace == "off" else
                          f"the test host's tracefs hist triggers (bench/lib/kvm_trace.sh), in {args.kvm_trace_rounds} "
                          "traced round(s) after the timed ones (the triggers slow every exit, so IOPS, latency, CPU "
                          "and the debugfs exits are the untraced rounds'; traced_iops / traced_cpu_us_per_io are the "
                          "traced rounds' own, i.e. what tracing cost), installed before each VMM starts, keyed by common_pid and read at BLK-JOB-BEGIN/END, the VMM's threads only "
                          "(/proc/PID/task), divided by the job's I/Os: exit_reasons_per_io = kvm:kvm_exit by "
                          "exit_reason (SVM names; traced_exits_per_io their sum); inj_virq_per_io = kvm:kvm_inj_virq "
                          "(irq_device_per_io: vectors 0x20-0xeb, irq_timer_per_io: 0xec, the local APIC timer); "
                          "eoi_per_io = kvm:kvm_eoi (every EOI the local APIC processed), pv_eoi_per_io = kvm:kvm_pv_eoi "
                          "(paravirtual: no exit), eoi_exits_per_io = kvm:kvm_msr write ecx=0x80b (x2APIC) + kvm:kvm_mmio "
                          "writes to 0xfee000b0 (xAPIC); kicks_per_io = kvm:kvm_mmio writes outside 0xfec00000-0xfeffffff "
                          "(the virtio notify doorbell: one npf exit each; KVM completes it through the ioeventfd) + "
                          "kvm:kvm_fast_mmio + kvm:kvm_pio writes to ports >= 0x1000 (virtio legacy); hlt_exits_per_io = "
                          "kvm_exit hlt; wakeups_per_io = kvm:kvm_vcpu_wakeup (wakeups_slept: waited=1; "
                          "halt_polls_ok: halt polling found work); userspace_exits_per_io = kvm:kvm_userspace_exit "
                          "(KVM_RUN returning to the VMM) by reason; *_by_* dicts name the MSRs, MMIO addresses, "
                          "ports and vectors behind them. The window also holds the guest's BLK-JOB-END line on the "
                          "serial port (~60 port exits per job, to the VMM)"),
            "disk_options": "per configuration: its --disk arguments (tern; --tern-disk " + args.tern_disk
                            + " then --tern-extra NAME's options) or -drive/-device (QEMU), from its command line",
            "goals_issue16": "per tern built-in virtio-blk configuration vs qemu (same run): IOPS >= 2x at QD >= 4 "
                             "(random read and write), exits per I/O (KVM's debugfs count of every exit) <= 0.5x, host "
                             "CPU per I/O in guest mode and outside it <= qemu's; QD1 mean and p99 latency not worse "
                             "than the baseline configuration (" + (baseline or "none") + "); " + GOALS16_RULE,
            "latency": "fio lat_ns (submission to completion) mean and 99th percentile, in µs",
            "host_cpu": "utime+stime (all threads) of the VMM process plus the back-end process in the test host "
                        "(/proc/PID/stat) from the guest's BLK-JOB-BEGIN to its BLK-JOB-END line, divided by the "
                        "job's I/Os (cpu_us_per_io); it includes the guest's own execution (guest mode counts as "
                        "the vCPU thread's user time); *_outside_guest subtracts the VMM's guest_time (field 43); "
                        "vmm_* and backend_* are the two parts; l1_busy_* is the whole test host (/proc/stat); "
                        "for the host row the CPU time of fio's own processes",
            "l1_host_share": "BLK-MARK lines around each job are stamped on the host with the CPU time of L1's "
                             "QEMU: the share of a host core the test host had during the job; iops_per_core = "
                             "IOPS / that share, as if L1 had had a whole core (an estimate: assumes the loss is "
                             "spread evenly over the job)",
            "order": "each round boots every configuration once, in this order: " + ", ".join(configs),
            "jobs": {name: opts for name, opts in jobs},
        },
        "test_host": args.test_host,
        "host_load": args.host_load,
        "rounds": args.rounds,
        "tern_disk": args.tern_disk,
        "kvm_trace": args.kvm_trace,
        "kvm_trace_rounds": args.kvm_trace_rounds,
        "baseline": baseline or None,
        "configs": out,
        "iops_vs_queue_depth": curves,
        "vs": vs,
        "goals": goals,
        "goals_issue16": goals16,
    })
    print(json.dumps(result, indent=2, ensure_ascii=False))


if __name__ == "__main__":
    main()
