#include "devices/pci/i440fx_host_bridge.h"

#include <gtest/gtest.h>

#include <utility>
#include <vector>

#include "devices/pci/testing/pc_chipset_rig.h"

namespace tern {
namespace {

using testing::cfg_read8;
using testing::cfg_write8;

TEST(I440fxHostBridgeTest, PamResetValuesAndReservedBits) {
  std::vector<std::pair<unsigned, uint8_t>> changes;
  I440fxHostBridge hb([&](unsigned i, uint8_t v) { changes.push_back({i, v}); });
  for (unsigned i = 0; i < I440fxHostBridge::kPamCount; ++i)
    EXPECT_EQ(cfg_read8(hb, 0x59 + i), 0) << i;
  cfg_write8(hb, 0x59, 0xFF);
  EXPECT_EQ(cfg_read8(hb, 0x59), 0x30);  // PAM0: HIENABLE only
  for (unsigned i = 1; i < I440fxHostBridge::kPamCount; ++i) {
    cfg_write8(hb, 0x59 + i, 0xFF);
    EXPECT_EQ(cfg_read8(hb, 0x59 + i), 0x33) << i;
    EXPECT_EQ(hb.pam(i), 0x33) << i;
  }
  ASSERT_EQ(changes.size(), 7u);
  EXPECT_EQ(changes[0], (std::pair<unsigned, uint8_t>{0, 0x30}));
  EXPECT_EQ(changes[6], (std::pair<unsigned, uint8_t>{6, 0x33}));
  cfg_write8(hb, 0x5A, 0x33);  // unchanged: no hook
  EXPECT_EQ(changes.size(), 7u);
  // A dword write covering PAM3..PAM6 (what SeaBIOS does): one hook per changed register.
  uint32_t v = 0x11111111;
  hb.config_write(0x5C, std::span<const uint8_t>(reinterpret_cast<uint8_t*>(&v), 4));
  EXPECT_EQ(changes.size(), 11u);
  EXPECT_EQ(changes.back(), (std::pair<unsigned, uint8_t>{6, 0x11}));
  // Neighbours (0x58, DRAMC area; 0x60) stay read-only 0.
  cfg_write8(hb, 0x58, 0xFF);
  cfg_write8(hb, 0x60, 0xFF);
  EXPECT_EQ(cfg_read8(hb, 0x58), 0);
  EXPECT_EQ(cfg_read8(hb, 0x60), 0);
}

TEST(I440fxHostBridgeTest, SmramLockFreezesOpenLockAndEnable) {
  I440fxHostBridge hb;
  EXPECT_EQ(cfg_read8(hb, 0x72), 0x02);
  cfg_write8(hb, 0x72, 0xFF);
  // D_LCK with D_OPEN in the same write: D_OPEN cleared; bit 7 reserved; C_BASE_SEG fixed.
  EXPECT_EQ(cfg_read8(hb, 0x72), 0x3A);
  cfg_write8(hb, 0x72, 0x42);            // try to open and unlock, clear G_SMRAME and D_CLS
  EXPECT_EQ(cfg_read8(hb, 0x72), 0x1A);  // D_CLS followed the write; the rest is frozen
  hb.reset();
  EXPECT_EQ(hb.smram(), 0x02);
  cfg_write8(hb, 0x72, 0x4A);  // SeaBIOS: open the SMM window
  EXPECT_EQ(hb.smram(), 0x4A);
  cfg_write8(hb, 0x72, 0x0A);
  EXPECT_EQ(hb.smram(), 0x0A);
}

TEST(I440fxHostBridgeTest, IdentityIsReadOnly) {
  I440fxHostBridge hb;
  uint32_t v = 0;
  hb.config_read(0, std::span<uint8_t>(reinterpret_cast<uint8_t*>(&v), 4));
  EXPECT_EQ(v, 0x12378086u);
  v = 0xFFFFFFFF;
  hb.config_write(0, std::span<const uint8_t>(reinterpret_cast<uint8_t*>(&v), 4));
  hb.config_read(0, std::span<uint8_t>(reinterpret_cast<uint8_t*>(&v), 4));
  EXPECT_EQ(v, 0x12378086u);
  EXPECT_TRUE(hb.memory_windows().empty());
}

TEST(I440fxHostBridgeTest, RestoreRefusesLockedAndOpenSmram) {
  I440fxHostBridge a;
  cfg_write8(a, 0x59, 0x30);
  snap::ByteWriter w;
  a.save_state(w);
  auto bytes = w.data();
  bytes[4 + 0x72] = 0x52;  // D_OPEN | D_LCK | 010b: unreachable
  I440fxHostBridge b;
  snap::ByteReader r(bytes, "test");
  auto res = b.restore_state(r);
  ASSERT_FALSE(res);
  EXPECT_NE(res.error().message().find("smram"), std::string::npos);
  EXPECT_EQ(b.pam(0), 0);  // nothing applied
  snap::ByteReader ok(w.data(), "test");
  ASSERT_TRUE(b.restore_state(ok));
  EXPECT_EQ(b.pam(0), 0x30);
}

}  // namespace
}  // namespace tern
