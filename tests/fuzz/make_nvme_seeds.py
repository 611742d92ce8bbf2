#!/usr/bin/env python3
"""Writes the seed inputs of the nvme_command fuzzer into tests/fuzz/corpus/nvme_command/seed-*,
in its input encoding (see src/nvme/nvme_command_fuzz.cc): flags, limits selector, namespace
size, a 64-byte submission entry, a direct PRP walk (PRP1, PRP2, length), then guest RAM
(region 0 at GPA 0, 32 KiB; region 1 at 0x10000, 16 KiB; region 2 at 0x14000, 2 KiB).
Usage: tests/fuzz/make_nvme_seeds.py   (rewrites the seed-* files, leaves found inputs alone)
"""
import os
import struct

DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "nvme_command")
PAGE = 4096
FLUSH, WRITE, READ, WRITE_ZEROES, DSM = 0x00, 0x01, 0x02, 0x08, 0x09
FUA, DEAC, AD = 1 << 30, 1 << 25, 1 << 2
RO, DISCARD, LBA4K, PAGE8K = 1, 2, 4, 8
R1 = 0x10000


def sqe(opcode, prp1=0, prp2=0, cdw10=0, cdw11=0, cdw12=0, nsid=1, cid=7, flags=0):
    return struct.pack("<BBHIIIQQQ6I", opcode, flags, cid, nsid, 0, 0, 0, prp1, prp2,
                       cdw10, cdw11, cdw12, 0, 0, 0)


def ram(pieces):
    """RAM bytes (host buffer order = region 0 then region 1) from {host offset: bytes}."""
    buf = bytearray(0x8000 + 0x4000)
    for off, data in pieces.items():
        buf[off:off + len(data)] = data
    return bytes(buf).rstrip(b"\0")


def prp_list(entries): return b"".join(struct.pack("<Q", e) for e in entries)


def seed(flags, sel, nsze, cmd, walk=(0, 0, 512), memory=b""):
    return (bytes([flags, sel]) + struct.pack("<H", nsze) + cmd +
            struct.pack("<QQI", walk[0], walk[1], walk[2]) + memory)


list_at = 3 * PAGE  # a PRP list page in region 0
chain = [PAGE * (1 + i % 2) for i in range(511)] + [R1]  # 511 entries, then region 1's page
self_loop = [PAGE] * 511 + [list_at]
ranges = b"".join(struct.pack("<IIQ", 0, n, s) for n, s in ((8, 0), (0, 9), (16, 100)))
seeds = {
    "read_prp1": seed(DISCARD, 2, 2048, sqe(READ, prp1=0x200, cdw10=4, cdw12=3)),
    "write_prp2_fua": seed(DISCARD, 2, 2048, sqe(WRITE, prp1=0x800, prp2=R1, cdw12=15 | FUA),
                           (0x800, R1, 8192)),
    "write_list": seed(DISCARD, 2, 2048, sqe(WRITE, prp1=0, prp2=list_at, cdw12=31),
                       (0, list_at, 16384), ram({list_at: prp_list([PAGE, 2 * PAGE, R1])})),
    "read_chained": seed(DISCARD, 3, 0xFFFF, sqe(READ, prp1=0, prp2=list_at, cdw12=1023),
                         (4, list_at, 600 * PAGE),
                         ram({list_at: prp_list(chain), 0x8000: prp_list([PAGE] * 200)})),
    "read_self_loop": seed(DISCARD, 3, 0xFFFF, sqe(READ, prp1=0, prp2=list_at, cdw12=1023),
                           (0, list_at, 2 * 1024 * 1024), ram({list_at: prp_list(self_loop)})),
    "read_4k_page8k": seed(DISCARD | LBA4K | PAGE8K, 2, 256,
                           sqe(READ, prp1=0x1000, prp2=2 * 8192, cdw12=2),
                           (0x1000, 2 * 8192, 3 * PAGE), ram({})),
    "dsm": seed(DISCARD, 2, 2048, sqe(DSM, prp1=PAGE - 16, prp2=R1, cdw10=2, cdw11=AD),
                (PAGE - 16, R1, 48), ram({PAGE - 16: ranges[:16], 0x8000: ranges[16:]})),
    "dsm_read_only": seed(DISCARD | RO, 2, 2048, sqe(DSM, prp1=0, cdw10=0, cdw11=AD),
                          memory=ram({0: ranges})),
    "write_zeroes_deac": seed(DISCARD, 2, 2048, sqe(WRITE_ZEROES, cdw10=100, cdw12=99 | DEAC)),
    "flush_all": seed(0, 0, 16, sqe(FLUSH, nsid=0xFFFFFFFF)),
    "read_huge_disk": seed(DISCARD | 0x10, 2, 0,
                           sqe(READ, prp1=0, cdw10=0xFFFFFFF0, cdw11=0x7FFFFF, cdw12=0)),
    "straddle": seed(DISCARD, 2, 2048, sqe(READ, prp1=R1 + 0x3000, prp2=R1 + 0x4000, cdw12=15),
                     (R1 + 0x4000, 0, PAGE)),
}

os.makedirs(DIR, exist_ok=True)
for f in os.listdir(DIR):
    if f.startswith("seed-"):
        os.remove(os.path.join(DIR, f))
for tag, data in seeds.items():
    with open(os.path.join(DIR, "seed-" + tag), "wb") as f:
        f.write(data)
