#include "snapshot/state_file.h"

#include <gtest/gtest.h>

#include "base/testing/temp_dir.h"
#include <sys/stat.h>
#include <unistd.h>

#include <zlib.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "snapshot/codec.h"

namespace tern::snap {
namespace {

StateFile sample() {
  StateFile f;
  f.tern_version = TERN_VERSION;
  f.sections.push_back({1, 3, {1, 2, 3, 4, 5}});
  f.sections.push_back({7, 1, {}});
  f.sections.push_back({0x42, 2, std::vector<uint8_t>(40, 0xAB)});
  return f;
}

void expect_same(const StateFile& a, const StateFile& b) {
  EXPECT_EQ(a.tern_version, b.tern_version);
  ASSERT_EQ(a.sections.size(), b.sections.size());
  for (size_t i = 0; i < a.sections.size(); ++i) {
    EXPECT_EQ(a.sections[i].id, b.sections[i].id);
    EXPECT_EQ(a.sections[i].version, b.sections[i].version);
    EXPECT_EQ(a.sections[i].data, b.sections[i].data);
  }
}

TEST(StateFile, SerializeParseRoundTrip) {
  auto bytes = serialize_state_file(sample());
  auto f = parse_state_file(bytes, "mem");
  ASSERT_TRUE(f) << f.error().message();
  expect_same(*f, sample());
  ASSERT_NE(f->find(7), nullptr);
  EXPECT_EQ(f->find(7)->version, 1u);
  EXPECT_EQ(f->find(8), nullptr);
}

TEST(StateFile, EmptyFileRoundTrips) {
  StateFile e;
  auto f = parse_state_file(serialize_state_file(e), "mem");
  ASSERT_TRUE(f) << f.error().message();
  EXPECT_TRUE(f->sections.empty());
}

TEST(StateFile, LayoutStartsWithMagicAndVersion) {
  auto bytes = serialize_state_file(sample());
  ASSERT_GE(bytes.size(), 16u);
  EXPECT_EQ(std::string(bytes.begin(), bytes.begin() + 8), "TERNSNAP");
  EXPECT_EQ(bytes[8], kStateFormatMajor);
  EXPECT_EQ(bytes[9], 0);
  EXPECT_EQ(bytes[10], kStateFormatMinor);
}

TEST(StateFile, EveryTruncationIsRejected) {
  auto bytes = serialize_state_file(sample());
  for (size_t n = 0; n < bytes.size(); ++n) {
    auto f = parse_state_file(std::span<const uint8_t>(bytes.data(), n), "cut.state");
    ASSERT_FALSE(f) << "prefix of " << n << " bytes accepted";
    EXPECT_NE(f.error().message().find("cut.state"), std::string::npos) << f.error().message();
    EXPECT_NE(f.error().message().find("truncated"), std::string::npos)
        << n << ": " << f.error().message();
  }
}

TEST(StateFile, EveryFlippedByteIsRejected) {
  const auto good = serialize_state_file(sample());
  for (size_t i = 0; i < good.size(); ++i) {
    for (uint8_t mask : {uint8_t{0x01}, uint8_t{0x80}, uint8_t{0xFF}}) {
      auto bytes = good;
      bytes[i] ^= mask;
      auto f = parse_state_file(bytes, "flip.state");
      ASSERT_FALSE(f) << "flip at " << i << " mask " << int(mask) << " accepted";
      EXPECT_NE(f.error().message().find("flip.state"), std::string::npos);
    }
  }
  // A flip in a section's payload is reported as corruption.
  auto bytes = good;
  bytes[bytes.size() - 10] ^= 1;
  auto f = parse_state_file(bytes, "flip.state");
  ASSERT_FALSE(f);
  EXPECT_NE(f.error().message().find("checksum mismatch: the file is corrupt"), std::string::npos)
      << f.error().message();
}

TEST(StateFile, OtherMajorVersionRefusedWithVersionMessage) {
  auto bytes = serialize_state_file(sample());
  bytes[8] = 2;   // major 2
  bytes[10] = 5;  // minor 5
  auto f = parse_state_file(bytes, "new.state");
  ASSERT_FALSE(f);
  EXPECT_NE(f.error().message().find("format version 2.5, this tern reads 1.x"), std::string::npos)
      << f.error().message();
}

TEST(StateFile, NewerMinorVersionAccepted) {
  // Minor versions only add compatible data: a 1.9 file with a valid checksum is read.
  auto bytes = serialize_state_file(sample());
  bytes[10] = 9;
  uint32_t crc = static_cast<uint32_t>(::crc32(0L, bytes.data(), static_cast<uInt>(bytes.size() - 4)));
  std::memcpy(bytes.data() + bytes.size() - 4, &crc, 4);
  auto f = parse_state_file(bytes, "minor.state");
  ASSERT_TRUE(f) << f.error().message();
  expect_same(*f, sample());
  EXPECT_EQ(f->format_minor, 9);
}

TEST(StateFile, UnknownMagicRefused) {
  auto bytes = serialize_state_file(sample());
  bytes[0] = 'X';
  auto f = parse_state_file(bytes, "other.bin");
  ASSERT_FALSE(f);
  EXPECT_NE(f.error().message().find("not a tern state file"), std::string::npos);
  EXPECT_NE(f.error().message().find("other.bin"), std::string::npos);
  std::vector<uint8_t> garbage{'h', 'e', 'l', 'l', 'o'};
  EXPECT_FALSE(parse_state_file(garbage, "x"));
}

TEST(StateFile, DuplicateIdsRefused) {
  StateFile f = sample();
  f.sections.push_back({1, 1, {9}});
  testing::TempDir d{"tern-state"};
  auto w = write_state_file(d.path() + "/dup.state", f);
  ASSERT_FALSE(w);
  EXPECT_NE(w.error().message().find("duplicate section id 1"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(d.path() + "/dup.state"));
  EXPECT_TRUE(std::filesystem::is_empty(d.path()));
  EXPECT_DEATH((void)serialize_state_file(f), "invariant");
}

TEST(StateFile, DuplicateIdsRefusedByReader) {
  // Hand-built file: valid layout and checksum, two sections with id 5.
  ByteWriter w;
  w.bytes(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>("TERNSNAP"), 8));
  w.u16(1);
  w.u16(0);
  w.u32(0);
  w.string("t");
  w.u32(2);
  for (int i = 0; i < 2; ++i) {
    w.u32(5);
    w.u32(1);
    w.u64(1);
    w.u8(0xEE);
  }
  auto bytes = w.take();
  uint32_t crc = static_cast<uint32_t>(::crc32(0L, bytes.data(), static_cast<uInt>(bytes.size())));
  bytes.resize(bytes.size() + 4);
  std::memcpy(bytes.data() + bytes.size() - 4, &crc, 4);
  auto f = parse_state_file(bytes, "dup.state");
  ASSERT_FALSE(f);
  EXPECT_NE(f.error().message().find("duplicate section id 5"), std::string::npos)
      << f.error().message();
}

TEST(StateFile, OverlongVersionStringRefusedByWriter) {
  StateFile f;
  f.tern_version = std::string(65, 'v');
  testing::TempDir d{"tern-state"};
  EXPECT_FALSE(write_state_file(d.path() + "/v.state", f));
}

TEST(StateFile, WriteReadRoundTripAtomically) {
  testing::TempDir d{"tern-state"};
  const std::string p = d.path() + "/vm.state";
  ASSERT_TRUE(write_state_file(p, sample()));
  struct stat st {};
  ASSERT_EQ(::stat(p.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(d.path()), {}), 1);  // no temporary
  auto f = read_state_file(p);
  ASSERT_TRUE(f) << f.error().message();
  expect_same(*f, sample());
  // Overwrite replaces the whole file.
  StateFile g;
  g.tern_version = "x";
  ASSERT_TRUE(write_state_file(p, g));
  auto h = read_state_file(p);
  ASSERT_TRUE(h) << h.error().message();
  EXPECT_TRUE(h->sections.empty());
}

TEST(StateFile, ReadErrorsNameThePath) {
  testing::TempDir d{"tern-state"};
  auto missing = read_state_file(d.path() + "/nope.state");
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message().find("nope.state"), std::string::npos);
  auto dir = read_state_file(d.path());
  ASSERT_FALSE(dir);
  EXPECT_NE(dir.error().message().find(d.path()), std::string::npos);
  // A truncated file on disk.
  auto bytes = serialize_state_file(sample());
  const std::string p = d.path() + "/cut.state";
  std::ofstream(p, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), 20);
  auto cut = read_state_file(p);
  ASSERT_FALSE(cut);
  EXPECT_NE(cut.error().message().find(p), std::string::npos);
  EXPECT_NE(cut.error().message().find("truncated"), std::string::npos) << cut.error().message();
}

TEST(StateFile, OversizedFileRefusedBeforeReading) {
  testing::TempDir d{"tern-state"};
  const std::string p = d.path() + "/big.state";
  { std::ofstream(p, std::ios::binary).write("TERNSNAP", 8); }
  std::filesystem::resize_file(p, kMaxStateFileSize + 1);  // sparse: costs no disk
  auto f = read_state_file(p);
  ASSERT_FALSE(f);
  EXPECT_NE(f.error().message().find("limit"), std::string::npos) << f.error().message();
}

TEST(StateFile, WriteToUnwritableDirFailsNamingPathAndLeavesNothing) {
  testing::TempDir d{"tern-state"};
  const std::string missing_dir = d.path() + "/no/such/dir/vm.state";
  auto w = write_state_file(missing_dir, sample());
  ASSERT_FALSE(w);
  EXPECT_NE(w.error().message().find(missing_dir), std::string::npos) << w.error().message();

  // root ignores directory permissions; /sys refuses new files even for root.
  std::string dir = "/sys";
  if (::geteuid() != 0) {
    dir = d.path() + "/ro";
    ASSERT_EQ(::mkdir(dir.c_str(), 0500), 0);
  }
  const std::string p = dir + "/vm.state";
  auto r = write_state_file(p, sample());
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message().find(p), std::string::npos) << r.error().message();
  EXPECT_FALSE(std::filesystem::exists(p));
  if (dir != "/sys") {
    EXPECT_TRUE(std::filesystem::is_empty(dir));  // no temporary
  }
}

}  // namespace
}  // namespace tern::snap
