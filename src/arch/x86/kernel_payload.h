// Decompressing a bzImage's payload (the compressed vmlinux ELF) on the host, so the kernel can be
// entered uncompressed (PVH) without running its own decompressor in the guest. The payload is the
// setup header's payload_offset/payload_length (boot.rst, protocol >= 2.08); formats are those of
// the kernel's arch/x86/boot/compressed/Makefile (the last 4 payload bytes are the decompressed
// size, little-endian, as its size_append writes them).
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "base/host_buffer.h"
#include "base/result.h"

namespace tern::x86 {

/// The compression of a payload, found by its magic bytes (lib/decompress.c's table).
enum class PayloadCompression { kNone, kGzip, kXz, kZstd, kLz4, kBzip2, kLzma, kLzo, kUnknown };

/// kNone when `data` starts with the ELF magic; kUnknown when nothing matches.
[[nodiscard]] PayloadCompression detect_payload_compression(std::span<const uint8_t> data);

/// "gzip", "xz", "zstd", "lz4", "bzip2", "lzma", "lzo", "none", "unknown".
[[nodiscard]] std::string_view payload_compression_name(PayloadCompression c);

/// Decompresses `payload` (gzip via zlib, xz via liblzma, zstd via libzstd, LZ4 legacy frames via
/// liblz4; kNone is copied) into a HostBuffer of exactly the decompressed size. The output is
/// bounded by `max_output_bytes` and by the trailing size field; a truncated, corrupt or oversized
/// stream, or an unsupported format (bzip2, lzma, lzo), is an error with op "kernel payload" and a
/// context naming the format and what failed, e.g. "lz4: block 3 is corrupt". Never reads outside
/// `payload`.
[[nodiscard]] Result<HostBuffer> decompress_payload(std::span<const uint8_t> payload,
                                                    uint64_t max_output_bytes);

}  // namespace tern::x86
