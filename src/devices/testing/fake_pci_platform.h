// FakePciPlatform: a PciPlatform for unit tests that records MSI routes, INTx levels and
// ioeventfd registrations instead of calling KVM.
#pragma once

#include <map>
#include <mutex>
#include <vector>

#include "devices/pci/pci_platform.h"

namespace tern {

class FakePciPlatform final : public PciPlatform {
 public:
  struct Route {
    uint64_t address = 0;
    uint32_t data = 0;
  };
  Result<uint32_t> allocate_msi(BorrowedFd) override {
    std::lock_guard lock(mu);
    return next_gsi++;
  }
  Result<void> set_msi_route(uint32_t gsi, uint64_t address, uint32_t data) override {
    std::lock_guard lock(mu);
    routes[gsi] = {address, data};
    return {};
  }
  void set_irq_level(uint32_t irq, bool level) override {
    std::lock_guard lock(mu);
    levels[irq] = level;
    level_changes.push_back(level);
  }
  Result<void> set_ioeventfd(uint64_t gpa, uint32_t len, BorrowedFd fd, bool assign) override {
    std::lock_guard lock(mu);
    if (assign) {
      if (ioeventfds.count(gpa)) return fail("KVM_IOEVENTFD", "already assigned (EEXIST)");
      ioeventfds[gpa] = {len, fd.get()};
    } else {
      if (!ioeventfds.count(gpa)) return fail("KVM_IOEVENTFD", "not assigned (ENOENT)");
      ioeventfds.erase(gpa);
    }
    return {};
  }

  std::mutex mu;
  uint32_t next_gsi = 24;
  std::map<uint32_t, Route> routes;
  std::map<uint32_t, bool> levels;
  std::vector<bool> level_changes;
  struct IoEventFd {
    uint32_t len;
    int fd;
  };
  std::map<uint64_t, IoEventFd> ioeventfds;
};

}  // namespace tern
