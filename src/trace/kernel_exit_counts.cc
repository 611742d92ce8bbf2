#include "trace/kernel_exit_counts.h"

#include <algorithm>
#include <tuple>

namespace tern {

uint64_t KernelExitCounts::total() const {
  uint64_t t = 0;
  for (const auto& r : reasons) t += r.count;
  return t;
}

namespace {

template <class T, class Key>
void sort_rows(std::vector<T>& v, Key key) {
  std::sort(v.begin(), v.end(), [&](const T& a, const T& b) {
    if (a.count != b.count) return a.count > b.count;
    return key(a) < key(b);
  });
}

}  // namespace

void sort_kernel_exit_counts(KernelExitCounts& c) {
  sort_rows(c.reasons, [](const KernelExitReason& r) { return std::tuple(r.isa, r.code); });
  sort_rows(c.msrs, [](const KernelMsrAccess& m) { return std::tuple(m.msr, m.write); });
  sort_rows(c.pio, [](const KernelPioAccess& p) { return std::tuple(p.port, p.in); });
  sort_rows(c.npf, [](const KernelNpf& n) { return std::tuple(n.kind, n.gpa_page); });
  sort_rows(c.irqs, [](const KernelInjectedIrq& i) { return i.vector; });
}

}  // namespace tern
