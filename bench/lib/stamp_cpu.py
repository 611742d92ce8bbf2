#!/usr/bin/env python3
"""Passes the test host's console through and stamps chosen lines with the host CPU time of L1.

Usage: testhost/run.sh ... --pidfile PIDFILE | stamp_cpu.py PIDFILE SHOW_REGEX STAMP_REGEX OUT

Prints the stdin lines that match SHOW_REGEX (progress for the terminal). For every line matching
STAMP_REGEX it appends to OUT:  <line> l1_cpu_s=<utime+stime of L1's QEMU, s> host_wall_s=<time.time()>
The host CPU time of the test host is a load-independent measure of the work a step cost: on this
shared machine the wall clock of L1 stretches with the host's load average, its CPU time much less.
(A line reaches this script a few ms after L1 printed it, so each stamp is late by that much.)
"""
import os
import re
import sys
import time


def l1_cpu_s(pidfile):
    try:
        with open(pidfile) as f:
            pid = int(f.read().strip())
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        # fields[0] is field 3 (state); utime and stime are fields 14 and 15.
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def main():
    pidfile, show, stamp, out = sys.argv[1], re.compile(sys.argv[2]), re.compile(sys.argv[3]), sys.argv[4]
    with open(out, "a") as o:
        for line in sys.stdin:
            line = line.rstrip("\n")
            if stamp.search(line):
                cpu = l1_cpu_s(pidfile)
                o.write(f"{line} l1_cpu_s={'null' if cpu is None else f'{cpu:.2f}'} host_wall_s={time.time():.3f}\n")
                o.flush()
            if show.search(line):
                print(line, flush=True)


if __name__ == "__main__":
    main()
