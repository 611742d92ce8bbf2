#include "kvm/vm_kvm_state.h"

#include <string>

namespace tern {

namespace {

template <class T>
Result<T> read_pod(snap::ByteReader& r, const char* field) {
  auto v = r.pod<T>();
  if (!v) {
    Error e = std::move(v).error();
    e.context = std::string(field) + ": " + e.context;
    return tl::unexpected(std::move(e));
  }
  return v;
}

Result<kvm_irqchip> read_chip(snap::ByteReader& r, const char* field, uint32_t chip_id) {
  ASSIGN_OR_RETURN(kvm_irqchip c, read_pod<kvm_irqchip>(r, field));
  if (c.chip_id != chip_id)
    return fail(r.what(), std::string(field) + ": chip_id " + std::to_string(c.chip_id) +
                              ", expected " + std::to_string(chip_id));
  return c;
}

}  // namespace

Result<VmKvmState> save_vm_kvm_state(KvmVm& vm) {
  VmKvmState s;
  ASSIGN_OR_RETURN(s.pic_master, vm.get_irqchip(KVM_IRQCHIP_PIC_MASTER));
  ASSIGN_OR_RETURN(s.pic_slave, vm.get_irqchip(KVM_IRQCHIP_PIC_SLAVE));
  ASSIGN_OR_RETURN(s.ioapic, vm.get_irqchip(KVM_IRQCHIP_IOAPIC));
  ASSIGN_OR_RETURN(s.pit, vm.get_pit2());
  ASSIGN_OR_RETURN(s.clock, vm.get_clock());
  return s;
}

Result<void> restore_vm_kvm_state(KvmVm& vm, const VmKvmState& s) {
  // Order and reasons: vm_kvm_state.h.
  TRY(vm.set_irqchip(s.pic_master));
  TRY(vm.set_irqchip(s.pic_slave));
  TRY(vm.set_irqchip(s.ioapic));
  TRY(vm.set_pit2(s.pit));
  kvm_clock_data c{};
  c.clock = s.clock.clock;
  c.flags = 0;
  TRY(vm.set_clock(c));
  return {};
}

void encode_vm_kvm_state(snap::ByteWriter& w, const VmKvmState& s) {
  w.pod(s.pic_master);
  w.pod(s.pic_slave);
  w.pod(s.ioapic);
  w.pod(s.pit);
  w.pod(s.clock);
}

Result<VmKvmState> decode_vm_kvm_state(snap::ByteReader& r) {
  VmKvmState s;
  ASSIGN_OR_RETURN(s.pic_master, read_chip(r, "pic_master", KVM_IRQCHIP_PIC_MASTER));
  ASSIGN_OR_RETURN(s.pic_slave, read_chip(r, "pic_slave", KVM_IRQCHIP_PIC_SLAVE));
  ASSIGN_OR_RETURN(s.ioapic, read_chip(r, "ioapic", KVM_IRQCHIP_IOAPIC));
  ASSIGN_OR_RETURN(s.pit, read_pod<kvm_pit_state2>(r, "pit"));
  ASSIGN_OR_RETURN(s.clock, read_pod<kvm_clock_data>(r, "clock"));
  return s;
}

}  // namespace tern
