#include "arch/x86/kernel_payload.h"

#include <lz4.h>
#include <lzma.h>
#include <zlib.h>
#include <zstd.h>
#include <zstd_errors.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

namespace tern::x86 {

namespace {

constexpr size_t kSizeFieldBytes = 4;  ///< size_append's little-endian decompressed size.
/// liblz4's legacy frame magic (lz4 -l; the kernel's lib/decompress_unlz4.c ARCHIVE_MAGICNUMBER).
constexpr uint32_t kLz4LegacyMagic = 0x184C2102;
/// Each legacy-frame block decompresses to at most 8 MiB (LZ4IO_LEGACY_BLOCKSIZE).
constexpr size_t kLz4LegacyBlockBytes = 8 << 20;
/// liblzma's decoder memory limit: the kernel's xz uses a 32 MiB dictionary (scripts/xz_wrap.sh).
constexpr uint64_t kXzMemLimitBytes = 64 << 20;

uint32_t load_le32(const uint8_t* p) {
  return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
}

bool starts_with(std::span<const uint8_t> data, std::initializer_list<uint8_t> magic) {
  return data.size() >= magic.size() && std::equal(magic.begin(), magic.end(), data.begin());
}

tl::unexpected<Error> payload_error(PayloadCompression c, const std::string& what) {
  return fail("kernel payload", std::string(payload_compression_name(c)) + ": " + what);
}

/// "N bytes" for error messages.
std::string bytes_str(uint64_t n) {
  return std::to_string(n) + " bytes";
}

/// Decompresses a gzip member (zlib, windowBits 16 + MAX_WBITS) into exactly `out`. The gzip
/// trailer's ISIZE is the payload's size field; up to one appended size field may follow it.
Result<void> inflate_gzip(std::span<const uint8_t> in, std::span<uint8_t> out) {
  constexpr auto kGz = PayloadCompression::kGzip;
  z_stream zs{};
  if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK) return payload_error(kGz, "inflateInit2 failed");
  std::unique_ptr<z_stream, int (*)(z_stream*)> guard(&zs, inflateEnd);
  size_t in_pos = 0, out_pos = 0;
  for (;;) {
    // zlib counts in uInt: feed at most UINT_MAX bytes at a time.
    size_t in_chunk = std::min<size_t>(in.size() - in_pos, UINT_MAX);
    size_t out_chunk = std::min<size_t>(out.size() - out_pos, UINT_MAX);
    zs.next_in = const_cast<Bytef*>(in.data() + in_pos);
    zs.avail_in = static_cast<uInt>(in_chunk);
    zs.next_out = out.data() + out_pos;
    zs.avail_out = static_cast<uInt>(out_chunk);
    int ret = inflate(&zs, Z_NO_FLUSH);
    in_pos += in_chunk - zs.avail_in;
    out_pos += out_chunk - zs.avail_out;
    if (ret == Z_STREAM_END) break;
    if (ret == Z_OK) continue;
    if (ret == Z_BUF_ERROR && out_pos == out.size())
      return payload_error(kGz,
                           "decompresses to more than its size field's " + bytes_str(out.size()));
    if (ret == Z_BUF_ERROR)
      return payload_error(kGz, "truncated: the stream ends after " + bytes_str(out_pos) + " of " +
                                    bytes_str(out.size()));
    if (ret == Z_MEM_ERROR) return payload_error(kGz, "out of memory");
    return payload_error(kGz, std::string("corrupt data: ") + (zs.msg ? zs.msg : "inflate failed"));
  }
  if (out_pos != out.size())
    return payload_error(kGz, "decompresses to " + bytes_str(out_pos) + ", its size field says " +
                                  bytes_str(out.size()));
  size_t trailing = in.size() - in_pos;
  if (trailing != 0 && trailing != kSizeFieldBytes)
    return payload_error(kGz, bytes_str(trailing) + " of trailing data after the stream");
  return {};
}

/// Decompresses one .xz stream (liblzma; the kernel's BCJ x86 + LZMA2 with CRC32) into exactly
/// `out`; only stream padding (zero bytes) may follow it.
Result<void> decode_xz(std::span<const uint8_t> in, std::span<uint8_t> out) {
  constexpr auto kXz = PayloadCompression::kXz;
  lzma_stream strm = LZMA_STREAM_INIT;
  if (lzma_stream_decoder(&strm, kXzMemLimitBytes, 0) != LZMA_OK)
    return payload_error(kXz, "lzma_stream_decoder failed");
  std::unique_ptr<lzma_stream, void (*)(lzma_stream*)> guard(&strm, lzma_end);
  strm.next_in = in.data();
  strm.avail_in = in.size();
  strm.next_out = out.data();
  strm.avail_out = out.size();
  lzma_ret ret = LZMA_OK;
  while (ret == LZMA_OK) ret = lzma_code(&strm, LZMA_FINISH);
  const size_t produced = out.size() - strm.avail_out;
  switch (ret) {
    case LZMA_STREAM_END:
      break;
    case LZMA_BUF_ERROR:
      if (strm.avail_out == 0)
        return payload_error(kXz,
                             "decompresses to more than its size field's " + bytes_str(out.size()));
      return payload_error(kXz, "truncated: the stream ends after " + bytes_str(produced) + " of " +
                                    bytes_str(out.size()));
    case LZMA_MEMLIMIT_ERROR:
      return payload_error(kXz, "needs more than " + std::to_string(kXzMemLimitBytes >> 20) +
                                    " MiB of decoder memory");
    case LZMA_MEM_ERROR:
      return payload_error(kXz, "out of memory");
    case LZMA_FORMAT_ERROR:
      return payload_error(kXz, "not an .xz stream");
    case LZMA_OPTIONS_ERROR:
      return payload_error(kXz, "unsupported stream options");
    case LZMA_DATA_ERROR:
      return payload_error(kXz, "corrupt data");
    default:
      return payload_error(kXz, "decoder error " + std::to_string(static_cast<int>(ret)));
  }
  if (produced != out.size())
    return payload_error(kXz, "decompresses to " + bytes_str(produced) + ", its size field says " +
                                  bytes_str(out.size()));
  for (size_t i = 0; i < strm.avail_in; ++i)
    if (strm.next_in[i] != 0)
      return payload_error(kXz, bytes_str(strm.avail_in) + " of trailing data after the stream");
  return {};
}

/// Decompresses zstd frames (single pass into `out`: libzstd allocates no window) into exactly
/// `out`.
Result<void> decode_zstd(std::span<const uint8_t> in, std::span<uint8_t> out) {
  constexpr auto kZstd = PayloadCompression::kZstd;
  std::unique_ptr<ZSTD_DCtx, size_t (*)(ZSTD_DCtx*)> dctx(ZSTD_createDCtx(), ZSTD_freeDCtx);
  if (!dctx) return payload_error(kZstd, "out of memory");
  size_t n = ZSTD_decompressDCtx(dctx.get(), out.data(), out.size(), in.data(), in.size());
  if (ZSTD_isError(n)) {
    if (ZSTD_getErrorCode(n) == ZSTD_error_dstSize_tooSmall)
      return payload_error(kZstd,
                           "decompresses to more than its size field's " + bytes_str(out.size()));
    return payload_error(kZstd, std::string(ZSTD_getErrorName(n)));
  }
  if (n != out.size())
    return payload_error(kZstd, "decompresses to " + bytes_str(n) + ", its size field says " +
                                    bytes_str(out.size()));
  return {};
}

/// Decompresses LZ4 legacy frames (lz4 -l): the magic, then [LE32 compressed size][block] until
/// the end of `in`; a size equal to the magic starts another frame.
Result<void> decode_lz4_legacy(std::span<const uint8_t> in, std::span<uint8_t> out) {
  constexpr auto kLz4 = PayloadCompression::kLz4;
  size_t pos = kSizeFieldBytes, out_pos = 0, block = 0;  // detection checked the first magic
  while (pos < in.size()) {
    if (in.size() - pos < 4)
      return payload_error(kLz4, "truncated: " + bytes_str(in.size() - pos) + " after block " +
                                     std::to_string(block));
    const uint32_t csize = load_le32(in.data() + pos);
    pos += 4;
    if (csize == kLz4LegacyMagic) continue;
    if (csize == 0 || csize > static_cast<uint32_t>(LZ4_compressBound(kLz4LegacyBlockBytes)))
      return payload_error(
          kLz4, "block " + std::to_string(block) + " has an invalid size of " + bytes_str(csize));
    if (csize > in.size() - pos)
      return payload_error(kLz4, "truncated: block " + std::to_string(block) + " needs " +
                                     bytes_str(csize) + ", " + bytes_str(in.size() - pos) +
                                     " left");
    const size_t room = std::min(kLz4LegacyBlockBytes, out.size() - out_pos);
    int n = LZ4_decompress_safe(reinterpret_cast<const char*>(in.data() + pos),
                                reinterpret_cast<char*>(out.data() + out_pos),
                                static_cast<int>(csize), static_cast<int>(room));
    if (n < 0)
      return payload_error(kLz4, "block " + std::to_string(block) +
                                     " is corrupt or decompresses past the size field's " +
                                     bytes_str(out.size()));
    pos += csize;
    out_pos += static_cast<size_t>(n);
    ++block;
  }
  if (out_pos != out.size())
    return payload_error(kLz4, "decompresses to " + bytes_str(out_pos) + ", its size field says " +
                                   bytes_str(out.size()));
  return {};
}

}  // namespace

PayloadCompression detect_payload_compression(std::span<const uint8_t> data) {
  using C = PayloadCompression;
  if (starts_with(data, {0x7F, 'E', 'L', 'F'})) return C::kNone;
  if (starts_with(data, {0x1F, 0x8B})) return C::kGzip;
  if (starts_with(data, {0xFD, '7', 'z', 'X', 'Z', 0x00})) return C::kXz;
  if (starts_with(data, {0x28, 0xB5, 0x2F, 0xFD})) return C::kZstd;
  if (starts_with(data, {0x02, 0x21, 0x4C, 0x18})) return C::kLz4;
  if (starts_with(data, {'B', 'Z', 'h'})) return C::kBzip2;
  if (starts_with(data, {0x5D, 0x00, 0x00})) return C::kLzma;
  if (starts_with(data, {0x89, 'L', 'Z', 'O'})) return C::kLzo;
  return C::kUnknown;
}

std::string_view payload_compression_name(PayloadCompression c) {
  switch (c) {
    case PayloadCompression::kNone:
      return "none";
    case PayloadCompression::kGzip:
      return "gzip";
    case PayloadCompression::kXz:
      return "xz";
    case PayloadCompression::kZstd:
      return "zstd";
    case PayloadCompression::kLz4:
      return "lz4";
    case PayloadCompression::kBzip2:
      return "bzip2";
    case PayloadCompression::kLzma:
      return "lzma";
    case PayloadCompression::kLzo:
      return "lzo";
    case PayloadCompression::kUnknown:
      break;
  }
  return "unknown";
}

Result<HostBuffer> decompress_payload(std::span<const uint8_t> payload, uint64_t max_output_bytes) {
  using C = PayloadCompression;
  const C c = detect_payload_compression(payload);
  if (payload.empty()) return fail("kernel payload", "empty payload");
  switch (c) {
    case C::kBzip2:
    case C::kLzma:
    case C::kLzo:
      return payload_error(c,
                           "unsupported compression; build the kernel with CONFIG_KERNEL_LZ4, "
                           "CONFIG_KERNEL_GZIP, CONFIG_KERNEL_XZ or CONFIG_KERNEL_ZSTD, or "
                           "pass the uncompressed vmlinux");
    case C::kUnknown: {
      std::string magic;
      for (size_t i = 0; i < std::min<size_t>(payload.size(), 4); ++i) {
        char hex[4];
        std::snprintf(hex, sizeof hex, i == 0 ? "%02x" : " %02x", payload[i]);
        magic += hex;
      }
      return payload_error(c, "no known compression magic (starts with " + magic + ")");
    }
    case C::kNone: {
      if (payload.size() > max_output_bytes)
        return payload_error(c, "ELF of " + bytes_str(payload.size()) + " exceeds the limit of " +
                                    bytes_str(max_output_bytes));
      ASSIGN_OR_RETURN(HostBuffer buf, HostBuffer::allocate(payload.size()));
      std::memcpy(buf.bytes().data(), payload.data(), payload.size());
      return buf;
    }
    default:
      break;
  }
  if (payload.size() <= kSizeFieldBytes)
    return payload_error(
        c, "truncated: " + bytes_str(payload.size()) + " is too short for the size field");
  const uint32_t out_size = load_le32(payload.data() + payload.size() - kSizeFieldBytes);
  if (out_size == 0) return payload_error(c, "its size field says 0 bytes");
  if (out_size > max_output_bytes)
    return payload_error(c, "decompressed size " + bytes_str(out_size) + " exceeds the limit of " +
                                bytes_str(max_output_bytes));
  ASSIGN_OR_RETURN(HostBuffer buf, HostBuffer::allocate(out_size));
  const auto body = payload.first(payload.size() - kSizeFieldBytes);  // without the size field
  Result<void> r;
  switch (c) {
    case C::kGzip:
      r = inflate_gzip(payload, buf.bytes());
      break;  // ISIZE is the size field
    case C::kXz:
      r = decode_xz(body, buf.bytes());
      break;
    case C::kZstd:
      r = decode_zstd(body, buf.bytes());
      break;
    case C::kLz4:
      r = decode_lz4_legacy(body, buf.bytes());
      break;
    default:
      TERN_CHECK(false);
  }
  if (!r) return tl::unexpected(std::move(r).error());
  return buf;
}

}  // namespace tern::x86
