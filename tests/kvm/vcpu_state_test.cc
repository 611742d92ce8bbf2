// kvm tests: a counting guest is saved (vCPU + VM KVM state), restored into a second VM with a
// copy of its memory, and continues counting from the saved value; save -> restore -> save gives
// the same state (except what time moves on).
#include <gtest/gtest.h>
#include <linux/kvm.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <memory>
#include <optional>

#include "arch/x86/cpu_state.h"
#include "arch/x86/cpuid.h"
#include "arch/x86/layout.h"
#include "kvm/kvm_system.h"
#include "kvm/vcpu_state.h"
#include "kvm/vm_kvm_state.h"
#include "memory/guest_memory.h"

namespace tern::testing {
namespace {

constexpr uint64_t kRamBytes = 2 * MiB;
constexpr uint64_t kCodeAddr = x86::kHimemStart;
constexpr uint64_t kCounterAddr = 0x180000;
constexpr uint16_t kTickPort = 0x500;
constexpr uint16_t kXmmMismatchPort = 0x501;
constexpr uint32_t kItersPerTick = 1000;
constexpr uint32_t kMsrTsc = 0x10;
constexpr uint32_t kMsrTscDeadline = 0x6e0;

// 64-bit guest (hand-assembled, checked with objdump; SSE via MOVDQU, which KVM's instruction
// emulator handles, so it also runs on a software KVM):
//   0x00 top:  movdqu [0x181000], xmm0; mov rax, [0x181000]; cmp rax, rbx; jne bad
//              (xmm0's low half must equal rbx: it only does when XSAVE state was restored)
//   0x16       mov ecx, 1000
//   0x1b loop: inc rbx; inc qword [0x180000]; loop loop
//   0x28       mov [0x181008], rbx; movdqu xmm0, [0x181008]
//   0x39       mov dx, 0x500; out dx, al; jmp top        ; one tick per 1000 iterations
//   0x40 bad:  mov dx, 0x501; out dx, al; hlt
const uint8_t kCode[] = {
    0xF3, 0x0F, 0x7F, 0x04, 0x25, 0x00, 0x10, 0x18, 0x00,        //
    0x48, 0x8B, 0x04, 0x25, 0x00, 0x10, 0x18, 0x00,              //
    0x48, 0x39, 0xD8, 0x75, 0x2A,                                //
    0xB9, kItersPerTick & 0xff, kItersPerTick >> 8, 0x00, 0x00,  //
    0x48, 0xFF, 0xC3, 0x48, 0xFF, 0x04, 0x25, 0x00, 0x00, 0x18, 0x00, 0xE2, 0xF3,  //
    0x48, 0x89, 0x1C, 0x25, 0x08, 0x10, 0x18, 0x00,              //
    0xF3, 0x0F, 0x6F, 0x04, 0x25, 0x08, 0x10, 0x18, 0x00,        //
    0x66, 0xBA, 0x00, 0x05, 0xEE, 0xEB, 0xC0,                    //
    0x66, 0xBA, 0x01, 0x05, 0xEE, 0xF4,
};

/// A one-vCPU VM driven from the test thread: irqchip + PIT like tern's, 2 MiB RAM, CPUID set.
struct Machine {
  std::optional<KvmSystem> sys;
  std::optional<KvmVm> vm;
  std::optional<GuestMemory> mem;
  std::optional<KvmVcpu> vcpu;

  /// Builds the VM; with `code`, also boots the vCPU into 64-bit mode at kCodeAddr (SSE on).
  static Result<std::unique_ptr<Machine>> create(std::span<const uint8_t> code) {
    auto m = std::make_unique<Machine>();
    ASSIGN_OR_RETURN(KvmSystem sys, KvmSystem::open());
    m->sys.emplace(std::move(sys));
    ASSIGN_OR_RETURN(KvmVm vm, m->sys->create_vm());
    m->vm.emplace(std::move(vm));
    TRY(m->vm->set_tss_addr(x86::kTssAddr));
    TRY(m->vm->set_identity_map_addr(x86::kIdentityMapAddr));
    TRY(m->vm->create_irqchip());
    TRY(m->vm->create_pit2());
    std::array<RegionSpec, 1> spec{{{0, kRamBytes}}};
    ASSIGN_OR_RETURN(GuestMemory mem, GuestMemory::create(spec));
    m->mem.emplace(std::move(mem));
    const auto& r = m->mem->regions()[0];
    TRY(m->vm->set_user_memory_region(0, r.gpa, r.size, r.host));
    ASSIGN_OR_RETURN(KvmVcpu vcpu, m->vm->create_vcpu(0));
    m->vcpu.emplace(std::move(vcpu));
    ASSIGN_OR_RETURN(auto supported, m->sys->supported_cpuid());
    const bool deadline = m->sys->check_extension(KVM_CAP_TSC_DEADLINE_TIMER) > 0;
    TRY(m->vcpu->set_cpuid(x86::vcpu_cpuid(supported, 0, 1, deadline)));
    if (code.empty()) return m;
    TRY(x86::write_boot_page_tables_and_gdt(*m->mem));
    TRY(m->mem->write(kCodeAddr, code));
    TRY(x86::setup_boot_vcpu(*m->vcpu, kCodeAddr, x86::kZeroPageAddr));
    ASSIGN_OR_RETURN(kvm_sregs s, m->vcpu->get_sregs());
    s.cr4 |= (1u << 9) | (1u << 10);  // OSFXSR, OSXMMEXCPT: SSE instructions allowed
    TRY(m->vcpu->set_sregs(s));
    return m;
  }

  /// Runs until a port-I/O exit and returns its port (anything else is an error).
  Result<uint16_t> run_to_pio() {
    for (;;) {
      int r = vcpu->run();
      if (r == -EINTR) continue;
      if (r < 0) return fail_code(-r, "KVM_RUN");
      const kvm_run* run = vcpu->run_state();
      if (run->exit_reason == KVM_EXIT_IO) return run->io.port;
      std::string detail = "unexpected exit reason " + std::to_string(run->exit_reason);
      if (run->exit_reason == KVM_EXIT_INTERNAL_ERROR)
        detail += ", suberror " + std::to_string(run->internal.suberror);
      if (auto regs = vcpu->get_regs()) detail += ", rip " + std::to_string(regs->rip);
      return fail("KVM_RUN", detail);
    }
  }

  Result<uint64_t> counter() const { return mem->read_obj<uint64_t>(kCounterAddr); }
};

bool have_kvm() { return ::access("/dev/kvm", R_OK | W_OK) == 0; }

template <class T>
bool same_bytes(const T& a, const T& b) {
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

std::optional<uint64_t> msr_value(const VcpuState& s, uint32_t index) {
  for (const MsrValue& m : s.msrs)
    if (m.index == index) return m.data;
  return std::nullopt;
}

/// Arms the LAPIC timer in TSC-deadline mode (masked) with a deadline far in the future, so the
/// snapshot carries a non-zero MSR_IA32_TSC_DEADLINE that only survives a LAPIC-first restore.
void arm_tsc_deadline(KvmVcpu& v, uint64_t deadline) {
  auto lapic = v.get_lapic();
  ASSERT_TRUE(lapic) << lapic.error().message();
  uint32_t lvtt = (2u << 17) | (1u << 16) | 0xec;  // TSC-deadline mode, masked, vector 0xec
  std::memcpy(lapic->regs + 0x320, &lvtt, 4);
  ASSERT_TRUE(v.set_lapic(*lapic));
  MsrValue m{kMsrTscDeadline, deadline};
  auto n = v.set_msrs(std::span<const MsrValue>(&m, 1));
  ASSERT_TRUE(n) << n.error().message();
  ASSERT_EQ(*n, 1u);
}

TEST(VcpuStateKvm, SnapshotMsrListIsReadableAndOrdered) {
  if (!have_kvm()) GTEST_SKIP() << "/dev/kvm not available";
  auto m = Machine::create({});
  ASSERT_TRUE(m) << m.error().message();
  auto list = snapshot_msr_list(*(*m)->sys, *(*m)->vcpu);
  ASSERT_TRUE(list) << list.error().message();
  ASSERT_FALSE(list->empty());
  EXPECT_NE(std::find(list->begin(), list->end(), kMsrTsc), list->end());
  auto dl = std::find(list->begin(), list->end(), kMsrTscDeadline);
  if (dl != list->end()) {
    EXPECT_EQ(dl + 1, list->end()) << "TSC_DEADLINE must be last";
  }
  auto got = (*m)->vcpu->get_msrs(*list);
  ASSERT_TRUE(got) << got.error().message();
  EXPECT_EQ(got->size(), list->size());
}

TEST(VcpuStateKvm, RestoredGuestContinuesCountingAndStateRoundTrips) {
  if (!have_kvm()) GTEST_SKIP() << "/dev/kvm not available";
  auto a = Machine::create(kCode);
  ASSERT_TRUE(a) << a.error().message();
  Machine& A = **a;

  // Distinctive time values, so "restored" cannot be confused with "fresh VM": kvmclock at
  // 1000 s, guest TSC at 2^40, a TSC deadline 2^50 ticks later.
  kvm_clock_data clk{};
  clk.clock = 1000ull * 1000 * 1000 * 1000;
  ASSERT_TRUE(A.vm->set_clock(clk));
  MsrValue tsc{kMsrTsc, 1ull << 40};
  ASSERT_EQ(A.vcpu->set_msrs(std::span<const MsrValue>(&tsc, 1)).value_or(0), 1u);
  const bool deadline_cap = A.sys->check_extension(KVM_CAP_TSC_DEADLINE_TIMER) > 0;
  if (deadline_cap) arm_tsc_deadline(*A.vcpu, (1ull << 40) + (1ull << 50));

  auto msr_list = snapshot_msr_list(*A.sys, *A.vcpu);
  ASSERT_TRUE(msr_list) << msr_list.error().message();

  for (int tick = 0; tick < 3; ++tick) {
    auto port = A.run_to_pio();
    ASSERT_TRUE(port) << port.error().message();
    ASSERT_EQ(*port, kTickPort);
  }
  ASSERT_TRUE(A.vcpu->complete_pending_io());  // the OUT completes, no guest code runs

  auto saved = save_vcpu_state(*A.vcpu, *msr_list);
  ASSERT_TRUE(saved) << saved.error().message();
  auto saved_vm = save_vm_kvm_state(*A.vm);
  ASSERT_TRUE(saved_vm) << saved_vm.error().message();
  EXPECT_EQ(saved->regs.rbx, 3u * kItersPerTick);
  EXPECT_EQ(A.counter().value_or(0), 3u * kItersPerTick);
  EXPECT_EQ(saved->xsave.size(), A.vcpu->xsave_size());
  EXPECT_GE(saved_vm->clock.clock, clk.clock);
  ASSERT_TRUE(msr_value(*saved, kMsrTsc));
  if (deadline_cap) {
    EXPECT_EQ(msr_value(*saved, kMsrTscDeadline), (1ull << 40) + (1ull << 50));
  }

  // Through the codec, as a state file would carry it.
  snap::ByteWriter w;
  encode_vcpu_state(w, *saved);
  encode_vm_kvm_state(w, *saved_vm);
  snap::ByteReader rd(w.data(), "test state");
  auto vcpu_state = decode_vcpu_state(rd);
  ASSERT_TRUE(vcpu_state) << vcpu_state.error().message();
  auto vm_state = decode_vm_kvm_state(rd);
  ASSERT_TRUE(vm_state) << vm_state.error().message();
  ASSERT_TRUE(rd.expect_end());

  // Second VM: same memory contents, no boot setup; VM state first, then the vCPU.
  auto b = Machine::create({});
  ASSERT_TRUE(b) << b.error().message();
  Machine& B = **b;
  const auto& ra = A.mem->regions()[0];
  const auto& rb = B.mem->regions()[0];
  std::memcpy(rb.host, ra.host, kRamBytes);
  auto rv = restore_vm_kvm_state(*B.vm, *vm_state);
  ASSERT_TRUE(rv) << rv.error().message();
  auto rc = restore_vcpu_state(*B.vcpu, *vcpu_state);
  ASSERT_TRUE(rc) << rc.error().message();

  // save -> restore -> save: the same state, except what time moves on.
  auto again = save_vcpu_state(*B.vcpu, *msr_list);
  ASSERT_TRUE(again) << again.error().message();
  EXPECT_TRUE(same_bytes(again->regs, saved->regs));
  EXPECT_TRUE(same_bytes(again->sregs, saved->sregs));
  EXPECT_EQ(again->xsave, saved->xsave);
  EXPECT_TRUE(same_bytes(again->xcrs, saved->xcrs));
  EXPECT_TRUE(same_bytes(again->debugregs, saved->debugregs));
  EXPECT_TRUE(same_bytes(again->events, saved->events));
  EXPECT_EQ(again->mp_state.mp_state, saved->mp_state.mp_state);
  EXPECT_EQ(again->tsc_khz, saved->tsc_khz);
  {
    kvm_lapic_state l1 = again->lapic, l2 = saved->lapic;
    std::memset(l1.regs + 0x390, 0, 4);  // TMCCT: the timer's current count runs on
    std::memset(l2.regs + 0x390, 0, 4);
    EXPECT_TRUE(same_bytes(l1, l2));
  }
  ASSERT_EQ(again->msrs.size(), saved->msrs.size());
  for (size_t i = 0; i < saved->msrs.size(); ++i) {
    ASSERT_EQ(again->msrs[i].index, saved->msrs[i].index);
    if (saved->msrs[i].index == kMsrTsc)
      EXPECT_GE(again->msrs[i].data, saved->msrs[i].data) << "guest TSC went backwards";
    else
      EXPECT_EQ(again->msrs[i].data, saved->msrs[i].data) << "MSR " << std::hex
                                                          << saved->msrs[i].index;
  }
  auto vm_again = save_vm_kvm_state(*B.vm);
  ASSERT_TRUE(vm_again) << vm_again.error().message();
  EXPECT_TRUE(same_bytes(vm_again->pic_master, saved_vm->pic_master));
  EXPECT_TRUE(same_bytes(vm_again->pic_slave, saved_vm->pic_slave));
  EXPECT_TRUE(same_bytes(vm_again->ioapic, saved_vm->ioapic));
  for (int c = 0; c < 3; ++c) {
    EXPECT_EQ(vm_again->pit.channels[c].count, saved_vm->pit.channels[c].count);
    EXPECT_EQ(vm_again->pit.channels[c].mode, saved_vm->pit.channels[c].mode);
  }
  EXPECT_GE(vm_again->clock.clock, saved_vm->clock.clock) << "kvmclock not restored";

  // The restored guest goes on counting from 3000 (its XMM0 check passes: XSAVE restored).
  auto port = B.run_to_pio();
  ASSERT_TRUE(port) << port.error().message();
  ASSERT_EQ(*port, kTickPort) << "guest saw xmm0 != rbx";
  auto regs = B.vcpu->get_regs();
  ASSERT_TRUE(regs);
  EXPECT_EQ(regs->rbx, 4u * kItersPerTick);
  EXPECT_EQ(B.counter().value_or(0), 4u * kItersPerTick);
  EXPECT_EQ(A.counter().value_or(0), 3u * kItersPerTick);  // A's memory untouched
}

// A restored vCPU was stopped by the host from its save on: the guest's pvclock page says so
// (PVCLOCK_GUEST_STOPPED), as KVM_KVMCLOCK_CTRL sets it, so the guest's soft-lockup watchdog does
// not report the time the VM spent saved as a CPU stuck ("watchdog: BUG: soft lockup").
TEST(VcpuStateKvm, RestoredGuestIsToldItWasStopped) {
  if (!have_kvm()) GTEST_SKIP() << "/dev/kvm not available";
  constexpr uint32_t kMsrKvmSystemTimeNew = 0x4b564d01;
  constexpr uint64_t kPvclockAddr = 0x190000;
  constexpr uint64_t kFlagsOffset = 29;  // struct pvclock_vcpu_time_info: u8 flags
  constexpr uint8_t kGuestStopped = 1u << 1;  // PVCLOCK_GUEST_STOPPED
  auto a = Machine::create(kCode);
  ASSERT_TRUE(a) << a.error().message();
  Machine& A = **a;
  // kvmclock on, as a Linux guest turns it on (KVM writes the page at the next entry).
  MsrValue on{kMsrKvmSystemTimeNew, kPvclockAddr | 1};
  auto n = A.vcpu->set_msrs(std::span<const MsrValue>(&on, 1));
  ASSERT_TRUE(n) << n.error().message();
  if (*n != 1) GTEST_SKIP() << "this KVM has no kvmclock";
  auto port = A.run_to_pio();
  ASSERT_TRUE(port) << port.error().message();
  auto pv_a = A.mem->read_obj<uint64_t>(kPvclockAddr + 8);  // tsc_timestamp: KVM wrote the page
  ASSERT_TRUE(pv_a);
  if (*pv_a == 0) GTEST_SKIP() << "this KVM does not write the pvclock page";
  uint8_t flags_a = 0;
  ASSERT_TRUE(A.mem->read(kPvclockAddr + kFlagsOffset, std::span<uint8_t>(&flags_a, 1)));
  EXPECT_EQ(flags_a & kGuestStopped, 0) << "a running guest's page says stopped";
  ASSERT_TRUE(A.vcpu->complete_pending_io());
  auto msr_list = snapshot_msr_list(*A.sys, *A.vcpu);
  ASSERT_TRUE(msr_list) << msr_list.error().message();
  auto saved = save_vcpu_state(*A.vcpu, *msr_list);
  ASSERT_TRUE(saved) << saved.error().message();
  auto saved_vm = save_vm_kvm_state(*A.vm);
  ASSERT_TRUE(saved_vm) << saved_vm.error().message();

  auto b = Machine::create({});
  ASSERT_TRUE(b) << b.error().message();
  Machine& B = **b;
  std::memcpy(B.mem->regions()[0].host, A.mem->regions()[0].host, kRamBytes);
  ASSERT_TRUE(restore_vm_kvm_state(*B.vm, *saved_vm));
  auto rc = restore_vcpu_state(*B.vcpu, *saved);
  ASSERT_TRUE(rc) << rc.error().message();
  port = B.run_to_pio();
  ASSERT_TRUE(port) << port.error().message();
  uint8_t flags_b = 0;
  ASSERT_TRUE(B.mem->read(kPvclockAddr + kFlagsOffset, std::span<uint8_t>(&flags_b, 1)));
  EXPECT_EQ(flags_b & kGuestStopped, kGuestStopped)
      << "the restored guest's pvclock flags " << int{flags_b} << " lack PVCLOCK_GUEST_STOPPED";
}

TEST(VcpuStateKvm, RejectedMsrIsNamed) {
  if (!have_kvm()) GTEST_SKIP() << "/dev/kvm not available";
  auto m = Machine::create(kCode);
  ASSERT_TRUE(m) << m.error().message();
  auto list = snapshot_msr_list(*(*m)->sys, *(*m)->vcpu);
  ASSERT_TRUE(list) << list.error().message();
  auto s = save_vcpu_state(*(*m)->vcpu, *list);
  ASSERT_TRUE(s) << s.error().message();
  s->msrs.push_back(MsrValue{0xdeadbeef, 1});
  auto r = restore_vcpu_state(*(*m)->vcpu, *s);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message().find("0xdeadbeef"), std::string::npos) << r.error().message();
}

TEST(VcpuStateKvm, UnreadableMsrFailsSave) {
  if (!have_kvm()) GTEST_SKIP() << "/dev/kvm not available";
  auto m = Machine::create({});
  ASSERT_TRUE(m) << m.error().message();
  const uint32_t list[] = {kMsrTsc, 0xdeadbeef};
  auto s = save_vcpu_state(*(*m)->vcpu, list);
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message().find("0xdeadbeef"), std::string::npos) << s.error().message();
}

}  // namespace
}  // namespace tern::testing
