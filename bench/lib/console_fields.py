"""Shared by the bench summarizers: KEY=VALUE fields of a console line, and median/min/max."""
import re
import statistics

FIELD = re.compile(r"(\w+)=(\S+)")


def fields(line):
    """{key: value} of every KEY=VALUE in `line` (values as strings)."""
    return {k: v for k, v in FIELD.findall(line)}


def stats(values, digits=1):
    """Median (`digits` decimals), min, max and count of the non-None `values`; None when there are none."""
    values = [v for v in values if v is not None]
    if not values:
        return None
    return {"median": round(statistics.median(values), digits), "min": min(values), "max": max(values),
            "n": len(values)}
