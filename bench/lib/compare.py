"""Shared by the bench summarizers: which binary was measured, the verdict on two configurations
(a difference is claimed only when their min-max ranges over the rounds do not overlap), and whether a
factor goal ("at least 2x", "at most 0.5x") is met: only when every round says so."""
import hashlib
import os
import subprocess


def binary_info(path):
    """path, size, sha256 and the git describe of the tree a measured binary lives in."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    try:
        rev = subprocess.run(["git", "-C", os.path.dirname(os.path.abspath(path)), "describe", "--always", "--dirty"],
                             capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        rev = None
    return {"path": os.path.abspath(path), "bytes": os.path.getsize(path), "sha256": h.hexdigest(), "git_describe": rev}


def verdict(a, b, higher_is_better=True):
    """Compares two stats() dicts: a difference is claimed only when the min-max ranges do not overlap."""
    if not a or not b or not b["median"]:
        return None
    ratio = round(a["median"] / b["median"], 3)
    if a["n"] < 2 or b["n"] < 2:
        v = "one round: no ranges to compare"
    elif a["min"] > b["max"]:
        v = "higher"
    elif a["max"] < b["min"]:
        v = "lower"
    else:
        v = "no measurable difference"
    better = (v == "higher") == higher_is_better if v in ("higher", "lower") else None
    return {"ratio_of_medians": ratio, "ranges": v, "better": better}


def factor_goal(per_round, factor, at_least=True):
    """A factor goal ("at least FACTOR x the reference", or at most) from the stats() of the per-round
    ratios (each round's figure over the reference's in the same, interleaved round): "met" when every
    round's ratio meets it (its min, resp. max, on the right side of FACTOR), "not met" when no round's
    does, "not shown" when the rounds disagree; None without per-round ratios. A ratio of the medians
    can clear FACTOR while several rounds miss it: it does not decide."""
    if not per_round or per_round.get("min") is None or per_round.get("max") is None:
        return None
    lo, hi = per_round["min"], per_round["max"]
    if at_least:
        return "met" if lo >= factor else "not met" if hi < factor else "not shown"
    return "met" if hi <= factor else "not met" if lo > factor else "not shown"
