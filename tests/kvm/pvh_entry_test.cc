// kvm tests for the PVH entry (Xen docs/misc/pvh.pandoc): a tiny ELF64 "kernel" built in memory,
// with a PT_LOAD of a few bytes of 32-bit code and a XEN_ELFNOTE_PHYS32_ENTRY note, is parsed
// (parse_elf_kernel), loaded (load_pvh) and entered (setup_pvh_vcpu) on a real /dev/kvm. The guest
// reads what a PVH kernel reads (EBX, the hvm_start_info it points to, the command line, the
// memory map and module list pointers, CR0, CS) and writes each to an I/O port; the test checks
// the values, the memory they point to, and the vCPU's mode at its last OUT.
#include <gtest/gtest.h>
#include <linux/kvm.h>
#include <unistd.h>

#include <array>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "arch/x86/cpu_state.h"
#include "arch/x86/cpuid.h"
#include "arch/x86/elf_kernel.h"
#include "arch/x86/layout.h"
#include "arch/x86/pvh.h"
#include "kvm/kvm_system.h"
#include "memory/guest_memory.h"
#include "tests/kvm/tiny_elf.h"

namespace tern::testing {
namespace {

constexpr uint64_t kRamBytes = 4 * MiB;
constexpr uint64_t kSegmentPaddr = x86::kHimemStart;  ///< The PT_LOAD's paddr.
constexpr uint64_t kSegmentMemsz = 0x2000;            ///< memsz > filesz: the rest is zeroed.
constexpr uint64_t kEntryOffset = 0x10;  ///< PVH entry = paddr + 0x10; e_entry = paddr (a HLT).
constexpr uint16_t kReportPort = 0x510;
constexpr std::string_view kCmdline = "console=ttyS0 pvh.test=1";

// 32-bit guest code at the PVH entry (checked with objdump -mi386):
//   mov edx, 0x510
//   mov eax, ebx;          out dx, eax   ; 0: start_info GPA
//   mov eax, [ebx];        out dx, eax   ; 1: magic
//   mov eax, [ebx+0x18];   out dx, eax   ; 2: cmdline_paddr (low half)
//   mov eax, [eax];        out dx, eax   ; 3: the command line's first 4 bytes
//   mov eax, [ebx+0x28];   out dx, eax   ; 4: memmap_paddr (low half)
//   mov eax, [ebx+0x30];   out dx, eax   ; 5: memmap_entries
//   mov eax, [ebx+0x0c];   out dx, eax   ; 6: nr_modules
//   mov eax, cr0;          out dx, eax   ; 7: CR0
//   mov eax, cs;           out dx, eax   ; 8: CS selector
//   mov edx, 0x511;        out dx, eax   ; done (the in-kernel irqchip would keep a HLT in KVM)
//   hlt
// Decoded as 16-bit code these bytes do something else entirely (BA 10 05 = mov dx, 0x510, then
// 00 00 = add [bx+si], al ...), and CR0.PG = 0 rules out long mode.
constexpr uint8_t kCode[] = {
    0xBA, 0x10, 0x05, 0x00, 0x00, 0x89, 0xD8, 0xEF, 0x8B, 0x03, 0xEF, 0x8B, 0x43, 0x18, 0xEF,
    0x8B, 0x00, 0xEF, 0x8B, 0x43, 0x28, 0xEF, 0x8B, 0x43, 0x30, 0xEF, 0x8B, 0x43, 0x0C, 0xEF,
    0x0F, 0x20, 0xC0, 0xEF, 0x8C, 0xC8, 0xEF, 0xBA, 0x11, 0x05, 0x00, 0x00, 0xEF, 0xF4,
};
constexpr uint16_t kDonePort = 0x511;
constexpr size_t kDoneOutOffset = sizeof(kCode) - 2;  ///< Offset of the OUT to kDonePort.
constexpr size_t kReports = 9;

/// Stores `v` little-endian at `offset` of `out` (inside it).
std::vector<uint8_t> make_elf(bool with_pvh_note) {
  return make_pvh_elf(kCode, {.paddr = kSegmentPaddr,
                              .memsz = kSegmentMemsz,
                              .entry_offset = kEntryOffset,
                              .with_pvh_note = with_pvh_note});
}

bool have_kvm() { return ::access("/dev/kvm", R_OK | W_OK) == 0; }

/// One vCPU, irqchip like tern's, kRamBytes of RAM at GPA 0 with the boot GDT written.
struct Machine {
  std::optional<KvmSystem> sys;
  std::optional<KvmVm> vm;
  std::optional<GuestMemory> mem;
  std::optional<KvmVcpu> vcpu;

  static Result<std::unique_ptr<Machine>> create() {
    auto m = std::make_unique<Machine>();
    ASSIGN_OR_RETURN(KvmSystem sys, KvmSystem::open());
    m->sys.emplace(std::move(sys));
    ASSIGN_OR_RETURN(KvmVm vm, m->sys->create_vm());
    m->vm.emplace(std::move(vm));
    TRY(m->vm->set_tss_addr(x86::kTssAddr));
    TRY(m->vm->set_identity_map_addr(x86::kIdentityMapAddr));
    TRY(m->vm->create_irqchip());
    auto regions = x86::ram_regions(kRamBytes);
    ASSIGN_OR_RETURN(GuestMemory mem, GuestMemory::create(regions));
    m->mem.emplace(std::move(mem));
    const auto& r = m->mem->regions()[0];
    TRY(m->vm->set_user_memory_region(0, r.gpa, r.size, r.host));
    ASSIGN_OR_RETURN(KvmVcpu vcpu, m->vm->create_vcpu(0));
    m->vcpu.emplace(std::move(vcpu));
    ASSIGN_OR_RETURN(auto supported, m->sys->supported_cpuid());
    TRY(m->vcpu->set_cpuid(x86::vcpu_cpuid(supported, 0, 1, false)));
    TRY(x86::write_boot_page_tables_and_gdt(*m->mem));
    return m;
  }

  /// Runs until the guest writes kDonePort, collecting every 4-byte OUT to kReportPort before;
  /// any other exit is an error.
  Result<std::vector<uint32_t>> run_to_done() {
    std::vector<uint32_t> values;
    for (;;) {
      int r = vcpu->run();
      if (r == -EINTR) continue;
      if (r < 0) return fail_code(-r, "KVM_RUN");
      const kvm_run* run = vcpu->run_state();
      if (run->exit_reason == KVM_EXIT_IO && run->io.port == kDonePort) return values;
      if (run->exit_reason == KVM_EXIT_IO && run->io.direction == KVM_EXIT_IO_OUT &&
          run->io.port == kReportPort && run->io.size == 4 && run->io.count == 1) {
        uint32_t v = 0;
        std::memcpy(&v, reinterpret_cast<const uint8_t*>(run) + run->io.data_offset, 4);
        values.push_back(v);
        if (values.size() > kReports) return fail("guest", "more reports than the code makes");
        continue;
      }
      std::string detail = "unexpected exit reason " + std::to_string(run->exit_reason);
      if (run->exit_reason == KVM_EXIT_IO) detail += ", port " + std::to_string(run->io.port);
      if (run->exit_reason == KVM_EXIT_INTERNAL_ERROR)
        detail += ", suberror " + std::to_string(run->internal.suberror);
      if (auto regs = vcpu->get_regs()) detail += ", rip " + std::to_string(regs->rip);
      return fail("KVM_RUN", detail);
    }
  }
};

TEST(PvhEntryKvm, GuestEntersIn32BitProtectedModeWithStartInfoInEbx) {
  if (!have_kvm()) GTEST_SKIP() << "/dev/kvm not available";
  auto mr = Machine::create();
  ASSERT_TRUE(mr) << mr.error().message();
  Machine& m = **mr;

  const std::vector<uint8_t> elf = make_elf(true);
  auto kernel = x86::parse_elf_kernel(elf);
  ASSERT_TRUE(kernel) << kernel.error().message();
  ASSERT_EQ(kernel->pvh_entry, kSegmentPaddr + kEntryOffset);
  // Garbage where the segment's zeroed tail goes: load_pvh must clear it.
  std::vector<uint8_t> junk(kSegmentMemsz, 0xAA);
  ASSERT_TRUE(m.mem->write(kSegmentPaddr, junk));
  std::vector<uint8_t> initrd(4096);
  for (size_t i = 0; i < initrd.size(); ++i) initrd[i] = static_cast<uint8_t>(i * 7 + 1);

  auto boot = x86::load_pvh(*m.mem, kRamBytes, *kernel, elf, kCmdline, initrd);
  ASSERT_TRUE(boot) << boot.error().message();
  EXPECT_EQ(boot->entry, kSegmentPaddr + kEntryOffset);
  auto setup = x86::setup_pvh_vcpu(*m.vcpu, boot->entry, static_cast<uint32_t>(boot->start_info_gpa));
  ASSERT_TRUE(setup) << setup.error().message();

  auto values = m.run_to_done();
  ASSERT_TRUE(values) << values.error().message();
  ASSERT_EQ(values->size(), kReports);
  const auto& v = *values;

  // EBX -> hvm_start_info with the magic, as the guest read them.
  EXPECT_EQ(v[0], boot->start_info_gpa);
  EXPECT_EQ(v[1], 0x336ec578u);
  // The command line at cmdline_paddr, NUL-terminated.
  uint32_t cmdline_head = 0;
  std::memcpy(&cmdline_head, kCmdline.data(), 4);
  EXPECT_EQ(v[3], cmdline_head);
  std::vector<uint8_t> cmdline(kCmdline.size() + 1);
  ASSERT_TRUE(m.mem->read(v[2], cmdline));
  EXPECT_EQ(std::string(cmdline.begin(), cmdline.end() - 1), kCmdline);
  EXPECT_EQ(cmdline.back(), 0);
  // The memory map: e820's layout for 4 MiB (layout.h), types as e820's.
  struct Expected {
    uint64_t addr, size;
    uint32_t type;
  };
  const Expected want[] = {{0, x86::kEbdaStart, 1},
                           {x86::kEbdaStart, x86::kLowRamEnd - x86::kEbdaStart, 2},
                           {x86::kAcpiStart, x86::kBiosEnd - x86::kAcpiStart, 2},
                           {x86::kHimemStart, kRamBytes - x86::kHimemStart, 1}};
  ASSERT_EQ(v[5], std::size(want));
  for (size_t i = 0; i < std::size(want); ++i) {
    auto e = m.mem->read_obj<x86::HvmMemmapTableEntry>(v[4] + i * sizeof(x86::HvmMemmapTableEntry));
    ASSERT_TRUE(e) << e.error().message();
    EXPECT_EQ(e->addr, want[i].addr) << "memmap entry " << i;
    EXPECT_EQ(e->size, want[i].size) << "memmap entry " << i;
    EXPECT_EQ(e->type, want[i].type) << "memmap entry " << i;
  }
  // One module, the initrd, its bytes where the module list says.
  ASSERT_EQ(v[6], 1u);
  auto info = m.mem->read_obj<x86::HvmStartInfo>(v[0]);
  ASSERT_TRUE(info) << info.error().message();
  EXPECT_EQ(info->version, 1u);
  EXPECT_EQ(info->rsdp_paddr, x86::kAcpiStart);
  auto mod = m.mem->read_obj<x86::HvmModlistEntry>(info->modlist_paddr);
  ASSERT_TRUE(mod) << mod.error().message();
  EXPECT_EQ(mod->size, initrd.size());
  EXPECT_GE(mod->paddr, kSegmentPaddr + kSegmentMemsz);
  EXPECT_LE(mod->paddr + mod->size, kRamBytes);
  std::vector<uint8_t> got_initrd(initrd.size());
  ASSERT_TRUE(m.mem->read(mod->paddr, got_initrd));
  EXPECT_EQ(got_initrd, initrd);
  // The segment's tail past filesz is zeroed.
  std::vector<uint8_t> tail(kSegmentMemsz - kEntryOffset - sizeof(kCode));
  ASSERT_TRUE(m.mem->read(kSegmentPaddr + kEntryOffset + sizeof(kCode), tail));
  EXPECT_EQ(tail, std::vector<uint8_t>(tail.size(), 0));

  // 32-bit protected mode, paging off: CR0.PE = 1, CR0.PG = 0, CS = the PVH code selector.
  EXPECT_EQ(v[7] & 1u, 1u) << "CR0 " << std::hex << v[7];
  EXPECT_EQ(v[7] & 0x80000000u, 0u) << "CR0 " << std::hex << v[7];
  EXPECT_EQ(v[8] & 0xffffu, x86::kPvhCsSelector);
  auto sregs = m.vcpu->get_sregs();
  ASSERT_TRUE(sregs) << sregs.error().message();
  EXPECT_EQ(sregs->cs.db, 1) << "CS must be a 32-bit segment";
  EXPECT_EQ(sregs->cs.l, 0);
  EXPECT_EQ(sregs->cs.base, 0u);
  EXPECT_EQ(sregs->efer & (1u << 10), 0u) << "EFER.LMA set";
  auto regs = m.vcpu->get_regs();
  ASSERT_TRUE(regs) << regs.error().message();
  // At the done OUT (or just past it, if this KVM completes the OUT before exiting).
  const uint64_t done_rip = kSegmentPaddr + kEntryOffset + kDoneOutOffset;
  EXPECT_TRUE(regs->rip == done_rip || regs->rip == done_rip + 1) << "rip " << std::hex << regs->rip;
  EXPECT_EQ(regs->rbx, boot->start_info_gpa);
}

TEST(PvhEntryKvm, KernelWithoutPvhNoteIsRefusedAndMemoryUntouched) {
  const std::vector<uint8_t> elf = make_elf(false);
  auto kernel = x86::parse_elf_kernel(elf);
  ASSERT_TRUE(kernel) << kernel.error().message();
  EXPECT_FALSE(kernel->pvh_entry);
  std::array<RegionSpec, 1> spec{{{0, kRamBytes}}};
  auto mem = GuestMemory::create(spec);
  ASSERT_TRUE(mem) << mem.error().message();
  auto boot = x86::load_pvh(*mem, kRamBytes, *kernel, elf, kCmdline, {});
  ASSERT_FALSE(boot);
  EXPECT_NE(boot.error().message().find("PVH"), std::string::npos) << boot.error().message();
  std::vector<uint8_t> seg(64);
  ASSERT_TRUE(mem->read(kSegmentPaddr, seg));
  EXPECT_EQ(seg, std::vector<uint8_t>(seg.size(), 0));
}

}  // namespace
}  // namespace tern::testing
