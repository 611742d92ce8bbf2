#include "kvm/kvm_vm.h"

#include <sys/ioctl.h>
#include <sys/mman.h>

#include <cstdio>
#include <cstring>
#include <vector>

#include "kvm/kvm_abi.h"

namespace tern {

namespace {
std::string fmt_hex(uint64_t v) {
  char b[24];
  std::snprintf(b, sizeof b, "%#llx", static_cast<unsigned long long>(v));
  return b;
}
}  // namespace

Result<void> KvmVm::set_user_memory_region(uint32_t slot, uint64_t gpa, uint64_t size, void* host,
                                           uint32_t flags) {
  kvm_userspace_memory_region r{};
  r.slot = slot;
  r.flags = flags;
  r.guest_phys_addr = gpa;
  r.memory_size = size;
  r.userspace_addr = reinterpret_cast<uint64_t>(host);
  if (::ioctl(fd_.get(), KVM_SET_USER_MEMORY_REGION, &r) < 0)
    return fail_errno("KVM_SET_USER_MEMORY_REGION", "slot " + std::to_string(slot));
  return {};
}

Result<void> KvmVm::set_tss_addr(uint64_t gpa) {
  if (::ioctl(fd_.get(), KVM_SET_TSS_ADDR, static_cast<unsigned long>(gpa)) < 0)
    return fail_errno("KVM_SET_TSS_ADDR");
  return {};
}

Result<void> KvmVm::set_identity_map_addr(uint64_t gpa) {
  uint64_t a = gpa;
  if (::ioctl(fd_.get(), KVM_SET_IDENTITY_MAP_ADDR, &a) < 0)
    return fail_errno("KVM_SET_IDENTITY_MAP_ADDR");
  return {};
}

Result<void> KvmVm::create_irqchip() {
  if (::ioctl(fd_.get(), KVM_CREATE_IRQCHIP, 0) < 0) return fail_errno("KVM_CREATE_IRQCHIP");
  return {};
}

Result<void> KvmVm::create_pit2() {
  kvm_pit_config cfg{};
  // KVM_PIT_SPEAKER_DUMMY (as QEMU sets it): KVM also serves port 0x61, NMI status and control
  // register B, with PIT channel 2's gate (bit 0) and output (bit 5). Without it the port exits to
  // tern unclaimed and reads 0xFF, so a guest that times a channel-2 one-shot there (memtest86+'s
  // TSC calibration, SeaBIOS, Linux's pit_hpet_ptimer_calibrate_cpu) sees it expire at once.
  cfg.flags = KVM_PIT_SPEAKER_DUMMY;
  if (::ioctl(fd_.get(), KVM_CREATE_PIT2, &cfg) < 0) return fail_errno("KVM_CREATE_PIT2");
  return {};
}

Result<void> KvmVm::irq_line(uint32_t irq, bool level) {
  kvm_irq_level l{};
  l.irq = irq;
  l.level = level ? 1 : 0;
  if (::ioctl(fd_.get(), KVM_IRQ_LINE, &l) < 0)
    return fail_errno("KVM_IRQ_LINE", "irq " + std::to_string(irq));
  return {};
}

Result<void> KvmVm::set_ioeventfd(uint64_t gpa, uint32_t len, BorrowedFd fd, bool assign) {
  kvm_ioeventfd e{};
  e.addr = gpa;
  e.len = len;
  e.fd = fd.get();
  e.flags = assign ? 0 : KVM_IOEVENTFD_FLAG_DEASSIGN;
  if (::ioctl(fd_.get(), KVM_IOEVENTFD, &e) < 0)
    return fail_errno("KVM_IOEVENTFD", fmt_hex(gpa) + (assign ? " assign" : " deassign"));
  return {};
}

Result<void> KvmVm::set_irqfd(BorrowedFd fd, uint32_t gsi, bool assign) {
  kvm_irqfd f{};
  f.fd = static_cast<uint32_t>(fd.get());
  f.gsi = gsi;
  f.flags = assign ? 0 : KVM_IRQFD_FLAG_DEASSIGN;
  if (::ioctl(fd_.get(), KVM_IRQFD, &f) < 0)
    return fail_errno("KVM_IRQFD", "GSI " + std::to_string(gsi));
  return {};
}

Result<void> KvmVm::set_gsi_routing(std::span<const kvm_irq_routing_entry> entries) {
  // kvm_abi::IrqRoutingHeader followed by the entries (8-byte aligned: the header is 8 bytes).
  std::vector<uint64_t> buf((sizeof(kvm_abi::IrqRoutingHeader) +
                             entries.size() * sizeof(kvm_irq_routing_entry) + 7) / 8);
  kvm_abi::IrqRoutingHeader h{static_cast<uint32_t>(entries.size()), 0};
  std::memcpy(buf.data(), &h, sizeof(h));
  if (!entries.empty())
    std::memcpy(reinterpret_cast<uint8_t*>(buf.data()) + sizeof(h), entries.data(),
                entries.size_bytes());
  if (::ioctl(fd_.get(), kvm_abi::kSetGsiRouting, buf.data()) < 0)
    return fail_errno("KVM_SET_GSI_ROUTING", std::to_string(entries.size()) + " entries");
  return {};
}

Result<KvmVcpu> KvmVm::create_vcpu(uint32_t id) {
  int fd = ::ioctl(fd_.get(), KVM_CREATE_VCPU, static_cast<unsigned long>(id));
  if (fd < 0) return fail_errno("KVM_CREATE_VCPU", "vCPU " + std::to_string(id));
  UniqueFd vfd(fd);
  void* run = ::mmap(nullptr, vcpu_mmap_size_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (run == MAP_FAILED) return fail_errno("mmap kvm_run", "vCPU " + std::to_string(id));
  // KVM_CAP_XSAVE2 is answered on the VM fd (api.rst): the kvm_xsave size KVM_GET_XSAVE2 and
  // KVM_SET_XSAVE transfer for this VM's vCPUs.
  int xsave2 = check_extension(KVM_CAP_XSAVE2);
  return KvmVcpu(id, std::move(vfd), static_cast<kvm_run*>(run), vcpu_mmap_size_,
                 xsave2 > 0 ? static_cast<size_t>(xsave2) : 0);
}

Result<kvm_irqchip> KvmVm::get_irqchip(uint32_t chip_id) const {
  kvm_irqchip c{};
  c.chip_id = chip_id;
  if (::ioctl(fd_.get(), KVM_GET_IRQCHIP, &c) < 0)
    return fail_errno("KVM_GET_IRQCHIP", "chip " + std::to_string(chip_id));
  return c;
}

Result<void> KvmVm::set_irqchip(const kvm_irqchip& chip) {
  if (::ioctl(fd_.get(), KVM_SET_IRQCHIP, &chip) < 0)
    return fail_errno("KVM_SET_IRQCHIP", "chip " + std::to_string(chip.chip_id));
  return {};
}

Result<kvm_pit_state2> KvmVm::get_pit2() const {
  kvm_pit_state2 s{};
  if (::ioctl(fd_.get(), KVM_GET_PIT2, &s) < 0) return fail_errno("KVM_GET_PIT2");
  return s;
}

Result<void> KvmVm::set_pit2(const kvm_pit_state2& s) {
  if (::ioctl(fd_.get(), KVM_SET_PIT2, &s) < 0) return fail_errno("KVM_SET_PIT2");
  return {};
}

Result<kvm_clock_data> KvmVm::get_clock() const {
  kvm_clock_data c{};
  if (::ioctl(fd_.get(), KVM_GET_CLOCK, &c) < 0) return fail_errno("KVM_GET_CLOCK");
  return c;
}

Result<void> KvmVm::set_clock(const kvm_clock_data& c) {
  if (::ioctl(fd_.get(), KVM_SET_CLOCK, &c) < 0)
    return fail_errno("KVM_SET_CLOCK", "flags " + fmt_hex(c.flags));
  return {};
}

int KvmVm::check_extension(long cap) const {
  int r = ::ioctl(fd_.get(), KVM_CHECK_EXTENSION, cap);
  return r < 0 ? 0 : r;
}

}  // namespace tern
