#!/usr/bin/env python3
"""Writes the seed inputs of the vhost-user fuzzers into tests/fuzz/corpus/<name>/seed-*:
well-formed replies (vhost_user_reply) and requests (vhost_user_request) in each fuzzer's
input encoding (see src/vhost_user/vhost_user_{reply,request}_fuzz.cc), plus a stream of a
front-end's start-up sequence for the request fuzzer's socket mode.
Usage: tests/fuzz/make_vhost_user_seeds.py   (rewrites the seed-* files, leaves found inputs alone)
"""
import os
import struct

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")
VERSION, REPLY, NEED_REPLY = 1, 4, 8
NOFD = 1 << 8


def u16(v): return struct.pack("<H", v)
def u32(v): return struct.pack("<I", v)
def u64(v): return struct.pack("<Q", v)


def hdr(request, flags, payload): return u32(request) + u32(flags) + u32(len(payload)) + payload
def region(gpa, size, uaddr, off): return u64(gpa) + u64(size) + u64(uaddr) + u64(off)
def inflight(size, off, nq, qs): return u64(size) + u64(off) + u16(nq) + u16(qs) + b"\0" * 4  # padded to 24 (QEMU)
def config(off, size, flags, data): return u32(off) + u32(size) + u32(flags) + data


def write(name, seeds):
    d = os.path.join(ROOT, name)
    os.makedirs(d, exist_ok=True)
    for f in os.listdir(d):
        if f.startswith("seed-"):
            os.remove(os.path.join(d, f))
    for tag, data in seeds.items():
        with open(os.path.join(d, "seed-" + tag), "wb") as f:
            f.write(data)


def reply(request, payload, asked=0, fds=0):
    return bytes([fds]) + u32(asked) + hdr(request, VERSION | REPLY, payload)


write("vhost_user_reply", {
    "features": reply(1, u64(0x1_4000_0000)),
    "protocol_features": reply(15, u64(0x1_3209)),
    "queue_num": reply(17, u64(4)),
    "max_mem_slots": reply(36, u64(32)),
    "ack_ok": reply(5, u64(0)),
    "ack_fail": reply(5, u64(1)),
    "vring_base": reply(11, u32(1) + u32(99), asked=1),
    "config": reply(24, config(0, 8, 0, bytes(range(8))), asked=8),
    "inflight": reply(31, inflight(4096, 0, 1, 128), asked=8192, fds=1),
    "not_a_reply": bytes([0]) + u32(0) + hdr(1, VERSION, u64(0)),
})


def request(code, payload=b"", fds=0, flags=VERSION):
    return bytes([fds]) + hdr(code, flags, payload)


two_regions = u32(2) + u32(0) + region(0, 1 << 20, 0x7000_0000, 0) + \
    region(1 << 30, 1 << 20, 0x8000_0000, 0)
startup = b"".join([
    hdr(1, VERSION, b""), hdr(15, VERSION, b""), hdr(16, VERSION, u64(0x1_3209)),
    hdr(3, VERSION | NEED_REPLY, b""), hdr(36, VERSION, b""),
    hdr(24, VERSION, config(0, 60, 0, bytes(60))),
    hdr(2, VERSION | NEED_REPLY, u64(1 << 32)),
    hdr(5, VERSION | NEED_REPLY, two_regions),  # its 2 fds come with the stream's first byte
    hdr(8, VERSION | NEED_REPLY, u32(0) + u32(128)),
    hdr(10, VERSION | NEED_REPLY, u32(0) + u32(0)),
    hdr(9, VERSION | NEED_REPLY, u32(0) + u32(0) + u64(0x7000_0000) + u64(0x7000_1000) +
        u64(0x7000_0800) + u64(0)),
    hdr(12, VERSION, u64(0 | NOFD)), hdr(13, VERSION, u64(0 | NOFD)),
    hdr(18, VERSION | NEED_REPLY, u32(0) + u32(1)),
    hdr(11, VERSION, u32(0) + u32(0)),
])
write("vhost_user_request", {
    "get_features": request(1),
    "set_features": request(2, u64(1 << 32), flags=VERSION | NEED_REPLY),
    "set_owner": request(3),
    "set_mem_table": request(5, two_regions, fds=2),
    "add_mem_reg": request(37, u64(0) + region(1 << 30, 1 << 20, 0x9000_0000, 0), fds=1),
    "rem_mem_reg": request(38, u64(0) + region(1 << 30, 1 << 20, 0x9000_0000, 0)),
    "vring_num": request(8, u32(0) + u32(256)),
    "vring_addr": request(9, u32(0) + u32(0) + u64(1) + u64(2) + u64(3) + u64(0)),
    "vring_kick": request(12, u64(1), fds=1),
    "vring_call_nofd": request(13, u64(1 | NOFD)),
    "vring_enable": request(18, u32(1) + u32(1)),
    "get_config": request(24, config(0, 60, 0, bytes(60))),
    "set_config": request(25, config(4, 4, 0, b"\1\2\3\4")),
    "get_inflight": request(31, inflight(0, 0, 2, 128)),
    "set_inflight": request(32, inflight(8192, 0, 2, 128), fds=1),
    "set_status": request(39, u64(0xf)),
    "set_log_fd": request(7, b"", fds=1),
    "stream_startup": bytes([0x80 | 2]) + startup,
    "stream_too_many_fds": bytes([0x80 | 11]) + hdr(5, VERSION, two_regions),
})
