#include "arch/x86/kernel_payload.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <lz4.h>
#include <lzma.h>
#include <zlib.h>
#include <zstd.h>

#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "arch/x86/bzimage.h"
#include "arch/x86/bzimage_fake.h"

namespace tern::x86 {
namespace {

using Bytes = std::vector<uint8_t>;
using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr uint64_t kMax = 64 << 20;

/// An ELF-looking, partly compressible "kernel" of `n` bytes.
Bytes make_elf_like(size_t n) {
  Bytes b(n);
  uint32_t x = 12345;
  for (size_t i = 0; i < n; ++i) {
    x = x * 1103515245 + 12345;
    b[i] = (i % 64 < 40) ? static_cast<uint8_t>(i / 64) : static_cast<uint8_t>(x >> 24);
  }
  const uint8_t magic[] = {0x7F, 'E', 'L', 'F'};
  std::memcpy(b.data(), magic, sizeof magic);
  return b;
}

/// Appends the kernel's size_append: the decompressed size, LE32.
void append_size(Bytes& b, uint32_t size) {
  for (int i = 0; i < 4; ++i) b.push_back(static_cast<uint8_t>(size >> (8 * i)));
}

Bytes gzip_payload(const Bytes& in) {
  z_stream zs{};
  EXPECT_EQ(deflateInit2(&zs, 9, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY), Z_OK);
  Bytes out(deflateBound(&zs, in.size()));
  zs.next_in = const_cast<Bytef*>(in.data());
  zs.avail_in = static_cast<uInt>(in.size());
  zs.next_out = out.data();
  zs.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&zs, Z_FINISH), Z_STREAM_END);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;  // gzip's own trailer ends with ISIZE: the size field
}

/// As scripts/xz_wrap.sh: the x86 BCJ filter, LZMA2, CRC32.
Bytes xz_payload(const Bytes& in) {
  lzma_options_lzma lzma2{};
  EXPECT_FALSE(lzma_lzma_preset(&lzma2, 2));
  lzma_filter filters[] = {
      {LZMA_FILTER_X86, nullptr}, {LZMA_FILTER_LZMA2, &lzma2}, {LZMA_VLI_UNKNOWN, nullptr}};
  Bytes out(lzma_stream_buffer_bound(in.size()));
  size_t pos = 0;
  EXPECT_EQ(lzma_stream_buffer_encode(filters, LZMA_CHECK_CRC32, nullptr, in.data(), in.size(),
                                      out.data(), &pos, out.size()),
            LZMA_OK);
  out.resize(pos);
  append_size(out, static_cast<uint32_t>(in.size()));
  return out;
}

Bytes zstd_payload(const Bytes& in) {
  Bytes out(ZSTD_compressBound(in.size()));
  ZSTD_CCtx* cctx = ZSTD_createCCtx();
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, 19);
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1);  // as the zstd CLI the kernel uses
  size_t n = ZSTD_compress2(cctx, out.data(), out.size(), in.data(), in.size());
  ZSTD_freeCCtx(cctx);
  EXPECT_FALSE(ZSTD_isError(n));
  out.resize(n);
  append_size(out, static_cast<uint32_t>(in.size()));
  return out;
}

/// LZ4 legacy frames of `block`-byte blocks; a new frame (repeated magic) every `frame_blocks`.
Bytes lz4_payload(const Bytes& in, size_t block = 64 << 10, size_t frame_blocks = 3) {
  Bytes out;
  append_size(out, 0x184C2102);
  for (size_t off = 0, i = 0; off < in.size(); off += block, ++i) {
    if (i != 0 && i % frame_blocks == 0) append_size(out, 0x184C2102);
    const int n = static_cast<int>(std::min(block, in.size() - off));
    std::vector<char> c(LZ4_compressBound(n));
    int cn = LZ4_compress_default(reinterpret_cast<const char*>(in.data() + off), c.data(), n,
                                  static_cast<int>(c.size()));
    EXPECT_GT(cn, 0);
    append_size(out, static_cast<uint32_t>(cn));
    out.insert(out.end(), c.begin(), c.begin() + cn);
  }
  append_size(out, static_cast<uint32_t>(in.size()));
  return out;
}

struct Format {
  const char* name;
  PayloadCompression c;
  std::function<Bytes(const Bytes&)> make;
};

const Format kFormats[] = {
    {"gzip", PayloadCompression::kGzip, gzip_payload},
    {"xz", PayloadCompression::kXz, xz_payload},
    {"zstd", PayloadCompression::kZstd, zstd_payload},
    {"lz4", PayloadCompression::kLz4, [](const Bytes& b) { return lz4_payload(b); }},
};

/// The error context of a failing decompression ("" and a test failure if it succeeds).
std::string error_of(const Bytes& payload, uint64_t max = kMax) {
  auto r = decompress_payload(payload, max);
  EXPECT_FALSE(r) << "decompressed " << payload.size() << " bytes unexpectedly";
  if (r) return "";
  EXPECT_EQ(r.error().op, "kernel payload");
  return r.error().context;
}

TEST(KernelPayload, DetectsEveryMagic) {
  using C = PayloadCompression;
  auto d = [](Bytes b) { return detect_payload_compression(b); };
  EXPECT_EQ(d({0x7F, 'E', 'L', 'F', 2}), C::kNone);
  EXPECT_EQ(d({0x1F, 0x8B, 8}), C::kGzip);
  EXPECT_EQ(d({0xFD, '7', 'z', 'X', 'Z', 0}), C::kXz);
  EXPECT_EQ(d({0xFD, '7', 'z', 'X', 'Z'}), C::kUnknown);  // too short for the magic
  EXPECT_EQ(d({0x28, 0xB5, 0x2F, 0xFD}), C::kZstd);
  EXPECT_EQ(d({0x02, 0x21, 0x4C, 0x18}), C::kLz4);
  EXPECT_EQ(d({'B', 'Z', 'h', '9'}), C::kBzip2);
  EXPECT_EQ(d({0x5D, 0, 0, 0x80}), C::kLzma);
  EXPECT_EQ(d({0x89, 'L', 'Z', 'O'}), C::kLzo);
  EXPECT_EQ(d({}), C::kUnknown);
  EXPECT_EQ(d({0x12, 0x34, 0x56, 0x78}), C::kUnknown);
  EXPECT_EQ(payload_compression_name(C::kLz4), "lz4");
  EXPECT_EQ(payload_compression_name(C::kUnknown), "unknown");
}

TEST(KernelPayload, RoundTripsEveryFormat) {
  const Bytes elf = make_elf_like(300 << 10);
  for (const Format& f : kFormats) {
    SCOPED_TRACE(f.name);
    Bytes p = f.make(elf);
    EXPECT_EQ(detect_payload_compression(p), f.c);
    auto r = decompress_payload(p, kMax);
    ASSERT_TRUE(r) << r.error().message();
    ASSERT_EQ(r->size(), elf.size());
    EXPECT_TRUE(std::equal(elf.begin(), elf.end(), r->bytes().begin()));
  }
}

TEST(KernelPayload, Lz4LegacyBlocksOfEightMiB) {
  const Bytes elf = make_elf_like((8 << 20) + 4096);  // two blocks, the first a full 8 MiB
  auto r = decompress_payload(lz4_payload(elf, 8 << 20), kMax);
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_TRUE(std::equal(elf.begin(), elf.end(), r->bytes().begin()));
}

TEST(KernelPayload, UncompressedElfIsCopied) {
  const Bytes elf = make_elf_like(5000);
  auto r = decompress_payload(elf, kMax);
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_TRUE(std::equal(elf.begin(), elf.end(), r->bytes().begin(), r->bytes().end()));
  EXPECT_THAT(error_of(elf, 4999), HasSubstr("exceeds the limit of 4999 bytes"));
}

TEST(KernelPayload, RefusesTruncatedStreams) {
  const Bytes elf = make_elf_like(200 << 10);
  for (const Format& f : kFormats) {
    SCOPED_TRACE(f.name);
    Bytes p = f.make(elf);
    // Cut the compressed stream but keep a correct size field at the end.
    for (size_t keep : {p.size() / 2, p.size() - 40, p.size() - 5}) {
      Bytes cut(p.begin(), p.begin() + keep);
      append_size(cut, static_cast<uint32_t>(elf.size()));
      EXPECT_THAT(error_of(cut), StartsWith(std::string(f.name) + ": "));
    }
    // A payload cut anywhere: refused (the last 4 bytes are then not the size), never a crash.
    for (size_t keep = 0; keep < p.size(); keep += 97) {
      Bytes cut(p.begin(), p.begin() + keep);
      EXPECT_FALSE(decompress_payload(cut, kMax)) << keep;
    }
  }
}

TEST(KernelPayload, RefusesCorruptStreams) {
  const Bytes elf = make_elf_like(16 << 10);
  for (const Format& f : kFormats) {
    SCOPED_TRACE(f.name);
    const Bytes p = f.make(elf);
    // Flip bytes all over the stream: either an error naming the format, or (lz4 has no checksum)
    // output of exactly the size field's length.
    for (size_t i = 0; i + 4 < p.size(); i += p.size() / 200 + 1) {
      Bytes bad = p;
      bad[i] ^= 0x5A;
      auto r = decompress_payload(bad, kMax);
      if (r) {
        EXPECT_EQ(r->size(), elf.size()) << i;
      } else {
        EXPECT_EQ(r.error().op, "kernel payload");
      }
    }
  }
  // Checksummed formats catch a flipped byte in the middle of their data.
  for (const Format& f : kFormats) {
    if (f.c == PayloadCompression::kLz4) continue;
    SCOPED_TRACE(f.name);
    Bytes bad = f.make(elf);
    bad[bad.size() / 2] ^= 0x01;
    EXPECT_THAT(error_of(bad), StartsWith(std::string(f.name) + ": "));
  }
  Bytes lz4 = lz4_payload(elf);
  lz4[4] = 0xFF, lz4[5] = 0xFF, lz4[6] = 0xFF, lz4[7] = 0x7F;  // block 0's size
  EXPECT_THAT(error_of(lz4), HasSubstr("lz4: block 0 has an invalid size"));
}

TEST(KernelPayload, RefusesAWrongSizeField) {
  const Bytes elf = make_elf_like(100 << 10);
  for (const Format& f : kFormats) {
    SCOPED_TRACE(f.name);
    Bytes p = f.make(elf);
    const size_t n = p.size();
    uint32_t smaller = static_cast<uint32_t>(elf.size() - 1), larger = smaller + 2;
    std::memcpy(p.data() + n - 4, &smaller, 4);
    EXPECT_THAT(error_of(p), StartsWith(std::string(f.name) + ": "));
    std::memcpy(p.data() + n - 4, &larger, 4);
    EXPECT_THAT(error_of(p), StartsWith(std::string(f.name) + ": "));
    uint32_t zero = 0;
    std::memcpy(p.data() + n - 4, &zero, 4);
    EXPECT_THAT(error_of(p), HasSubstr("size field says 0 bytes"));
  }
}

TEST(KernelPayload, RefusesOversizeOutputBeforeAllocating) {
  const Bytes elf = make_elf_like(100 << 10);
  for (const Format& f : kFormats) {
    SCOPED_TRACE(f.name);
    EXPECT_THAT(error_of(f.make(elf), elf.size() - 1),
                HasSubstr("decompressed size 102400 bytes exceeds the limit of 102399 bytes"));
    EXPECT_TRUE(decompress_payload(f.make(elf), elf.size()));
  }
  Bytes huge = lz4_payload(make_elf_like(1000));
  uint32_t four_gib_less_one = 0xFFFFFFFF;
  std::memcpy(huge.data() + huge.size() - 4, &four_gib_less_one, 4);
  EXPECT_THAT(error_of(huge), HasSubstr("exceeds the limit"));
}

TEST(KernelPayload, RefusesEmptyShortUnknownAndUnsupported) {
  EXPECT_EQ(error_of({}), "empty payload");
  EXPECT_THAT(error_of({0x1F, 0x8B, 8, 0}), HasSubstr("gzip: truncated"));
  EXPECT_THAT(error_of({0x02, 0x21, 0x4C, 0x18}), HasSubstr("lz4: truncated"));
  EXPECT_THAT(error_of({0xAB}), HasSubstr("(starts with ab)"));
  EXPECT_THAT(error_of({0x12, 0x34, 0x56, 0x78, 9}),
              HasSubstr("unknown: no known compression magic (starts with 12 34 56 78)"));
  for (Bytes b : {Bytes{'B', 'Z', 'h', '9', 1, 2, 3, 4}, Bytes{0x5D, 0, 0, 0x80, 0, 1, 2, 3},
                  Bytes{0x89, 'L', 'Z', 'O', 0, 1, 2, 3}}) {
    std::string e = error_of(b);
    EXPECT_THAT(e, HasSubstr("unsupported compression"));
    EXPECT_THAT(e, HasSubstr("CONFIG_KERNEL_LZ4"));
    EXPECT_THAT(e, HasSubstr("CONFIG_KERNEL_ZSTD"));
  }
  EXPECT_THAT(error_of({'B', 'Z', 'h', '9', 1, 2, 3, 4}), StartsWith("bzip2: "));
}

TEST(KernelPayload, GzipMayCarryAnAppendedSizeField) {
  const Bytes elf = make_elf_like(50 << 10);
  Bytes p = gzip_payload(elf);
  append_size(p, static_cast<uint32_t>(elf.size()));
  EXPECT_TRUE(decompress_payload(p, kMax));
}

TEST(KernelPayload, DecompressesTheDebianKernelToAnElf) {
  auto file = testing::read_test_file(testing::kDebianKernelPath);
  if (!file) GTEST_SKIP() << testing::kDebianKernelPath << " not found";
  auto bz = parse_bzimage(*file);
  ASSERT_TRUE(bz) << bz.error().message();
  // boot.rst: payload_offset (0x248), payload_length (0x24C), from the protected-mode code.
  uint32_t off = 0, len = 0;
  std::memcpy(&off, file->data() + 0x248, 4);
  std::memcpy(&len, file->data() + 0x24C, 4);
  ASSERT_LE(uint64_t{off} + len, bz->payload.size());
  std::span<const uint8_t> payload(bz->payload.data() + off, len);
  EXPECT_EQ(detect_payload_compression(payload), PayloadCompression::kLz4);
  auto r = decompress_payload(payload, 256 << 20);
  ASSERT_TRUE(r) << r.error().message();
  uint32_t size_field = 0;
  std::memcpy(&size_field, payload.data() + len - 4, 4);
  EXPECT_EQ(r->size(), size_field);
  EXPECT_EQ(detect_payload_compression(r->bytes()), PayloadCompression::kNone);
  // The kernel's own decompressor would need init_size bytes; the ELF is smaller than that.
  EXPECT_LT(r->size(), bz->init_size);
}

}  // namespace
}  // namespace tern::x86
