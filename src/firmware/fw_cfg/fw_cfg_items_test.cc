#include "firmware/fw_cfg/fw_cfg_items.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

namespace tern::fw_cfg {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<uint8_t> bytes(std::string_view s) {
  return {s.begin(), s.end()};
}

TEST(FwCfgItems, BuiltInItems) {
  FwCfgItems items;
  ASSERT_NE(items.find(kSignature), nullptr);
  EXPECT_EQ(*items.find(kSignature), bytes("QEMU"));
  EXPECT_THAT(*items.find(kId), ElementsAre(3, 0, 0, 0));
  EXPECT_THAT(*items.find(kFileDir), ElementsAre(0, 0, 0, 0));
  EXPECT_EQ(items.find(kNbCpus), nullptr);
  EXPECT_EQ(items.find(kFileFirst), nullptr);
}

TEST(FwCfgItems, FilesAreKeyedInNameOrderAndTheDirectoryFollows) {
  FwCfgItems items;
  ASSERT_TRUE(items.add_file("etc/table-loader", bytes("LL")));
  ASSERT_TRUE(items.add_file("bootorder", bytes("B")));
  ASSERT_TRUE(items.add_file("etc/e820", bytes("EEEE")));
  EXPECT_THAT(items.file_names(), ElementsAre("bootorder", "etc/e820", "etc/table-loader"));
  EXPECT_EQ(items.file_key("bootorder"), kFileFirst);
  EXPECT_EQ(items.file_key("etc/e820"), kFileFirst + 1);
  EXPECT_EQ(items.file_key("etc/table-loader"), kFileFirst + 2);
  EXPECT_EQ(*items.find(kFileFirst + 1), bytes("EEEE"));
  EXPECT_EQ(items.find(kFileFirst + 3), nullptr);

  const std::vector<uint8_t>& dir = *items.find(kFileDir);
  ASSERT_EQ(dir.size(), 4 + 3 * kFileEntrySize);
  EXPECT_THAT(std::vector<uint8_t>(dir.begin(), dir.begin() + 4), ElementsAre(0, 0, 0, 3));
  const uint8_t* e = dir.data() + 4 + kFileEntrySize;  // second entry
  EXPECT_THAT(std::vector<uint8_t>(e, e + 8), ElementsAre(0, 0, 0, 4, 0, 0x21, 0, 0));
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(e + 8)), "etc/e820");
  EXPECT_EQ(e[8 + kFileNameSize - 1], 0);
}

TEST(FwCfgItems, AddFileRefusesBadNames) {
  FwCfgItems items;
  ASSERT_TRUE(items.add_file("x", {}));
  auto dup = items.add_file("x", bytes("again"));
  ASSERT_FALSE(dup);
  EXPECT_THAT(dup.error().message(), HasSubstr("already present"));
  EXPECT_FALSE(items.add_file("", {}));
  EXPECT_FALSE(items.add_file(std::string(kFileNameSize, 'n'), {}));
  EXPECT_TRUE(items.add_file(std::string(kFileNameSize - 1, 'n'), {}));
  EXPECT_FALSE(items.add_file(std::string("a\0b", 3), {}));
  EXPECT_EQ(items.file_count(), 2u);
}

TEST(FwCfgItems, NumberedItems) {
  FwCfgItems items;
  ASSERT_TRUE(items.set_item_le(kNbCpus, 0x0102, 2));
  EXPECT_THAT(*items.find(kNbCpus), ElementsAre(2, 1));
  EXPECT_EQ(items.find(kNbCpus | kWriteChannel), items.find(kNbCpus));
  ASSERT_TRUE(items.set_item(kArchLocal + 3, bytes("arch")));
  EXPECT_EQ(*items.find(kArchLocal + 3), bytes("arch"));
  EXPECT_FALSE(items.set_item(kSignature, bytes("XXXX")));
  EXPECT_FALSE(items.set_item(kFileDir, {}));
  EXPECT_FALSE(items.set_item(kFileFirst, {}));
  EXPECT_FALSE(items.set_item(kNbCpus | kWriteChannel, {}));
  EXPECT_FALSE(items.set_item_le(kNbCpus, 1, 3));
}

TEST(FwCfgItems, CopiesAreIndependent) {
  FwCfgItems a;
  ASSERT_TRUE(a.add_file("f", bytes("1")));
  FwCfgItems b = a;
  ASSERT_TRUE(b.add_file("e", bytes("2")));
  EXPECT_EQ(*a.find(kFileFirst), bytes("1"));
  EXPECT_EQ(*b.find(kFileFirst), bytes("2"));
}

}  // namespace
}  // namespace tern::fw_cfg
