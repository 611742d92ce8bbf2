#!/usr/bin/env python3
"""Writes the firmware benchmark's SVG chart from firmware.json (bench/boot/firmware.sh): two panels,
one column per row (tern / QEMU with the same firmware file), median (dot), min-max (whisker), each
round (small dots):
  left   time to GRUB's menu (the firmware's share of the boot, plus GRUB's start)
  right  time to the Debian marker; the login prompt's median as a hollow square
Usage: firmware_plot.py FIRMWARE.json OUT.svg
"""
import os
import sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "lib"))
sys.path.insert(0, here)
from plot import panel  # noqa: E402
from results import load  # noqa: E402
from svg_chart import side_by_side  # noqa: E402


def main():
    r = load(sys.argv[1])
    fam = {"bios": "SeaBIOS", "uefi": "OVMF"}.get(r["family"], r["family"])
    view = {"date": r["date"], "git_rev": r.get("git_rev"), "fw": {"vmms": r["vmms"]}}
    rounds = f"{r['rounds']} rounds"
    charts = [panel(view, "fw", f"{fam}: time to GRUB's menu", "to_grub_menu_ms", rounds),
              panel(view, "fw", f"{fam}: time to the Debian marker", "to_marker_ms",
                    f"{rounds}; square: login prompt", second="to_login_ms")]
    with open(sys.argv[2], "w") as f:
        f.write(side_by_side(charts) + "\n")


if __name__ == "__main__":
    main()
