#include "kvm/vcpu_state.h"

#include <gtest/gtest.h>

#include <cstring>

#include "kvm/vm_kvm_state.h"

namespace tern {
namespace {

/// Fills a trivially copyable struct with a byte pattern so round trips compare every byte.
template <class T>
void fill(T& v, uint8_t seed) {
  auto* p = reinterpret_cast<uint8_t*>(&v);
  for (size_t i = 0; i < sizeof(T); ++i) p[i] = static_cast<uint8_t>(seed + i * 7);
}

template <class T>
bool same_bytes(const T& a, const T& b) {
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

VcpuState sample_vcpu_state() {
  VcpuState s;
  fill(s.regs, 1);
  fill(s.sregs, 2);
  s.xsave.resize(4096 + 64);
  for (size_t i = 0; i < s.xsave.size(); ++i) s.xsave[i] = static_cast<uint8_t>(i * 13);
  fill(s.xcrs, 3);
  s.xcrs.nr_xcrs = 1;
  fill(s.debugregs, 4);
  s.msrs = {{0x10, 0x123456789abcdefull}, {0x1b, 0xfee00900}, {0x6e0, 42}};
  fill(s.lapic, 5);
  s.mp_state.mp_state = KVM_MP_STATE_HALTED;
  fill(s.events, 6);
  s.tsc_khz = 2'500'000;
  return s;
}

TEST(VcpuStateCodec, RoundTrip) {
  VcpuState s = sample_vcpu_state();
  snap::ByteWriter w;
  encode_vcpu_state(w, s);
  snap::ByteReader r(w.data(), "state section vcpu0");
  auto d = decode_vcpu_state(r);
  ASSERT_TRUE(d) << d.error().message();
  EXPECT_TRUE(r.expect_end());
  EXPECT_TRUE(same_bytes(d->regs, s.regs));
  EXPECT_TRUE(same_bytes(d->sregs, s.sregs));
  EXPECT_EQ(d->xsave, s.xsave);
  EXPECT_TRUE(same_bytes(d->xcrs, s.xcrs));
  EXPECT_TRUE(same_bytes(d->debugregs, s.debugregs));
  ASSERT_EQ(d->msrs.size(), s.msrs.size());
  for (size_t i = 0; i < s.msrs.size(); ++i) {
    EXPECT_EQ(d->msrs[i].index, s.msrs[i].index);
    EXPECT_EQ(d->msrs[i].data, s.msrs[i].data);
  }
  EXPECT_TRUE(same_bytes(d->lapic, s.lapic));
  EXPECT_EQ(d->mp_state.mp_state, s.mp_state.mp_state);
  EXPECT_TRUE(same_bytes(d->events, s.events));
  EXPECT_EQ(d->tsc_khz, s.tsc_khz);
}

TEST(VcpuStateCodec, EveryTruncatedPrefixFails) {
  snap::ByteWriter w;
  encode_vcpu_state(w, sample_vcpu_state());
  const auto& all = w.data();
  for (size_t n = 0; n < all.size(); ++n) {
    snap::ByteReader r(std::span<const uint8_t>(all.data(), n), "state section vcpu0");
    auto d = decode_vcpu_state(r);
    ASSERT_FALSE(d) << "prefix of " << n << " bytes decoded";
    EXPECT_NE(d.error().message().find("vcpu0"), std::string::npos) << d.error().message();
  }
}

/// Encodes a state, then overwrites the u32 at byte `at` of the encoding with `v`.
std::vector<uint8_t> encoded_with_u32(size_t at, uint32_t v) {
  snap::ByteWriter w;
  encode_vcpu_state(w, sample_vcpu_state());
  auto b = w.take();
  std::memcpy(b.data() + at, &v, 4);
  return b;
}

TEST(VcpuStateCodec, RefusesOversizedCounts) {
  const size_t xsave_len_at = sizeof(kvm_regs) + sizeof(kvm_sregs);
  const size_t msr_count_at =
      xsave_len_at + 4 + (4096 + 64) + sizeof(kvm_xcrs) + sizeof(kvm_debugregs);
  struct Case {
    size_t at;
    uint32_t value;
    const char* expect;
  } cases[] = {
      {xsave_len_at, kMaxXsaveBytes + 1, "xsave"},
      {xsave_len_at, 100, "xsave"},  // under 4096 (and the rest misparses, but this is first)
      {msr_count_at, kMaxSnapshotMsrs + 1, "msr count"},
      {msr_count_at, 1000, "msrs"},  // fits the limit, not the remaining bytes
  };
  for (const Case& c : cases) {
    auto b = encoded_with_u32(c.at, c.value);
    snap::ByteReader r(b, "vcpu");
    auto d = decode_vcpu_state(r);
    ASSERT_FALSE(d) << c.expect;
    EXPECT_NE(d.error().message().find(c.expect), std::string::npos) << d.error().message();
  }
}

VmKvmState sample_vm_state() {
  VmKvmState s;
  fill(s.pic_master, 10);
  s.pic_master.chip_id = KVM_IRQCHIP_PIC_MASTER;
  fill(s.pic_slave, 11);
  s.pic_slave.chip_id = KVM_IRQCHIP_PIC_SLAVE;
  fill(s.ioapic, 12);
  s.ioapic.chip_id = KVM_IRQCHIP_IOAPIC;
  fill(s.pit, 13);
  fill(s.clock, 14);
  return s;
}

TEST(VmKvmStateCodec, RoundTrip) {
  VmKvmState s = sample_vm_state();
  snap::ByteWriter w;
  encode_vm_kvm_state(w, s);
  snap::ByteReader r(w.data(), "state section kvm-vm");
  auto d = decode_vm_kvm_state(r);
  ASSERT_TRUE(d) << d.error().message();
  EXPECT_TRUE(r.expect_end());
  EXPECT_TRUE(same_bytes(d->pic_master, s.pic_master));
  EXPECT_TRUE(same_bytes(d->pic_slave, s.pic_slave));
  EXPECT_TRUE(same_bytes(d->ioapic, s.ioapic));
  EXPECT_TRUE(same_bytes(d->pit, s.pit));
  EXPECT_TRUE(same_bytes(d->clock, s.clock));
}

TEST(VmKvmStateCodec, EveryTruncatedPrefixFails) {
  snap::ByteWriter w;
  encode_vm_kvm_state(w, sample_vm_state());
  const auto& all = w.data();
  for (size_t n = 0; n < all.size(); ++n) {
    snap::ByteReader r(std::span<const uint8_t>(all.data(), n), "state section kvm-vm");
    ASSERT_FALSE(decode_vm_kvm_state(r)) << "prefix of " << n << " bytes decoded";
  }
}

TEST(VmKvmStateCodec, RefusesWrongChipId) {
  VmKvmState s = sample_vm_state();
  s.pic_slave.chip_id = KVM_IRQCHIP_IOAPIC;
  snap::ByteWriter w;
  encode_vm_kvm_state(w, s);
  snap::ByteReader r(w.data(), "kvm-vm");
  auto d = decode_vm_kvm_state(r);
  ASSERT_FALSE(d);
  EXPECT_NE(d.error().message().find("pic_slave"), std::string::npos) << d.error().message();
}

}  // namespace
}  // namespace tern
