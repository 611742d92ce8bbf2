#include "devices/pci/intx_router.h"

#include "base/result.h"
#include "devices/device_state.h"

namespace tern {

class IntxRouter::Source final : public PciPlatform {
 public:
  Source(IntxRouter& router, unsigned id) : router_(router), id_(id) {}
  Result<uint32_t> allocate_msi(BorrowedFd irqfd) override {
    return router_.platform_.allocate_msi(irqfd);
  }
  Result<void> set_msi_route(uint32_t gsi, uint64_t address, uint32_t data) override {
    return router_.platform_.set_msi_route(gsi, address, data);
  }
  void set_irq_level(uint32_t irq, bool level) override { router_.set(id_, irq, level); }
  Result<void> set_ioeventfd(uint64_t gpa, uint32_t len, BorrowedFd fd, bool assign) override {
    return router_.platform_.set_ioeventfd(gpa, len, fd, assign);
  }

 private:
  IntxRouter& router_;
  unsigned id_;
};

std::unique_ptr<PciPlatform> IntxRouter::source() {
  std::lock_guard lock(mu_);
  TERN_CHECK(sources_ < kMaxSources);
  return std::make_unique<Source>(*this, sources_++);
}

bool IntxRouter::level(uint32_t irq) const {
  std::lock_guard lock(mu_);
  return irq < kIrqs && asserted_[irq] != 0;
}

void IntxRouter::set(unsigned source, uint32_t irq, bool level) {
  if (irq >= kIrqs) return;  // not wired (0xFF) or out of range: nothing to drive
  std::lock_guard lock(mu_);
  const uint64_t bit = uint64_t{1} << source;
  if (level)
    asserted_[irq] |= bit;
  else
    asserted_[irq] &= ~bit;
  const bool now = asserted_[irq] != 0;
  // A raise is always passed on (the edge an edge-triggered pin needs); a lower only when no
  // other source still asserts the line.
  if (level || !now) platform_.set_irq_level(irq, now);
}

namespace {
constexpr uint32_t kVersion = 1;
constexpr std::string_view kDev = "intx-router";
}  // namespace

void IntxRouter::save_state(snap::ByteWriter& w) const {
  std::lock_guard lock(mu_);
  w.u32(kVersion);
  w.u32(sources_);
  for (uint64_t a : asserted_) w.u64(a);
}

Result<void> IntxRouter::restore_state(snap::ByteReader& r) {
  TRY(devstate::expect_version(r, kDev, kVersion));
  ASSIGN_OR_RETURN(uint32_t n, devstate::named(kDev, "sources", r.u32()));
  std::array<uint64_t, kIrqs> saved{};
  for (uint64_t& a : saved) {
    ASSIGN_OR_RETURN(a, devstate::named(kDev, "levels", r.u64()));
  }
  std::lock_guard lock(mu_);
  if (n != sources_)
    return devstate::bad_field(kDev, "sources",
                               std::to_string(n) + " saved, " + std::to_string(sources_) + " here");
  const uint64_t valid = sources_ >= 64 ? ~uint64_t{0} : (uint64_t{1} << sources_) - 1;
  for (uint64_t a : saved)
    if (a & ~valid) return devstate::bad_field(kDev, "levels", "a source that does not exist");
  asserted_ = saved;
  return {};
}

}  // namespace tern
