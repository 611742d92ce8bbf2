#include "firmware/fw_cfg/fw_cfg_device.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <thread>

#include "firmware/fw_cfg/testing/fw_cfg_rig.h"

namespace tern::fw_cfg {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using testing::FwCfgRig;

constexpr uint64_t kDesc = 0x100;  // descriptor GPA
constexpr uint64_t kBuf = 0x1000;  // buffer GPA

std::vector<uint8_t> bytes(std::string_view s) {
  return {s.begin(), s.end()};
}

FwCfgItems sample_items() {
  FwCfgItems items;
  EXPECT_TRUE(items.add_file("etc/hello", bytes("hello, firmware")));
  EXPECT_TRUE(items.add_file("etc/a-first", bytes("A")));
  EXPECT_TRUE(items.set_item_le(kNbCpus, 2, 2));
  return items;
}

uint16_t hello_key(FwCfgRig& rig) {
  return *rig.dev().items().file_key("etc/hello");
}

TEST(FwCfgDevice, SignatureAndIdThroughTheDataPort) {
  FwCfgRig rig(sample_items());
  rig.select(kSignature);
  EXPECT_EQ(rig.data_bytes(4), bytes("QEMU"));
  EXPECT_EQ(rig.data_byte(), 0) << "past the end reads 0";
  rig.select(kId);
  EXPECT_THAT(rig.data_bytes(4), ElementsAre(kIdTraditional | kIdDma, 0, 0, 0));
  rig.select(kNbCpus);
  EXPECT_THAT(rig.data_bytes(2), ElementsAre(2, 0));
  // The write-channel bit (14) reaches the same item; a key with no item reads 0.
  rig.select(kSignature | kWriteChannel);
  EXPECT_EQ(rig.data_byte(), 'Q');
  rig.select(0x3FFF);
  EXPECT_EQ(rig.data_bytes(3), std::vector<uint8_t>(3, 0));
}

TEST(FwCfgDevice, WideDataReadsReturnConsecutiveBytes) {
  FwCfgRig rig(sample_items());
  rig.select(kSignature);
  uint8_t two[2];
  rig.dev().read(FwCfgDevice::kDataOffset, two);
  EXPECT_THAT(two, ElementsAre('Q', 'E'));
  rig.dev().read(FwCfgDevice::kSelectorOffset, two);  // the combined 0x510/0x511 region
  EXPECT_THAT(two, ElementsAre('M', 'U'));
}

TEST(FwCfgDevice, DmaRegisterReadsTheDmaSignature) {
  FwCfgRig rig(sample_items());
  uint8_t b[8];
  rig.dev().read(FwCfgDevice::kDmaOffset, std::span(b, 4));
  rig.dev().read(FwCfgDevice::kDmaOffset + 4, std::span(b + 4, 4));
  EXPECT_EQ(std::string(b, b + 8), "QEMU CFG");
  uint8_t unused[2];
  rig.dev().read(2, unused);
  EXPECT_THAT(unused, ElementsAre(0xFF, 0xFF));
}

TEST(FwCfgDevice, DataPortWritesAreIgnored) {
  FwCfgRig rig(sample_items());
  rig.select(kSignature);
  const uint8_t x = 'X';
  rig.dev().write(FwCfgDevice::kDataOffset, std::span(&x, 1));
  rig.dev().write(FwCfgDevice::kSelectorOffset, std::span(&x, 1));  // 1-byte selector write
  EXPECT_EQ(rig.data_bytes(4), bytes("QEMU"));
  EXPECT_EQ(rig.dev().stats().bad_accesses, 2u);
}

TEST(FwCfgDevice, DirectoryThroughThePorts) {
  FwCfgRig rig(sample_items());
  rig.select(kFileDir);
  EXPECT_THAT(rig.data_bytes(4), ElementsAre(0, 0, 0, 2));  // be32 count
  // First entry: "etc/a-first" (sorted), be32 size 1, be16 key 0x20.
  auto e = rig.data_bytes(kFileEntrySize);
  EXPECT_THAT(std::vector<uint8_t>(e.begin(), e.begin() + 8),
              ElementsAre(0, 0, 0, 1, 0, 0x20, 0, 0));
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(e.data() + 8)), "etc/a-first");
  e = rig.data_bytes(kFileEntrySize);
  EXPECT_THAT(std::vector<uint8_t>(e.begin(), e.begin() + 8),
              ElementsAre(0, 0, 0, 15, 0, 0x21, 0, 0));
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(e.data() + 8)), "etc/hello");
}

TEST(FwCfgDevice, DmaReadOfAFile) {
  FwCfgRig rig(sample_items());
  const uint16_t key = hello_key(rig);
  rig.put_descriptor(kDesc, uint32_t{key} << 16 | FwCfgDevice::kDmaSelect | FwCfgDevice::kDmaRead,
                     15, kBuf);
  rig.start_dma(kDesc);
  EXPECT_EQ(rig.control_at(kDesc), 0u);
  EXPECT_EQ(rig.bytes_at(kBuf, 15), bytes("hello, firmware"));
  EXPECT_EQ(rig.dev().stats().dma_ops, 1u);
  EXPECT_EQ(rig.dev().stats().dma_bytes, 15u);
  EXPECT_EQ(rig.data_byte(), 0) << "the offset reached the end";
}

TEST(FwCfgDevice, SelectSkipThenRead) {
  FwCfgRig rig(sample_items());
  const uint16_t key = hello_key(rig);
  rig.put_descriptor(kDesc, uint32_t{key} << 16 | FwCfgDevice::kDmaSelect | FwCfgDevice::kDmaSkip,
                     7, 0);
  rig.start_dma(kDesc);
  EXPECT_EQ(rig.control_at(kDesc), 0u);
  rig.put_descriptor(kDesc, FwCfgDevice::kDmaRead, 4, kBuf);
  rig.start_dma(kDesc);
  EXPECT_EQ(rig.control_at(kDesc), 0u);
  EXPECT_EQ(rig.bytes_at(kBuf, 4), bytes("firm"));
  EXPECT_EQ(rig.data_byte(), 'w') << "the data port continues where DMA stopped";
  // A skip past the end stops at the end.
  rig.put_descriptor(kDesc, FwCfgDevice::kDmaSkip, 1000, 0);
  rig.start_dma(kDesc);
  EXPECT_EQ(rig.data_byte(), 0);
}

TEST(FwCfgDevice, DmaReadPastTheEndFillsZerosAndCopiesOnlyTheItem) {
  FwCfgRig rig(sample_items());
  std::vector<uint8_t> junk(64, 0xAA);
  ASSERT_TRUE(rig.mem().write(kBuf, junk));
  rig.put_descriptor(
      kDesc, uint32_t{kSignature} << 16 | FwCfgDevice::kDmaSelect | FwCfgDevice::kDmaRead, 8, kBuf);
  rig.start_dma(kDesc);
  EXPECT_EQ(rig.control_at(kDesc), 0u);
  EXPECT_THAT(rig.bytes_at(kBuf, 9), ElementsAre('Q', 'E', 'M', 'U', 0, 0, 0, 0, 0xAA));
  EXPECT_EQ(rig.dev().stats().dma_bytes, 4u);
}

TEST(FwCfgDevice, EightByteDmaWriteStartsTheOperation) {
  FwCfgRig rig(sample_items());
  rig.put_descriptor(
      kDesc, uint32_t{kSignature} << 16 | FwCfgDevice::kDmaSelect | FwCfgDevice::kDmaRead, 4, kBuf);
  uint8_t addr[8];
  FwCfgRig::put_be(addr, kDesc, 8);
  rig.dev().write(FwCfgDevice::kDmaOffset, addr);
  EXPECT_EQ(rig.control_at(kDesc), 0u);
  EXPECT_EQ(rig.bytes_at(kBuf, 4), bytes("QEMU"));
}

/// Runs one DMA request expected to fail: ERROR written back, nothing copied, selection and
/// offset as they were.
void expect_refused(FwCfgRig& rig, uint32_t control, uint32_t length, uint64_t address) {
  rig.select(kSignature);
  (void)rig.data_byte();  // offset 1
  std::vector<uint8_t> before = rig.bytes_at(kBuf, 64);
  const uint64_t errors = rig.dev().stats().dma_errors;
  rig.put_descriptor(kDesc, control, length, address);
  rig.start_dma(kDesc);
  EXPECT_EQ(rig.control_at(kDesc), FwCfgDevice::kDmaError);
  EXPECT_EQ(rig.dev().stats().dma_errors, errors + 1);
  EXPECT_EQ(rig.bytes_at(kBuf, 64), before);
  EXPECT_EQ(rig.data_byte(), 'E') << "selection and offset untouched";
}

TEST(FwCfgDevice, DmaErrors) {
  FwCfgRig rig(sample_items());
  const uint32_t sel_read =
      uint32_t{kNbCpus} << 16 | FwCfgDevice::kDmaSelect | FwCfgDevice::kDmaRead;
  SCOPED_TRACE("address outside RAM");
  expect_refused(rig, sel_read, 4, 0x8000);
  SCOPED_TRACE("wrapping length");
  expect_refused(rig, sel_read, 0x100, ~uint64_t{0} - 0x10);
  SCOPED_TRACE("buffer running past the end of a region");
  expect_refused(rig, sel_read, 0x20, FwCfgRig::kLowSize - 0x10);
  SCOPED_TRACE("WRITE: items are read-only");
  expect_refused(rig, uint32_t{kNbCpus} << 16 | FwCfgDevice::kDmaSelect | FwCfgDevice::kDmaWrite, 2,
                 kBuf);
  expect_refused(rig, FwCfgDevice::kDmaWrite, 2, kBuf);
  SCOPED_TRACE("unknown control bit");
  expect_refused(rig, sel_read | (1u << 5), 2, kBuf);
  expect_refused(rig, sel_read | (1u << 15), 2, kBuf);
  SCOPED_TRACE("ERROR bit set by the guest");
  expect_refused(rig, sel_read | FwCfgDevice::kDmaError, 2, kBuf);
  SCOPED_TRACE("address above 4 GiB through the high half");
  expect_refused(rig, sel_read, 4, (uint64_t{1} << 32) | kBuf);
}

TEST(FwCfgDevice, DescriptorOutsideRamIsCountedAndNothingHappens) {
  FwCfgRig rig(sample_items());
  rig.select(kSignature);
  rig.start_dma(0x8000);                  // the gap between the regions
  rig.start_dma(FwCfgRig::kLowSize - 8);  // straddles the end of low RAM
  rig.start_dma(~uint64_t{0} - 4);        // wraps
  EXPECT_EQ(rig.dev().stats().dma_unreachable, 3u);
  EXPECT_EQ(rig.dev().stats().dma_ops, 0u);
  EXPECT_EQ(rig.data_byte(), 'Q');
}

TEST(FwCfgDevice, HighHalfIsClearedAfterEachOperation) {
  FwCfgRig rig(sample_items());
  uint8_t hi[4];
  FwCfgRig::put_be(hi, 1, 4);  // 4 GiB: not RAM here
  rig.dev().write(FwCfgDevice::kDmaOffset, hi);
  uint8_t lo[4];
  FwCfgRig::put_be(lo, kDesc, 4);
  rig.dev().write(FwCfgDevice::kDmaOffset + 4, lo);
  EXPECT_EQ(rig.dev().stats().dma_unreachable, 1u);
  // SeaBIOS writes only the low half for a descriptor below 4 GiB.
  rig.put_descriptor(
      kDesc, uint32_t{kSignature} << 16 | FwCfgDevice::kDmaSelect | FwCfgDevice::kDmaRead, 4, kBuf);
  rig.dev().write(FwCfgDevice::kDmaOffset + 4, lo);
  EXPECT_EQ(rig.control_at(kDesc), 0u);
  EXPECT_EQ(rig.bytes_at(kBuf, 4), bytes("QEMU"));
}

TEST(FwCfgDevice, SaveRestoreMidRead) {
  FwCfgRig rig(sample_items());
  const uint16_t key = hello_key(rig);
  rig.select(key);
  EXPECT_EQ(rig.data_bytes(7), bytes("hello, "));
  uint8_t hi[4] = {0, 0, 0, 0};
  rig.dev().write(FwCfgDevice::kDmaOffset, hi);
  snap::ByteWriter w;
  rig.dev().save_state(w);

  rig.recreate(sample_items());
  snap::ByteReader r(w.data(), "fw_cfg");
  ASSERT_TRUE(rig.dev().restore_state(r).has_value());
  EXPECT_TRUE(r.expect_end().has_value());
  EXPECT_EQ(rig.data_bytes(8), bytes("firmware"));
}

TEST(FwCfgDevice, RestoreRefusesAnOffsetPastTheItem) {
  FwCfgRig rig(sample_items());
  rig.select(hello_key(rig));
  (void)rig.data_bytes(10);
  snap::ByteWriter w;
  rig.dev().save_state(w);
  FwCfgItems other;  // no files: key 0x21 has no item
  rig.recreate(std::move(other));
  snap::ByteReader r(w.data(), "fw_cfg");
  auto res = rig.dev().restore_state(r);
  ASSERT_FALSE(res.has_value());
  EXPECT_THAT(res.error().message(), ::testing::HasSubstr("offset"));
  snap::ByteReader bad(std::vector<uint8_t>{9, 0, 0, 0}, "fw_cfg");
  EXPECT_FALSE(rig.dev().restore_state(bad).has_value()) << "unknown version";
}

/// vCPUs use the device at once: each DMA request (SELECT + READ) is one step under the
/// device's lock, so every thread gets whole, correct items whatever the interleaving.
TEST(FwCfgDevice, ConcurrentDmaReadsSeeWholeItems) {
  FwCfgRig rig(sample_items());
  const uint16_t keys[2] = {hello_key(rig), *rig.dev().items().file_key("etc/a-first")};
  const std::vector<uint8_t> want[2] = {bytes("hello, firmware"), bytes("A")};
  int bad[2] = {0, 0};
  auto worker = [&](int t) {
    const uint64_t desc = kDesc + 0x40 * t, buf = kBuf + 0x100 * t;
    for (int i = 0; i < 2000; ++i) {
      rig.put_descriptor(desc,
                         uint32_t{keys[t]} << 16 | FwCfgDevice::kDmaSelect | FwCfgDevice::kDmaRead,
                         static_cast<uint32_t>(want[t].size()), buf);
      rig.start_dma(desc);  // the high half is shared too: both threads write 0 there
      if (rig.control_at(desc) != 0 || rig.bytes_at(buf, want[t].size()) != want[t]) ++bad[t];
    }
  };
  std::thread a(worker, 0), b(worker, 1);
  a.join();
  b.join();
  EXPECT_EQ(bad[0], 0);
  EXPECT_EQ(bad[1], 0);
  EXPECT_EQ(rig.dev().stats().dma_ops, 4000u);
}

}  // namespace
}  // namespace tern::fw_cfg
