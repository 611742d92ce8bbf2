// PciDevices on a real KVM VM with a non-virtio PCI function beside a virtio one: BARs allocated
// from the function's declaration, counters per function, and the "pci" snapshot section keyed by
// kind and name.
#include "vmm/pci_devices.h"

#include <gtest/gtest.h>

#include <cstring>

#include "devices/pci/pci_config_space.h"
#include "devices/pci/pci_function_model.h"
#include "devices/pci/pci_registers.h"
#include "tests/kvm/tiny_vm.h"
#include "virtio/testing/fake_virtio_device.h"

namespace tern {
namespace {

/// A PCI function that is not virtio: a 64-bit BAR0 and a 32-bit BAR2, one saved register.
class TestFunction final : public PciFunction {
 public:
  explicit TestFunction(std::string kind = "test-fn")
      : kind_(std::move(kind)),
        config_(PciIdentity{
            .vendor_id = 0x1b36, .device_id = 0x0010, .class_code = 0x010802, .interrupt_pin = 1}) {
    config_.declare_bar(PciBarDecl{.index = 0, .size = 0x4000, .is_64bit = true});
    config_.declare_bar(PciBarDecl{.index = 2, .size = 0x1000});
  }
  std::string_view name() const override { return "test0"; }
  std::string_view kind() const override { return kind_; }
  void config_read(uint32_t offset, std::span<uint8_t> data) override {
    config_.read(offset, data);
  }
  void config_write(uint32_t offset, std::span<const uint8_t> data) override {
    config_.write(offset, data);
  }
  std::vector<PciBarWindow> memory_windows() const override { return config_.memory_windows(); }
  void bar_read(uint8_t, uint64_t, std::span<uint8_t> data) override {
    std::memset(data.data(), 0, data.size());
  }
  void bar_write(uint8_t, uint64_t, std::span<const uint8_t>) override {}
  std::vector<PciBarDecl> bars() const override { return config_.bar_declarations(); }
  Result<void> place(const PciPlacement& p) override {
    config_.apply_placement(p);
    placement = p;
    return {};
  }
  void quiesce() override { ++quiesces; }
  void save_state(snap::ByteWriter& w) const override {
    config_.save_state(w);
    w.u32(value);
  }
  Result<void> restore_state(snap::ByteReader& r) override {
    TRY(config_.restore_state(r, name()));
    ASSIGN_OR_RETURN(value, r.u32());
    return {};
  }
  DeviceCounters counters() const override {
    return DeviceCounters{std::string(name()), kind_, {}, {{"value", value}}};
  }

  std::string kind_;
  PciConfigSpace config_;
  PciPlacement placement;
  uint32_t value = 0;
  int quiesces = 0;
};

class PciDevicesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    static const uint8_t kHlt[] = {0xF4};
    vm_ = testing::TinyVm::create(kHlt);
    if (!vm_) GTEST_SKIP() << "/dev/kvm not usable";
  }
  std::unique_ptr<PciDevices> make(std::shared_ptr<TestFunction> fn) {
    auto d = PciDevices::create(vm_->kvm_vm());
    EXPECT_TRUE(d) << d.error().message();
    auto s1 = (*d)->add_virtio(std::make_shared<testing::FakeVirtioDevice>(), mem_);
    EXPECT_TRUE(s1) << s1.error().message();
    auto s2 = (*d)->add(std::move(fn));
    EXPECT_TRUE(s2) << s2.error().message();
    EXPECT_EQ(*s2, 2);
    return std::move(*d);
  }
  uint32_t cfg(PciDevices& d, uint8_t slot, uint32_t off) {
    uint32_t v = 0;
    d.root().config_read(slot, 0, off, std::span<uint8_t>(reinterpret_cast<uint8_t*>(&v), 4));
    return v;
  }

  std::unique_ptr<testing::TinyVm> vm_;
  GuestMemory mem_ = GuestMemory::wrap({});
};

TEST_F(PciDevicesTest, AnyFunctionGetsTheBarsItDeclares) {
  auto fn = std::make_shared<TestFunction>();
  auto d = make(fn);
  const uint64_t base = d->root().mmio_base();
  // Slot 1 (virtio) took BAR0 16 KiB + BAR1 4 KiB; the test function's BARs follow, size-aligned.
  EXPECT_EQ(fn->placement.bar_gpa[0], base + 0x8000);
  EXPECT_EQ(fn->placement.bar_gpa[2], base + 0xC000);
  EXPECT_EQ(fn->placement.intx_irq, PciDevices::kIntxIrqs[1]);
  EXPECT_EQ(cfg(*d, 2, pci::kBar0), static_cast<uint32_t>(base + 0x8000) | pci::kBarMemory64);
  EXPECT_EQ(cfg(*d, 2, pci::kBar0 + 4), 0u);
  EXPECT_EQ(cfg(*d, 2, pci::kBar0 + 8), static_cast<uint32_t>(base + 0xC000));
  EXPECT_EQ(d->functions().size(), 2u);
  EXPECT_EQ(d->transports().size(), 1u);

  fn->value = 7;
  auto c = d->counters();
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].name, "fake-blk");
  EXPECT_EQ(c[0].kind, "virtio-blk");
  // The transport's three, then the MMIO exits of the function's BARs (every PCI function).
  ASSERT_EQ(c[0].counters.size(), 5u);
  EXPECT_EQ(c[0].counters[0].first, "protocol_errors");
  EXPECT_EQ(c[0].counters[3].first, "mmio_reads");
  EXPECT_EQ(c[0].counters[4].first, "mmio_writes");
  EXPECT_EQ(c[1].kind, "test-fn");
  ASSERT_EQ(c[1].counters.size(), 3u);
  EXPECT_EQ(c[1].counters[0].second, 7u);
  EXPECT_EQ(c[1].counters[1].first, "mmio_reads");
  EXPECT_EQ(c[1].counters[2].first, "mmio_writes");
}

TEST_F(PciDevicesTest, SnapshotSectionIsKeyedByKindAndName) {
  auto fn = std::make_shared<TestFunction>();
  auto d = make(fn);
  fn->value = 42;
  d->quiesce();
  EXPECT_EQ(fn->quiesces, 1);
  snap::ByteWriter w;
  d->save_state(w);
  d->unquiesce();
  d.reset();

  auto fn2 = std::make_shared<TestFunction>();
  auto d2 = make(fn2);
  snap::ByteReader r(w.data(), "pci");
  auto ok = d2->restore_state(r);
  ASSERT_TRUE(ok) << ok.error().message();
  EXPECT_EQ(fn2->value, 42u);
  d2.reset();

  auto other = make(std::make_shared<TestFunction>("other-fn"));
  snap::ByteReader r2(w.data(), "pci");
  auto bad = other->restore_state(r2);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message().find("test0 (test-fn) in the snapshot"), std::string::npos)
      << bad.error().message();
}

/// A model whose function remembers the PciPlatform it was built with.
class PlatformRecordingModel final : public PciFunctionModel {
 public:
  std::string_view name() const override { return "rec"; }
  Result<std::shared_ptr<PciFunction>> make_function(const PciFunctionServices& s) override {
    platform = s.platform;
    return std::make_shared<TestFunction>();
  }
  PciPlatform* platform = nullptr;
};

// Firmware boots: slots 2 and 5 both get IRQ 10 (piix_intx_irq), level-triggered. One function
// lowering its INTx must not drop the line while the other still asserts it: each function
// drives the IRQ through its own IntxRouter source, not the VM's platform directly.
TEST_F(PciDevicesTest, PiixIntxFunctionsShareTheirLineThroughTheRouter) {
  auto d = PciDevices::create(vm_->kvm_vm());
  ASSERT_TRUE(d) << d.error().message();
  (*d)->use_piix_intx();
  PlatformRecordingModel a, b;
  ASSERT_TRUE((*d)->add_model(a, mem_));
  ASSERT_TRUE((*d)->add_model(b, mem_));
  ASSERT_NE(a.platform, nullptr);
  ASSERT_NE(b.platform, nullptr);
  ASSERT_NE((*d)->intx_router(), nullptr);
  a.platform->set_irq_level(10, true);
  b.platform->set_irq_level(10, true);
  b.platform->set_irq_level(10, false);
  EXPECT_TRUE((*d)->intx_router()->level(10));  // a still asserts it
  a.platform->set_irq_level(10, false);
  EXPECT_FALSE((*d)->intx_router()->level(10));
}

}  // namespace
}  // namespace tern
