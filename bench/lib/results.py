"""Shared by the bench scripts: the results JSON's path and loading, the arguments every summarizer
takes, and the stamp that starts every results JSON."""
import datetime
import json
import os
import sys


def json_path(script, default):
    """argv[1], or results/<default> next to `script` when it is given (else argv[1] is required)."""
    if len(sys.argv) > 1:
        return sys.argv[1]
    if default is None:
        sys.exit(f"usage: {os.path.basename(script)} RESULTS.json")
    return os.path.join(os.path.dirname(os.path.abspath(script)), "results", default)


def load(path):
    with open(path) as f:
        return json.load(f)


def add_common_args(ap):
    """--kernel (required), --test-host and --host-load (descriptions; default empty)."""
    ap.add_argument("--kernel", required=True)
    ap.add_argument("--test-host", default="")
    ap.add_argument("--host-load", default="")


def stamp(benchmark, kernel):
    """The first keys of a results JSON: benchmark name, UTC date (seconds), guest kernel."""
    return {"benchmark": benchmark,
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "kernel": kernel}


def number(value):
    """A console field as a float; None for null, empty, missing or not a number."""
    try:
        return None if value in (None, "null", "") else float(value)
    except ValueError:
        return None
