#!/usr/bin/env python3
"""Writes the seed inputs of the cfi_flash fuzzer (src/firmware/pflash/cfi_flash_fuzz.cc) into
tests/fuzz/corpus/cfi_flash/seed-*: what OVMF does to its variable store (QemuFlash.c: detection,
byte programs ending in 0xFF, block erase), a CFI/ID probe, out-of-order sequences, a restore.
Encoding per op: 1 byte (bit 0 write, bits 1-2 width 1/2/4/8, bits 3-7 == 31: reset/restore),
a little-endian u16 offset, then `width` value bytes.
Usage: tests/fuzz/make_cfi_flash_seeds.py   (rewrites the seed-* files, leaves found inputs alone)
"""
import struct

from make_device_seeds import write

W = {1: 0, 2: 1, 4: 2, 8: 3}


def wr(off, val, w=1):
    return bytes([1 | W[w] << 1]) + struct.pack("<H", off) + val.to_bytes(w, "little")


def rd(off, w=1):
    return bytes([W[w] << 1]) + struct.pack("<H", off) + bytes(w)


def restore(mode, status, erase_off):
    return bytes([31 << 3 | W[2] << 1]) + struct.pack("<H", erase_off) + bytes([mode, status])


def reset():
    return bytes([31 << 3 | 1]) + struct.pack("<H", 0) + bytes(1)


def ovmf_write(off, data):
    b = b""
    for i, v in enumerate(data):
        b += wr(off + i, 0x10) + wr(off + i, v)
    return b + wr(off + len(data) - 1, 0xFF)


SEEDS = {
    "ovmf-detect": rd(0) + wr(0, 0x50) + rd(0) + wr(0, 0x70) + rd(0) + wr(0, 0xFF) + rd(0),
    "ovmf-write": ovmf_write(0x1010, b"tern-var") + rd(0x1010, 8),
    "ovmf-erase": wr(0x2000, 0x20) + wr(0x2000, 0xD0) + rd(0x2000) + wr(0x2000, 0xFF) +
                  rd(0x2FFF, 2),
    "query-id": wr(0x55, 0x98) + rd(0x10, 4) + rd(0x2C, 8) + wr(0, 0x90) + rd(0, 2) +
                wr(0, 0xFF),
    "bad-sequences": wr(0, 0x20) + wr(0, 0x42) + wr(4, 0xE8) + wr(0, 0xD0) + wr(0, 0x70) +
                     rd(0, 4) + wr(0, 0x60) + wr(0, 0x01) + wr(0, 0x50),
    "word-program-boundary": wr(0x0FFE, 0x40) + wr(0x0FFE, 0x11223344, 4) + wr(0, 0xFF) +
                             wr(0x3FFE, 0x10) + wr(0x3FFE, 0x5566778899AABBCC, 8),
    "restore-erase": restore(5, 0x80, 0x3000) + wr(0, 0xD0) + reset() + rd(0x3000, 8),
}

if __name__ == "__main__":
    write("cfi_flash", SEEDS)
