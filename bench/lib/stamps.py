"""Shared by the bench summarizers: the begin/end marks that stamp_cpu.py stamped with the test
host's host CPU time, paired up into the share of a host core L1 had in between."""
import os

from console_fields import fields


def read_marks(path, prefix, keys):
    """{(values of `keys`): {"l1_host_cpu_s", "host_wall_s", "l1_host_share"}} from the lines of
    stamp_cpu.py's file `path` that start with `prefix` (e.g. "BLK-MARK") and carry at=begin|end."""
    marks, out = {}, {}
    if path and os.path.exists(path):
        with open(path, errors="replace") as f:
            for line in f:
                kv = fields(line)
                if line.startswith(prefix) and kv.get("l1_cpu_s") not in (None, "null") and all(k in kv for k in keys):
                    marks[(tuple(kv[k] for k in keys), kv.get("at"))] = (float(kv["l1_cpu_s"]), float(kv["host_wall_s"]))
    for (key, at), (cpu, wall) in marks.items():
        end = marks.get((key, "end"))
        if at == "begin" and end and end[1] > wall:
            out[key] = {"l1_host_cpu_s": round(end[0] - cpu, 2), "host_wall_s": round(end[1] - wall, 2),
                        "l1_host_share": round((end[0] - cpu) / (end[1] - wall), 3)}
    return out
