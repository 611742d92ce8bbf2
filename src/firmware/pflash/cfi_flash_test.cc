#include "firmware/pflash/cfi_flash.h"

#include <gtest/gtest.h>

#include <vector>

namespace tern {
namespace {

constexpr uint32_t kBlock = 4096;

struct Rig {
  std::vector<uint8_t> mem = std::vector<uint8_t>(4 * kBlock, 0xFF);
  CfiFlash flash{mem, kBlock};

  void w8(uint64_t off, uint8_t v) { flash.write(off, std::span<const uint8_t>(&v, 1)); }
  uint8_t r8(uint64_t off) {
    uint8_t v = 0;
    flash.read(off, std::span<uint8_t>(&v, 1));
    return v;
  }
  uint32_t r32(uint64_t off) {
    uint8_t b[4];
    flash.read(off, b);
    return b[0] | b[1] << 8 | b[2] << 16 | uint32_t{b[3]} << 24;
  }
};

TEST(CfiFlash, StartsInReadArrayWithReadyStatus) {
  Rig r;
  r.mem[5] = 0x42;
  EXPECT_TRUE(r.flash.read_array());
  EXPECT_EQ(r.flash.status(), kCfiStatusReady);
  EXPECT_EQ(r.r8(5), 0x42);
}

// OVMF's QemuFlashDetected: read a byte, write 0x50, read it back (array data, not 0x50), write
// 0x70, read 0x00 ("FD behaves as FLASH"), write 0xFF.
TEST(CfiFlash, OvmfDetectionSequenceSeesFlash) {
  Rig r;
  r.mem[0] = 0x5A;
  uint8_t original = r.r8(0);
  r.w8(0, 0x50);
  EXPECT_TRUE(r.flash.read_array());
  EXPECT_EQ(r.r8(0), original);
  r.w8(0, 0x70);
  EXPECT_FALSE(r.flash.read_array());
  EXPECT_EQ(r.r8(0), 0x00);
  r.w8(0, 0xFF);
  EXPECT_TRUE(r.flash.read_array());
  EXPECT_EQ(r.r8(0), 0x5A);
  EXPECT_EQ(r.flash.counters().bad_sequences, 0u);
}

// OVMF's QemuFlashWrite: 0x10 + byte per byte, then 0xFF at the last address.
TEST(CfiFlash, ProgramBytesThenReadArray) {
  Rig r;
  const uint8_t data[] = {0x11, 0x22, 0x33};
  for (size_t i = 0; i < 3; ++i) {
    r.w8(100 + i, 0x10);
    EXPECT_EQ(r.flash.mode(), CfiFlash::Mode::kProgram);
    r.w8(100 + i, data[i]);
    EXPECT_EQ(r.flash.mode(), CfiFlash::Mode::kReadStatus);
    EXPECT_EQ(r.r8(100 + i), kCfiStatusReady);  // status, not data, until 0xFF
  }
  r.w8(102, 0xFF);
  EXPECT_TRUE(r.flash.read_array());
  EXPECT_EQ(r.r8(100), 0x11);
  EXPECT_EQ(r.r8(101), 0x22);
  EXPECT_EQ(r.r8(102), 0x33);
  EXPECT_EQ(r.flash.counters().programs, 3u);
  auto changed = r.flash.take_changed();
  ASSERT_TRUE(changed);
  EXPECT_EQ(changed->first, 100u);
  EXPECT_EQ(changed->second, 102u);
  EXPECT_FALSE(r.flash.take_changed());
}

// QEMU stores the value (bits can go 0 → 1 without an erase); OVMF was written against it.
TEST(CfiFlash, ProgramStoresTheValueAsQemuDoes) {
  Rig r;
  r.mem[7] = 0x0F;
  r.w8(7, 0x40);
  r.w8(7, 0xF0);
  r.w8(7, 0xFF);
  EXPECT_EQ(r.r8(7), 0xF0);
}

TEST(CfiFlash, WordProgramAcrossABlockBoundary) {
  Rig r;
  r.w8(kBlock - 2, 0x10);
  const uint8_t word[4] = {1, 2, 3, 4};
  r.flash.write(kBlock - 2, word);
  r.w8(0, 0xFF);
  EXPECT_EQ(r.mem[kBlock - 2], 1);
  EXPECT_EQ(r.mem[kBlock - 1], 2);
  EXPECT_EQ(r.mem[kBlock], 3);
  EXPECT_EQ(r.mem[kBlock + 1], 4);
  auto changed = r.flash.take_changed();
  ASSERT_TRUE(changed);
  EXPECT_EQ(changed->first, kBlock - 2u);
  EXPECT_EQ(changed->second, kBlock + 1u);
}

TEST(CfiFlash, BlockEraseClearsOnlyItsBlock) {
  Rig r;
  std::fill(r.mem.begin(), r.mem.end(), 0x00);
  r.w8(kBlock + 123, 0x20);  // any address inside block 1
  EXPECT_EQ(r.flash.mode(), CfiFlash::Mode::kEraseSetup);
  EXPECT_EQ(r.mem[kBlock], 0x00);  // nothing happens before the confirm
  r.w8(kBlock + 123, 0xD0);
  EXPECT_EQ(r.r8(0), kCfiStatusReady);
  r.w8(0, 0xFF);
  EXPECT_EQ(r.mem[kBlock - 1], 0x00);
  EXPECT_EQ(r.mem[kBlock], 0xFF);
  EXPECT_EQ(r.mem[2 * kBlock - 1], 0xFF);
  EXPECT_EQ(r.mem[2 * kBlock], 0x00);
  EXPECT_EQ(r.flash.counters().erases, 1u);
  auto changed = r.flash.take_changed();
  ASSERT_TRUE(changed);
  EXPECT_EQ(changed->first, kBlock);
  EXPECT_EQ(changed->second, 2 * kBlock - 1u);
}

TEST(CfiFlash, EraseCancelledByReadArray) {
  Rig r;
  std::fill(r.mem.begin(), r.mem.end(), 0x00);
  r.w8(0, 0x20);
  r.w8(0, 0xFF);
  EXPECT_TRUE(r.flash.read_array());
  EXPECT_EQ(r.mem[0], 0x00);
  EXPECT_EQ(r.flash.counters().bad_sequences, 0u);
}

TEST(CfiFlash, BadEraseConfirmIsASequenceError) {
  Rig r;
  std::fill(r.mem.begin(), r.mem.end(), 0x00);
  r.w8(0, 0x20);
  r.w8(0, 0x42);
  EXPECT_TRUE(r.flash.read_array());
  EXPECT_EQ(r.mem[0], 0x00);
  EXPECT_EQ(r.flash.counters().bad_sequences, 1u);
  r.w8(0, 0x70);
  EXPECT_EQ(r.r8(0), kCfiStatusReady | kCfiStatusSequenceError);
  r.w8(0, 0x50);  // clear status
  r.w8(0, 0x70);
  EXPECT_EQ(r.r8(0), 0x00);
}

TEST(CfiFlash, UnknownCommandsAndWriteBufferAreSequenceErrors) {
  for (uint8_t cmd : {0x01, 0x30, 0x41, 0xC0, 0xE8, 0xF0, 0xFE}) {
    Rig r;
    r.w8(8, cmd);
    EXPECT_TRUE(r.flash.read_array()) << int{cmd};
    EXPECT_EQ(r.flash.counters().bad_sequences, 1u) << int{cmd};
    EXPECT_EQ(r.flash.status() & kCfiStatusSequenceError, kCfiStatusSequenceError);
  }
}

TEST(CfiFlash, ConfirmWithoutSetupIsASequenceError) {
  Rig r;
  r.w8(0, 0xD0);
  EXPECT_EQ(r.flash.counters().bad_sequences, 1u);
  EXPECT_EQ(r.flash.counters().erases, 0u);
}

TEST(CfiFlash, StatusReadsInEveryByteLane) {
  Rig r;
  r.w8(0, 0x70);
  EXPECT_EQ(r.r32(12), 0x80808080u);
}

TEST(CfiFlash, ReadIdentifier) {
  Rig r;
  r.w8(0, 0x90);
  EXPECT_EQ(r.r8(0), kCfiManufacturerIntel);
  EXPECT_EQ(r.r8(1), kCfiDeviceId);
  EXPECT_EQ(r.r8(2), 0x00);  // block 0 unlocked
  r.w8(0, 0xFF);
  EXPECT_EQ(r.r8(0), 0xFF);
}

TEST(CfiFlash, CfiQueryDescribesTheGeometry) {
  Rig r;
  r.w8(0x55, 0x98);
  EXPECT_EQ(r.r8(0x10), 'Q');
  EXPECT_EQ(r.r8(0x11), 'R');
  EXPECT_EQ(r.r8(0x12), 'Y');
  EXPECT_EQ(r.r8(0x13), 0x01);                  // Intel command set
  EXPECT_EQ(r.r8(0x27), 14);                    // 16 KiB = 2^14
  EXPECT_EQ(r.r8(0x2C), 1);                     // one erase region
  EXPECT_EQ(r.r8(0x2D), 3);                     // 4 blocks - 1
  EXPECT_EQ(r.r8(0x2F) | r.r8(0x30) << 8, 16);  // 4096 / 256
  EXPECT_EQ(r.r8(0x1000), 0);                   // past the table
  r.w8(0, 0xFF);
  EXPECT_TRUE(r.flash.read_array());
}

TEST(CfiFlash, LockCommandsAreAcceptedWithoutEffect) {
  Rig r;
  r.w8(0, 0x60);
  r.w8(0, 0xD0);
  EXPECT_EQ(r.flash.mode(), CfiFlash::Mode::kReadStatus);
  r.w8(0, 0x10);
  r.w8(0, 0x12);
  r.w8(0, 0xFF);
  EXPECT_EQ(r.mem[0], 0x12);
  EXPECT_EQ(r.flash.counters().bad_sequences, 0u);
}

TEST(CfiFlash, OutOfRangeAccessesAreCountedNeverStored) {
  Rig r;
  const uint8_t word[4] = {0, 0, 0, 0};
  r.w8(0, 0x10);
  r.flash.write(r.mem.size() - 2, word);  // straddles the end
  EXPECT_EQ(r.flash.counters().programs, 0u);
  EXPECT_EQ(r.flash.counters().out_of_range, 1u);
  EXPECT_TRUE(r.flash.read_array());
  EXPECT_EQ(r.mem[r.mem.size() - 1], 0xFF);
  uint8_t b[4];
  r.flash.read(r.mem.size() - 2, b);
  EXPECT_EQ(b[2], 0xFF);
  EXPECT_EQ(r.flash.counters().out_of_range, 2u);
}

TEST(CfiFlash, ResetReturnsToReadArrayWithReadyStatus) {
  Rig r;
  r.w8(0, 0x50);
  r.w8(0, 0x10);
  r.flash.reset();
  EXPECT_TRUE(r.flash.read_array());
  EXPECT_EQ(r.flash.status(), kCfiStatusReady);
}

TEST(CfiFlash, RestoreRefusesBadModeAndEraseAddress) {
  Rig r;
  EXPECT_FALSE(r.flash.restore(CfiFlash::kModeCount, 0, 0));
  EXPECT_FALSE(r.flash.restore(0, 0, r.mem.size()));
  EXPECT_TRUE(r.flash.restore(static_cast<uint8_t>(CfiFlash::Mode::kEraseSetup), 0x80, kBlock));
  r.w8(0, 0xD0);  // the confirm erases the block saved with the 0x20
  EXPECT_EQ(r.flash.counters().erases, 1u);
}

}  // namespace
}  // namespace tern
