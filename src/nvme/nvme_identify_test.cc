#include "nvme/nvme_identify.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

namespace tern::nvme {
namespace {

uint64_t le(std::span<const uint8_t> p, size_t at, size_t n) {
  uint64_t v = 0;
  for (size_t i = 0; i < n; ++i) v |= uint64_t{p[at + i]} << (8 * i);
  return v;
}
std::string text(std::span<const uint8_t> p, size_t at, size_t n) {
  return std::string(p.begin() + at, p.begin() + at + n);
}

class NvmeIdentifyTest : public ::testing::Test {
 protected:
  ControllerInfo c = [] {
    ControllerInfo i;
    i.serial = "tern-disk0";
    i.ns.size_lbas = 2048;
    for (size_t k = 0; k < i.nguid.size(); ++k) i.nguid[k] = static_cast<uint8_t>(0xA0 + k);
    return i;
  }();
};

TEST_F(NvmeIdentifyTest, ControllerIdentity) {
  auto id = identify_controller(c);
  EXPECT_EQ(le(id, kIdCtrlVid, 2), kPciVendorRedHat);
  EXPECT_EQ(le(id, kIdCtrlSsvid, 2), kPciVendorRedHat);
  EXPECT_EQ(text(id, kIdCtrlSn, 20), "tern-disk0          ");
  EXPECT_EQ(text(id, kIdCtrlMn, 40), "tern NVMe" + std::string(31, ' '));
  EXPECT_EQ(text(id, kIdCtrlFr, 8), "1.0     ");
  EXPECT_EQ(le(id, kIdCtrlVer, 4), kVersion14);
  EXPECT_EQ(le(id, kIdCtrlCntlid, 2), 0u);
  EXPECT_EQ(id[kIdCtrlCntrltype], 1);  // I/O controller
  // SUBNQN: NUL-terminated.
  std::string nqn = "nqn.2026-12.org.tern:nvme:tern-disk0";
  EXPECT_EQ(text(id, kIdCtrlSubnqn, nqn.size()), nqn);
  EXPECT_EQ(id[kIdCtrlSubnqn + nqn.size()], 0);
}

TEST_F(NvmeIdentifyTest, ControllerStringsArePrintableAndCut) {
  c.serial = "abc\x01\n\xff" + std::string(30, 'x');
  c.model = "m\x7f";
  c.firmware = "1.2.3.4.5.6";
  auto id = identify_controller(c);
  EXPECT_EQ(text(id, kIdCtrlSn, 20), "abc   " + std::string(14, 'x'));
  EXPECT_EQ(id[kIdCtrlMn + 20], 0x20);  // space-padded
  EXPECT_EQ(text(id, kIdCtrlMn, 2), "m ");
  EXPECT_EQ(text(id, kIdCtrlFr, 8), "1.2.3.4.");
  EXPECT_EQ(text(id, kIdCtrlSubnqn + 26, 21), "abc   " + std::string(14, 'x') + '\0');
}

TEST_F(NvmeIdentifyTest, ControllerCapabilitiesLinuxReads) {
  auto id = identify_controller(c);
  EXPECT_EQ(id[kIdCtrlMdts], 7);
  EXPECT_EQ(le(id, kIdCtrlOacs, 2), kOacsDoorbellBufferConfig);
  EXPECT_EQ(id[kIdCtrlAcl], 3);
  EXPECT_EQ(id[kIdCtrlAerl], kAerLimit - 1);
  EXPECT_EQ(id[kIdCtrlFrmw], 0x03);  // one slot, read only
  EXPECT_EQ(id[kIdCtrlLpa], 0x04);   // extended Get Log Page data (LPO)
  EXPECT_EQ(id[kIdCtrlElpe], 0);
  EXPECT_EQ(id[kIdCtrlSqes], 0x66);
  EXPECT_EQ(id[kIdCtrlCqes], 0x44);
  EXPECT_EQ(le(id, kIdCtrlNn, 4), 1u);
  EXPECT_EQ(le(id, kIdCtrlOncs, 2), kOncsDsm | kOncsWriteZeroes);
  EXPECT_EQ(id[kIdCtrlVwc], 0x07);  // present, Flush to NSID FFFFFFFFh supported
  EXPECT_EQ(le(id, kIdCtrlSgls, 4), 0u);
  EXPECT_EQ(le(id, kIdCtrlOaes, 4), 0u);
  // One power state (NPSS 0's based): 25 W, 16 µs entry, 4 µs exit latency.
  EXPECT_EQ(id[263], 0);
  EXPECT_EQ(le(id, 2048, 2), 2500u);
  EXPECT_EQ(id[2048 + 3], 0);  // MXPS 0 (0.01 W units), operational
  EXPECT_EQ(le(id, 2048 + 4, 4), 16u);
  EXPECT_EQ(le(id, 2048 + 8, 4), 4u);
  EXPECT_EQ(le(id, 2048 + 32, 32), 0u);  // no second descriptor

  c.mdts = 5;
  c.volatile_write_cache = false;
  c.ns.discard = false;
  id = identify_controller(c);
  EXPECT_EQ(id[kIdCtrlMdts], 5);
  EXPECT_EQ(id[kIdCtrlVwc], 0);
  EXPECT_EQ(le(id, kIdCtrlOncs, 2), kOncsWriteZeroes);
}

TEST_F(NvmeIdentifyTest, Namespace) {
  auto id = identify_namespace(c);
  EXPECT_EQ(le(id, kIdNsNsze, 8), 2048u);
  EXPECT_EQ(le(id, kIdNsNcap, 8), 2048u);
  EXPECT_EQ(le(id, kIdNsNuse, 8), 2048u);
  EXPECT_EQ(id[kIdNsNlbaf], 0);
  EXPECT_EQ(id[kIdNsFlbas], 0);
  EXPECT_EQ(id[kIdNsDlfeat], 0x09);  // reads zeroes once deallocated; Write Zeroes DEAC
  EXPECT_EQ(le(id, kIdNsLbaf0, 4), 9u << 16);  // LBADS 9, no metadata, best RP
  EXPECT_EQ(le(id, kIdNsLbaf0 + 4, 4), 0u);
  EXPECT_EQ(le(id, 48, 8), 2048u * 512);  // NVMCAP
  EXPECT_EQ(id[99], 0);                   // NSATTR: writable
  EXPECT_TRUE(std::equal(c.nguid.begin(), c.nguid.end(), id.begin() + kIdNsNguid));
  EXPECT_EQ(le(id, kIdNsEui64, 8), 0u);

  c.ns.lba_shift = 12;
  c.ns.size_lbas = 256;
  c.ns.read_only = true;
  id = identify_namespace(c);
  EXPECT_EQ(le(id, kIdNsNsze, 8), 256u);
  EXPECT_EQ(id[kIdNsLbaf0 + 2], 12);
  EXPECT_EQ(id[99], 1);  // NSATTR: write protected (Linux sets the disk read-only)
}

TEST_F(NvmeIdentifyTest, ActiveNamespaceList) {
  auto id = identify_active_namespaces(0);
  EXPECT_EQ(le(id, 0, 4), 1u);
  EXPECT_EQ(le(id, 4, 4), 0u);
  for (uint32_t start : {1u, 2u, 0xFFFFFFFDu}) {
    id = identify_active_namespaces(start);
    EXPECT_TRUE(std::all_of(id.begin(), id.end(), [](uint8_t b) { return b == 0; })) << start;
  }
}

TEST_F(NvmeIdentifyTest, NamespaceDescriptors) {
  auto id = identify_ns_descriptors(c);
  EXPECT_EQ(id[0], 2);   // NIDT: NGUID
  EXPECT_EQ(id[1], 16);  // NIDL
  EXPECT_EQ(le(id, 2, 2), 0u);
  EXPECT_TRUE(std::equal(c.nguid.begin(), c.nguid.end(), id.begin() + 4));
  EXPECT_TRUE(std::all_of(id.begin() + 20, id.end(), [](uint8_t b) { return b == 0; }));
}

TEST_F(NvmeIdentifyTest, ErrorLog) {
  auto p = log_page(kLogError, c, {});
  ASSERT_TRUE(p);
  EXPECT_EQ(p->size(), kLogErrorEntryBytes);
  EXPECT_TRUE(std::all_of(p->begin(), p->end(), [](uint8_t b) { return b == 0; }));
}

TEST_F(NvmeIdentifyTest, SmartLog) {
  HealthCounters h{.data_units_read = 5,
                   .data_units_written = 0x1122334455667788,
                   .host_read_commands = 7,
                   .host_write_commands = 9,
                   .media_errors = 2,
                   .power_on_hours = 11};
  auto p = log_page(kLogSmartHealth, c, h);
  ASSERT_TRUE(p);
  ASSERT_EQ(p->size(), kLogSmartBytes);
  auto& v = *p;
  EXPECT_EQ(v[0], 0);              // no critical warning
  EXPECT_EQ(le(v, 1, 2), 0u);      // composite temperature: not reported
  EXPECT_EQ(v[3], 100);            // available spare
  EXPECT_EQ(v[5], 0);              // percentage used
  EXPECT_EQ(le(v, 32, 8), 5u);
  EXPECT_EQ(le(v, 40, 8), 0u);     // high half of the 128-bit counter
  EXPECT_EQ(le(v, 48, 8), 0x1122334455667788u);
  EXPECT_EQ(le(v, 64, 8), 7u);
  EXPECT_EQ(le(v, 80, 8), 9u);
  EXPECT_EQ(le(v, 128, 8), 11u);
  EXPECT_EQ(le(v, 160, 8), 2u);
  EXPECT_EQ(le(v, 176, 8), 0u);    // error log entries
}

TEST_F(NvmeIdentifyTest, FirmwareSlotLog) {
  auto p = log_page(kLogFirmwareSlot, c, {});
  ASSERT_TRUE(p);
  ASSERT_EQ(p->size(), kLogFirmwareSlotBytes);
  EXPECT_EQ((*p)[0], 1);  // AFI: slot 1 active
  EXPECT_EQ(text(*p, 8, 8), "1.0     ");
  EXPECT_EQ(le(*p, 16, 8), 0u);  // slot 2: none
}

TEST_F(NvmeIdentifyTest, UnknownLogPages) {
  for (uint8_t lid : {0x00, 0x04, 0x05, 0x06, 0x70, 0x80, 0xC0, 0xFF}) {
    auto p = log_page(lid, c, {});
    ASSERT_FALSE(p) << int{lid};
    EXPECT_EQ(p.error(), kInvalidLogPage);
  }
}

}  // namespace
}  // namespace tern::nvme
