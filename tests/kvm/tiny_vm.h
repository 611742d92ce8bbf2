// TinyVm: a minimal long-mode VM for kvm tests: 2 MiB of RAM, one vCPU entering 64-bit code at
// 1 MiB, the in-kernel irqchip, a PIO and an MMIO bus. Runs on any /dev/kvm, software KVM included.
#pragma once

#include <gtest/gtest.h>

#include <array>
#include <memory>
#include <optional>
#include <vector>

#include "arch/x86/cpu_state.h"
#include "arch/x86/layout.h"
#include "bus/bus.h"
#include "kvm/kvm_system.h"
#include "memory/guest_memory.h"
#include "vcpu/vcpu_thread.h"

namespace tern::testing {

/// A device that records every access and posts a stop when its "done" register (offset 1) is
/// written. Offset 0 records written bytes.
class RecordingDevice : public BusDevice {
 public:
  explicit RecordingDevice(StopLatch& stop) : stop_(stop) {}
  std::string_view name() const override { return "recorder"; }
  void read(uint64_t, std::span<uint8_t> data) override {
    ++reads;
    std::fill(data.begin(), data.end(), 0x5a);
  }
  void write(uint64_t offset, std::span<const uint8_t> data) override {
    if (offset == 1) {
      stop_.post(StopEvent{StopKind::kPowerOff, 0, 0, "recorder done"});
      return;
    }
    values.push_back(data[0]);
  }
  std::vector<uint8_t> values;
  int reads = 0;

 private:
  StopLatch& stop_;
};

class TinyVm {
 public:
  static constexpr uint64_t kRamBytes = 2 * MiB;
  static constexpr uint64_t kCodeAddr = x86::kHimemStart;

  /// Builds the VM with `code` at 1 MiB, its RAM on `backend`. nullptr when /dev/kvm is unusable.
  static std::unique_ptr<TinyVm> create(std::span<const uint8_t> code,
                                        MemoryBackend backend = MemoryBackend::kAnon) {
    auto vm = std::unique_ptr<TinyVm>(new TinyVm());
    auto sys = KvmSystem::open();
    if (!sys) return nullptr;
    vm->sys_.emplace(std::move(*sys));
    auto kvm = vm->sys_->create_vm();
    EXPECT_TRUE(kvm) << kvm.error().message();
    vm->vm_.emplace(std::move(*kvm));
    EXPECT_TRUE(vm->vm_->set_tss_addr(x86::kTssAddr));
    EXPECT_TRUE(vm->vm_->create_irqchip());
    std::array<RegionSpec, 1> spec{{{0, kRamBytes}}};
    auto mem = GuestMemory::create(spec, backend);
    EXPECT_TRUE(mem) << mem.error().message();
    vm->mem_.emplace(std::move(*mem));
    const auto& r = vm->mem_->regions()[0];
    EXPECT_TRUE(vm->vm_->set_user_memory_region(0, r.gpa, r.size, r.host));
    EXPECT_TRUE(x86::write_boot_page_tables_and_gdt(*vm->mem_));
    EXPECT_TRUE(vm->mem_->write(kCodeAddr, code));
    auto vcpu = vm->vm_->create_vcpu(0);
    EXPECT_TRUE(vcpu) << vcpu.error().message();
    auto setup = x86::setup_boot_vcpu(*vcpu, kCodeAddr, x86::kZeroPageAddr);
    EXPECT_TRUE(setup) << setup.error().message();
    VcpuThread::install_kick_handler();
    vm->thread_ = std::make_unique<VcpuThread>(std::move(*vcpu), vm->pio, vm->mmio, vm->stop);
    return vm;
  }

  /// Runs until something posts a stop; returns it.
  StopEvent run() {
    thread_->start();
    StopEvent e = stop.wait();
    thread_->stop();
    thread_->join();
    return e;
  }

  [[nodiscard]] const ExitStats& stats() const { return thread_->stats(); }
  [[nodiscard]] VcpuThread& vcpu_thread() { return *thread_; }
  [[nodiscard]] KvmVm& kvm_vm() { return *vm_; }
  [[nodiscard]] const GuestMemory& memory() const { return *mem_; }

  Bus pio{"pio"};
  Bus mmio{"mmio"};
  StopLatch stop;

 private:
  TinyVm() = default;
  std::optional<KvmSystem> sys_;
  std::optional<KvmVm> vm_;
  std::optional<GuestMemory> mem_;
  std::unique_ptr<VcpuThread> thread_;
};

}  // namespace tern::testing
