#include "arch/x86/mptable.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "arch/x86/checksum.h"
#include "arch/x86/layout.h"

namespace tern::x86 {
namespace {

using ::testing::HasSubstr;

/// The first MiB of guest RAM in a plain buffer.
struct LowMem {
  LowMem() : bytes(kBiosEnd, 0) {}
  GuestMemory mem() { return GuestMemory::wrap({MemoryRegion{0, bytes.size(), bytes.data(), 0}}); }
  template <class T>
  T get(uint64_t gpa) const {
    T v;
    std::memcpy(&v, &bytes[gpa], sizeof v);
    return v;
  }
  std::span<const uint8_t> span(uint64_t gpa, size_t n) const { return {&bytes[gpa], n}; }
  std::vector<uint8_t> bytes;
};

/// Linux's smp_scan_config(): a 16-byte aligned "_MP_" with length 1, spec 1.1/1.4 and a good
/// checksum, searched for in [base, base + len).
uint64_t scan_for_mpf(const LowMem& m, uint64_t base, uint64_t len) {
  for (uint64_t a = base; a + 16 <= base + len; a += 16) {
    if (std::memcmp(&m.bytes[a], "_MP_", 4) == 0 && m.bytes[a + 8] == 1 &&
        (m.bytes[a + 9] == 1 || m.bytes[a + 9] == 4) && byte_sum(m.span(a, 16)) == 0)
      return a;
  }
  return 0;
}

void check_table(uint32_t n) {
  SCOPED_TRACE(n);
  LowMem m;
  auto mem = m.mem();
  auto info = write_mptable(mem, n);
  ASSERT_TRUE(info) << info.error().message();
  EXPECT_LE(info->end, kLowRamEnd);
  EXPECT_EQ(info->end - info->floating_pointer_gpa, mptable_size(n));

  // Linux looks in the last KiB of base memory (639 KiB = kEbdaStart).
  const uint64_t mpf = scan_for_mpf(m, 639 * 1024, 1024);
  ASSERT_EQ(mpf, kEbdaStart);
  EXPECT_EQ(m.bytes[mpf + 11], 0);         // feature1: configuration table present
  EXPECT_EQ(m.bytes[mpf + 12] & 0x80, 0);  // IMCRP clear: virtual wire
  const uint32_t cfg = m.get<uint32_t>(mpf + 4);
  EXPECT_EQ(cfg, info->config_table_gpa);

  // Configuration table header.
  EXPECT_EQ(std::memcmp(&m.bytes[cfg], "PCMP", 4), 0);
  const uint16_t length = m.get<uint16_t>(cfg + 4);
  EXPECT_EQ(m.bytes[cfg + 6], 4);  // spec rev 1.4
  EXPECT_EQ(byte_sum(m.span(cfg, length)), 0) << "config table checksum";
  EXPECT_EQ(std::memcmp(&m.bytes[cfg + 8], "TERN    ", 8), 0);
  const uint16_t entries = m.get<uint16_t>(cfg + 34);
  EXPECT_EQ(m.get<uint32_t>(cfg + 36), kLapicAddr);
  EXPECT_EQ(entries, n + 1 + 1 + 16 + 2);

  // Walk the entries.
  uint64_t p = cfg + 44;
  uint32_t cpus = 0, buses = 0, ioapics = 0, io_ints = 0, local_ints = 0;
  for (uint16_t i = 0; i < entries; ++i) {
    const uint8_t type = m.bytes[p];
    if (type == 0) {
      EXPECT_EQ(m.bytes[p + 1], cpus);                    // APIC ID = index
      EXPECT_EQ(m.bytes[p + 2], 0x14);                    // LAPIC version
      EXPECT_EQ(m.bytes[p + 3], cpus == 0 ? 0x3 : 0x1);   // EN, BP only on vCPU 0
      EXPECT_NE(m.get<uint32_t>(p + 8) & (1u << 9), 0u);  // APIC feature flag
      ++cpus;
      p += 20;
      continue;
    }
    if (type == 1) {
      EXPECT_EQ(m.bytes[p + 1], 0);
      EXPECT_EQ(std::memcmp(&m.bytes[p + 2], "ISA   ", 6), 0);
      ++buses;
    } else if (type == 2) {
      EXPECT_EQ(m.bytes[p + 1], n);  // IOAPIC ID after the LAPIC IDs
      EXPECT_EQ(m.bytes[p + 2], 0x11);
      EXPECT_EQ(m.bytes[p + 3], 1);
      EXPECT_EQ(m.get<uint32_t>(p + 4), kIoapicAddr);
      ++ioapics;
    } else if (type == 3) {
      EXPECT_EQ(m.bytes[p + 1], 0);        // INT
      EXPECT_EQ(m.bytes[p + 4], 0);        // ISA bus
      EXPECT_EQ(m.bytes[p + 5], io_ints);  // ISA IRQ ...
      EXPECT_EQ(m.bytes[p + 6], n);        // ... to the IOAPIC ...
      EXPECT_EQ(m.bytes[p + 7], io_ints);  // ... pin with the same number
      ++io_ints;
    } else if (type == 4) {
      EXPECT_EQ(m.bytes[p + 1], local_ints == 0 ? 3 : 1);  // ExtINT, then NMI
      EXPECT_EQ(m.bytes[p + 6], 0xFF);
      EXPECT_EQ(m.bytes[p + 7], local_ints);  // LINT0, LINT1
      ++local_ints;
    } else {
      ADD_FAILURE() << "unexpected entry type " << int{type};
      return;
    }
    p += 8;
  }
  EXPECT_EQ(p, cfg + length);
  EXPECT_EQ(cpus, n);
  EXPECT_EQ(buses, 1u);
  EXPECT_EQ(ioapics, 1u);
  EXPECT_EQ(io_ints, 16u);
  EXPECT_EQ(local_ints, 2u);
}

TEST(MpTable, OneVcpu) {
  check_table(1);
}
TEST(MpTable, FourVcpus) {
  check_table(4);
}
TEST(MpTable, MaxVcpusFitBelow640K) {
  EXPECT_EQ(mptable_max_vcpus(), 40u);
  check_table(mptable_max_vcpus());
}

TEST(MpTable, RejectsTooManyOrNoVcpusWithoutWriting) {
  LowMem m;
  auto mem = m.mem();
  auto r = write_mptable(mem, mptable_max_vcpus() + 1);
  ASSERT_FALSE(r);
  EXPECT_THAT(r.error().message(), HasSubstr("at most 40 vCPUs"));
  EXPECT_FALSE(write_mptable(mem, 0));
  for (uint8_t b : m.bytes) ASSERT_EQ(b, 0);
}

}  // namespace
}  // namespace tern::x86
