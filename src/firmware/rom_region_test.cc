#include "firmware/rom_region.h"

#include <fcntl.h>
#include <gtest/gtest.h>

#include <fstream>

#include "base/testing/temp_dir.h"

namespace tern {
namespace {

void write_file(const std::string& path, size_t n, char fill) {
  std::ofstream(path, std::ios::binary) << std::string(n, fill);
}

TEST(RomRegion, FromFileHoldsTheImageSealed) {
  testing::TempDir dir("tern-rom");
  std::string path = dir.path() + "/fw.bin";
  write_file(path, 2 * 4096, 'x');
  auto rom = RomRegion::from_file(path, "--firmware");
  ASSERT_TRUE(rom) << rom.error().message();
  EXPECT_EQ(rom->size(), 8192u);
  EXPECT_EQ(rom->bytes()[8191], 'x');
  int seals = ::fcntl(rom->fd().get(), F_GET_SEALS);
  EXPECT_EQ(seals & (F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW),
            F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW);
  write_file(path, 4096, 'y');  // the file changing later does not change the image
  EXPECT_EQ(rom->bytes()[0], 'x');
}

TEST(RomRegion, BadFilesAreRefusedNamingTheField) {
  testing::TempDir dir("tern-rom");
  auto refused = [&](const std::string& path, const std::string& words) {
    auto rom = RomRegion::from_file(path, "--firmware");
    ASSERT_FALSE(rom) << path;
    std::string m = rom.error().message();
    EXPECT_EQ(m.rfind("--firmware", 0), 0u) << m;
    EXPECT_NE(m.find(words), std::string::npos) << m;
  };
  refused(dir.path() + "/missing.bin", "No such file");
  refused(dir.path(), "is a directory");
  write_file(dir.path() + "/empty", 0, 0);
  refused(dir.path() + "/empty", "is empty");
  write_file(dir.path() + "/odd", 4097, 0);
  refused(dir.path() + "/odd", "not a multiple of 4096");
  write_file(dir.path() + "/huge", kMaxRomBytes + 4096, 0);
  refused(dir.path() + "/huge", "exceeds");
}

TEST(RomRegion, WriteSinkDropsAndCountsWrites) {
  std::vector<uint8_t> image(4096, 0xAA);
  auto rom = RomRegion::from_bytes(image, "t");
  ASSERT_TRUE(rom) << rom.error().message();
  RomWriteSink sink(*rom, "firmware-code");
  const uint8_t v[2] = {1, 2};
  sink.write(0, v);
  uint8_t out[4];
  sink.read(4094, out);
  EXPECT_EQ(out[0], 0xAA);
  EXPECT_EQ(out[2], 0xFF);  // past the image
  EXPECT_EQ(rom->bytes()[0], 0xAA);
  EXPECT_EQ(sink.dropped_writes(), 1u);
}

}  // namespace
}  // namespace tern
