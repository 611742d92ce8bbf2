#!/usr/bin/env python3
"""Writes the seed inputs of the device fuzzers (virtio_pci, msix, pci_config, legacy_pio,
device_state) into tests/fuzz/corpus/<name>/seed-*: the sequences a Linux guest performs (UART,
i8042 and PCI probes, a virtio-pci probe to DRIVER_OK, MSI-X programming) and valid snapshot
sections, in each fuzzer's operation encoding (see the *_fuzz.cc files). The virtio-pci
transport section comes from device_state_seeds.cc (a saved transport; see its header).
Usage: tests/fuzz/make_device_seeds.py   (rewrites the seed-* files, leaves found inputs alone)
"""
import os
import struct

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def u16(v): return struct.pack("<H", v & 0xFFFF)
def u32(v): return struct.pack("<I", v & 0xFFFFFFFF)
def u64(v): return struct.pack("<Q", v & 0xFFFFFFFFFFFFFFFF)


def width(w):
    return bytes([{1: 0, 2: 1, 4: 2, 8: 3}[w]])


def write(name, seeds):
    d = os.path.join(ROOT, name)
    os.makedirs(d, exist_ok=True)
    for f in os.listdir(d):
        if f.startswith("seed-"):
            os.remove(os.path.join(d, f))
    for tag, data in seeds.items():
        with open(os.path.join(d, "seed-" + tag), "wb") as f:
            f.write(data)


# ---- virtio_pci: op % 12 ----
class VirtioPci:
    def __init__(self): self.b = b""
    def bar0_read(self, region, off, w):  # region 0 common, 1 ISR-2.., 2 devcfg, 3 notify
        self.b += bytes([0]) + width(w) + bytes([region, off]); return self
    def bar0_write(self, region, off, w, v):
        self.b += bytes([1]) + width(w) + bytes([region, off]) + u64(v); return self
    def bar1(self, write, entry_off, w, v=0):  # table offset < 80 (not PBA)
        self.b += bytes([3 if write else 2]) + width(w) + bytes([1]) + u16(entry_off) + u64(v)
        return self
    def pba_read(self, off):
        self.b += bytes([2]) + width(8) + bytes([0, off]) + u64(0); return self
    def cfg(self, write, off, w, v=0):
        self.b += bytes([5 if write else 4]) + width(w) + bytes([off]) + u32(v); return self
    def probe(self, features_sel, queues, features=0):
        self.b += bytes([6, features_sel])
        if features_sel == 3:
            self.b += u64(features)
        for size_log2, enabled, misaligned, page in queues:
            self.b += bytes([size_log2 | (0 if enabled else 0x80) | (0x40 if misaligned else 0)])
            self.b += u16(page)
        return self
    def status(self, v): self.b += bytes([7, v]); return self
    def event(self, b): self.b += bytes([8, b]); return self
    def window(self, write, w, choose_bar, bar_off, v=0):
        self.b += bytes([10 if write else 9]) + width(w) + u32(0) + bytes([1 if choose_bar else 0])
        if choose_bar:
            self.b += bytes([0]) + u16(bar_off)
        self.b += u64(v); return self
    def reg(self, idx, small=None, v=0):  # common register by index into kRegs
        self.b += bytes([11, idx]) + (bytes([1, small]) if small is not None else bytes([0]) + u64(v))
        return self


PCI_CFG_CAP = 0x90  # msix 0x40, common 0x4C, notify 0x5C, isr 0x70, device 0x80, pci_cfg 0x90


def virtio_pci_seeds():
    good = [(7, True, False, 0x10), (6, True, False, 0x20)]
    s = {}
    s["probe-notify-isr-reset"] = (VirtioPci().probe(0, good).bar0_write(3, 0, 2, 0)
                                   .bar0_write(3, 4, 2, 1).event(0).event(1).bar0_read(1, 2, 1)
                                   .bar0_read(0, 0x14, 1).status(0).b)
    s["probe-intx-events"] = (VirtioPci().cfg(True, 0x04, 2, 0x0002).status(1).status(3)
                              .reg(2, v=0).reg(1, small=1).reg(2, small=1).status(11)
                              .event(0).event(1).bar0_read(1, 2, 1).event(2).b)
    s["relocate-bar0"] = (VirtioPci().probe(0, good).cfg(True, 0x04, 2, 0x0004)
                          .cfg(True, 0x10, 4, 0xC0100000).cfg(True, 0x04, 2, 0x0006)
                          .window(False, 2, True, 0x12).bar0_write(3, 0, 2, 0).b)
    s["pci-cfg-window"] = (VirtioPci().cfg(True, PCI_CFG_CAP + 4, 1, 0)
                           .cfg(True, PCI_CFG_CAP + 8, 4, 0x12).cfg(True, PCI_CFG_CAP + 12, 4, 2)
                           .cfg(False, PCI_CFG_CAP + 16, 4).cfg(True, PCI_CFG_CAP + 8, 4, 0x14)
                           .cfg(True, PCI_CFG_CAP + 12, 4, 1).cfg(True, PCI_CFG_CAP + 16, 1, 1)
                           .cfg(True, PCI_CFG_CAP + 4, 1, 1).cfg(True, PCI_CFG_CAP + 8, 4, 0)
                           .cfg(True, PCI_CFG_CAP + 12, 4, 4).cfg(False, PCI_CFG_CAP + 16, 4).b)
    s["bad-negotiation"] = (VirtioPci().reg(2, v=0xFFFFFFFF).status(3).reg(0, small=1)
                            .bar0_read(0, 4, 4).reg(1, small=1).reg(2, v=0x12345)
                            .status(11).status(7).probe(2, good).probe(0, [(9, True, False, 1),
                                                                           (3, False, True, 2)])
                            .b)
    s["msix-mask-unmask"] = (VirtioPci().probe(0, good).bar1(True, 12, 4, 1).event(0)
                             .pba_read(0).bar1(True, 12, 4, 0).bar1(False, 0, 8)
                             .cfg(True, 0x42, 2, 0xC000).event(4).cfg(True, 0x42, 2, 0x8000)
                             .bar1(True, 16, 8, 0xFEE01000).bar1(True, 24, 8, 0x41).b)
    s["queue-registers"] = (VirtioPci().status(3).reg(4, small=1).reg(5, v=64).reg(8, v=0x10000)
                            .reg(9, v=0x11000).reg(10, v=0x12000).reg(11, v=0).reg(6, small=2)
                            .reg(7, small=1).reg(5, v=32).reg(4, small=3).bar0_read(0, 0x18, 8)
                            .bar0_read(2, 0, 8).bar0_write(2, 8, 4, 0xdeadbeef).b)
    return s


# ---- msix: first byte = vectors - 1, then op % 8 ----
class Msix:
    def __init__(self, n): self.b = bytes([n - 1])
    def read(self, off, w): self.b += bytes([0]) + width(w) + u16(off); return self
    def entry(self, v, dword, value=None, w=4, mask=None):
        self.b += bytes([1]) + width(w) + bytes([v, dword])
        self.b += bytes([1, mask]) if mask is not None else bytes([0]) + u64(value)
        return self
    def pba(self, off, w=8): self.b += bytes([3]) + width(w) + bytes([off]); return self
    def control(self, enable, fmask): self.b += bytes([4, int(enable) | 2 * int(fmask)]); return self
    def fire(self, v): self.b += bytes([5, v]); return self
    def reset(self): self.b += bytes([0x87]); return self
    def round_trip(self): self.b += bytes([7]); return self


def msix_seeds():
    def program(m, v, data):
        return m.entry(v, 0, 0xFEE00000).entry(v, 1, 0).entry(v, 2, data).entry(v, 3, mask=0)
    s = {}
    m = program(Msix(3).control(True, False), 0, 0x41)
    s["program-fire-mask"] = (m.fire(0).entry(0, 3, mask=1).fire(0).pba(0).entry(0, 3, mask=0)
                              .read(0, 8).read(8, 8).round_trip().fire(0).b)
    m = program(Msix(70).control(True, True), 65, 0x42)
    s["function-mask-pba"] = (m.fire(65).fire(1).pba(8).pba(0).control(True, False).pba(8)
                              .round_trip().reset().fire(65).pba(8).b)
    s["past-the-end"] = (Msix(1).read(16, 8).read(12, 8).entry(0, 3, value=0xFFFFFFFF)
                         .read(12, 4).pba(0).pba(8).fire(1).fire(2).b)
    return s


# ---- pci_config: op % 9 ----
class PciCfg:
    def __init__(self): self.b = b""
    def address(self, slot, reg, enable=True, bus=None, fn=None):
        flags = (0 if enable else 1) | (2 if bus is not None else 0) | (4 if fn is not None else 0) | 8
        self.b += bytes([0, flags]) + (bytes([bus]) if bus is not None else b"")
        self.b += (bytes([fn]) if fn is not None else b"") + bytes([slot, reg]); return self
    def read(self, port_delta, w): self.b += bytes([1]) + width(w) + bytes([port_delta]); return self
    def raw_write(self, port_delta, w, v):
        self.b += bytes([2]) + width(w) + bytes([port_delta]) + u32(v); return self
    def data(self, byte, w, v):
        self.b += bytes([3]) + width(w) + bytes([byte, 3]) + u32(v); return self
    def size_bar(self, slot, bar): self.b += bytes([5, slot, bar]); return self
    def window(self, write, w, bar_index, num_queues=True, v=0):
        self.b += bytes([7 if write else 6]) + width(w) + u32(0) + bytes([1, bar_index])
        self.b += bytes([1]) if num_queues else bytes([0]) + u16(0)
        self.b += u64(v); return self


def pci_config_seeds():
    s = {}
    p = PciCfg()
    for slot in range(4):  # Linux's bus scan: vendor/device of every slot, function 0
        p.address(slot, 0).read(6, 4)
    s["enumerate"] = (p.address(1, 0, fn=1).read(6, 4).address(1, 0, bus=1).read(6, 4)
                      .address(1, 0, enable=False).read(6, 4).read(2, 4).read(3, 1).b)
    p = PciCfg()
    for slot in (0, 1, 2):
        for bar in range(6):
            p.size_bar(slot, bar)
    s["size-bars"] = p.b
    s["relocate-and-decode"] = (PciCfg().address(1, 0x04).data(0, 2, 0x0006).window(False, 2, 0)
                                .address(1, 0x10).data(0, 4, 0xC0200000).window(False, 2, 0)
                                .address(2, 0x10).data(0, 4, 0xC0200000).address(2, 0x04)
                                .data(0, 2, 0x0002).window(False, 2, 0).window(False, 4, 1)
                                .address(1, 0x04).data(0, 2, 0).window(False, 8, 0).b)
    s["caps-and-msix"] = (PciCfg().address(1, 0x34).read(4, 1).address(1, 0x40).read(4, 4)
                          .data(2, 2, 0xC000).read(6, 2).address(1, 0x3C).data(0, 1, 11)
                          .read(4, 4).read(5, 2).read(7, 2).raw_write(3, 1, 0x0E).read(0, 4).b)
    return s


# ---- legacy_pio: op % 6 (0-3 accesses: even = write) ----
BASES = {0x3F8: 0, 0x60: 1, 0x64: 2, 0x70: 3, 0x600: 4, 0x80: 5}


class Pio:
    def __init__(self): self.b = b""
    def _acc(self, write, port, w, v):
        base = max(b for b in BASES if b <= port and port - b < 9)
        small = v < 256
        self.b += bytes([0 if write else 1]) + width(w) + bytes([BASES[base], port - base + 1])
        self.b += bytes([1, v]) if small else bytes([0]) + u32(v)
        return self
    def out(self, port, v, w=1): return self._acc(True, port, w, v)
    def inp(self, port, w=1): return self._acc(False, port, w, 0)
    def console(self, data): self.b += bytes([4, len(data)]) + data; return self
    def ctrl_alt_del(self): self.b += bytes([5]); return self


def legacy_pio_seeds():
    s = {}
    u = 0x3F8  # Linux 8250 autoconfig + console setup
    s["uart-probe"] = (Pio().out(u + 1, 0).inp(u + 1).out(u + 1, 0x0F).inp(u + 1).out(u + 3, 0x80)
                       .out(u, 0x01).out(u + 1, 0).out(u + 3, 0x03).out(u + 2, 0xC7).inp(u + 2)
                       .out(u + 4, 0x1F).inp(u + 6).out(u + 4, 0x0B).out(u + 7, 0x55).inp(u + 7)
                       .out(u + 1, 0x05).console(b"root\n").inp(u + 2).inp(u).inp(u + 5)
                       .out(u + 1, 0x07).inp(u + 2).out(u, 0x41).inp(u + 2).b)
    s["uart-loopback-overrun"] = (Pio().out(u + 4, 0x10).out(u + 1, 0x0F).out(u, 0x41, 4)
                                  .inp(u + 5).inp(u, 4).inp(u + 2).inp(u + 6).out(u + 4, 0).b)
    s["i8042-probe"] = (Pio().inp(0x64).out(0x64, 0xAA).inp(0x64).inp(0x60).out(0x64, 0x20)
                        .inp(0x60).out(0x64, 0x60).out(0x60, 0x47).out(0x64, 0xA9).inp(0x60)
                        .out(0x60, 0xFF).inp(0x60).inp(0x60).out(0x60, 0xF2).inp(0x60)
                        .ctrl_alt_del().inp(0x60).inp(0x64).out(0x64, 0xD3).out(0x60, 0x5A)
                        .inp(0x60).b)
    s["i8042-reset"] = Pio().out(0x64, 0xD1).out(0x60, 0xFC).out(0x64, 0xFE).b
    s["cmos-time"] = (Pio().out(0x70, 0x0A).inp(0x71).out(0x70, 0x0B).inp(0x71).out(0x70, 0x00)
                      .inp(0x71).out(0x70, 0x09).inp(0x71).out(0x70, 0x0B).out(0x71, 0x86)
                      .out(0x70, 0x09).out(0x71, 0x99).out(0x70, 0x32).out(0x71, 0x20)
                      .out(0x70, 0x0B).out(0x71, 0x02).out(0x70, 0x8D).inp(0x71).inp(0x70, 2).b)
    s["acpi-sleep-reset"] = (Pio().inp(0x600, 4).inp(0x604, 2).out(0x604, 0x2C01, 2)
                             .inp(0x600, 2).out(0x600, 0x8000, 2).out(0x604, 0x3401, 2)
                             .out(0x606, 1).inp(0x606).inp(0x605, 4).out(0x80, 0x55).inp(0x80).b)
    return s


# ---- device_state: first byte % 7 picks the decoder ----
def serial_state(fifo=b"", ier=0x05, lcr=0x03, mcr=0x0B):
    return (u32(1) + bytes([0, ier, 0xC1, lcr, mcr, 0x02, 0x01, 0x55, 0x01, 0x00]) + b"\x01"
            + u32(len(fifo)) + fifo)


def i8042_state():
    ram = bytes([0x47]) + bytes(31)
    kbd = u32(2) + b"\xfa\xaa" + b"\x00\x00" + bytes([2, 1, 0, 0x2B])
    return (u32(1) + ram + u32(1) + b"\x55" + b"\x01\xfa" + b"\x00" + b"\x01\xd1" + b"\x03"
            + b"\x01\x00" + kbd)


def cmos_state(frozen):
    ram = bytearray(128)
    ram[0x0A], ram[0x0B] = 0x26, 0x82 if frozen else 0x02
    tm = [u32(v) for v in ((30, 15, 12, 1, 0, 124, 1) if frozen else (0,) * 7)]
    return u32(1) + bytes([0x0B, 0]) + bytes(ram) + u64(3600) + bytes([int(frozen)]) + b"".join(tm)


def pci_root_state():
    cfg = bytearray(256)
    cfg[0:4] = u32(0x00081B36)
    cfg[0x04] = 0x06
    cfg[0x0B] = 0x06  # class 0600
    cfg[0x2C:0x30] = u32(0x00081B36)
    return u32(1) + u32(0x80000810) + bytes(cfg)


def msix_state(n, unmasked=()):
    out = u16(n)
    for v in range(n):
        out += u32(0xFEE00000) + u32(0) + u32(0x40 + v) + u32(0 if v in unmasked else 1)
        out += bytes([1 if v % 2 else 0])
    return out


def device_state_seeds():
    poke = bytes([0x85, 0x00, 0x05, 0x00, 0x02, 0x00])  # a few accesses after the section
    s = {
        "serial": b"\x00" + serial_state(b"hello") + poke,
        "serial-dlab": b"\x00" + serial_state(lcr=0x83, mcr=0x1F),
        "i8042": b"\x01" + i8042_state() + poke,
        "acpi-pm": b"\x02" + u32(1) + b"\x01" + u16(0x0100) + u16(0x1401) + poke,
        "cmos": b"\x03" + cmos_state(False) + poke,
        "cmos-frozen": b"\x03" + cmos_state(True) + bytes([0x80, 0x0B, 0x81, 0x02]),
        "pci-root": b"\x04" + pci_root_state(),
        "msix": b"\x05" + msix_state(3, unmasked=(0, 2)) + bytes([0x03, 0x01, 0x07]),
        "msix-70": b"\x05" + msix_state(70, unmasked=(65,)),
    }
    return s


if __name__ == "__main__":
    write("virtio_pci", virtio_pci_seeds())
    write("msix", msix_seeds())
    write("pci_config", pci_config_seeds())
    write("legacy_pio", legacy_pio_seeds())
    d = os.path.join(ROOT, "device_state")
    keep = {f: open(os.path.join(d, f), "rb").read()
            for f in (os.listdir(d) if os.path.isdir(d) else []) if f.startswith("seed-virtio-pci")}
    seeds = device_state_seeds()
    seeds.update({f[len("seed-"):]: b for f, b in keep.items()})
    write("device_state", seeds)
