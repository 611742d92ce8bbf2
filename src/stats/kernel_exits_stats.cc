#include "stats/kernel_exits_stats.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <map>
#include <tuple>

#include "base/clock.h"

namespace tern {

namespace {

using Json = nlohmann::json;

std::string hex(uint64_t v) {
  return fmt::format("{:#x}", v);
}

uint64_t minus(uint64_t now, uint64_t base) {
  return now >= base ? now - base : now;
}

// a - b as a signed number, clamped to int64_t (the casts before the subtraction overflowed, and
// gave the wrong sign, once a count passed 2^63).
int64_t signed_difference(uint64_t a, uint64_t b) {
  constexpr uint64_t kMax = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
  if (a >= b) return static_cast<int64_t>(std::min(a - b, kMax));
  return -static_cast<int64_t>(std::min(b - a, kMax));
}

class TraceSource : public KernelExitSource {
 public:
  explicit TraceSource(std::unique_ptr<KernelExitTrace> t) : trace_(std::move(t)) {}
  Result<KernelExitCounts> read() const override { return trace_->read(); }

 private:
  std::unique_ptr<KernelExitTrace> trace_;
};

// A range's accesses in one direction (reads for IN, writes for OUT), from `ranges` by base.
uint64_t range_count(const std::vector<Bus::RangeStats>& ranges, uint64_t base, bool in) {
  for (const Bus::RangeStats& r : ranges)
    if (r.base == base) return in ? r.reads : r.writes;
  return 0;
}

uint64_t unclaimed_count(const UnclaimedTable::Snapshot& s, uint64_t port, bool in) {
  for (const UnclaimedTable::Row& r : s.rows)
    if (r.addr == port) return in ? r.reads : r.writes;
  return 0;
}

template <class T>
std::vector<T> by_count(std::vector<T> v) {
  std::stable_sort(v.begin(), v.end(), [](const T& a, const T& b) { return a.count > b.count; });
  return v;
}

}  // namespace

KernelExitStarter kernel_exit_trace_starter(KernelExitTrace::Options options) {
  return [options]() -> Result<std::unique_ptr<KernelExitSource>> {
    ASSIGN_OR_RETURN(std::unique_ptr<KernelExitTrace> t, KernelExitTrace::start(options));
    return std::unique_ptr<KernelExitSource>(new TraceSource(std::move(t)));
  };
}

KernelExitsStats::PioBaseline KernelExitsStats::pio_now() const {
  if (!in_.pio) return {};
  return {in_.pio->range_stats(), in_.pio->unclaimed().snapshot()};
}

Result<void> KernelExitsStats::enable() {
  std::lock_guard lock(mu_);
  if (source_) return {};
  if (!in_.start) {
    error_ = "in-kernel exit accounting: not available for this VM";
    return fail(error_);
  }
  // KVM's counter before and after the attach: exits in between may be counted by one side only
  // (kvm_start_edge_, part of the reconciliation bound; 0 when started before the first KVM_RUN).
  Result<uint64_t> before = in_.kvm_exits ? in_.kvm_exits() : fail("KVM exits", "no reader");
  auto source = in_.start();
  if (!source) {
    error_ = source.error().message();
    return tl::unexpected(source.error());
  }
  since_ns_ = monotonic_ns();
  kvm_base_ = in_.kvm_exits ? in_.kvm_exits() : fail("KVM exits", "no reader");
  kvm_start_edge_ = before && kvm_base_ ? minus(*kvm_base_, *before) : 0;
  user_base_ = in_.userspace_exits ? in_.userspace_exits() : 0;
  pio_base_ = pio_now();
  error_.clear();
  source_ = std::move(*source);
  return {};
}

void KernelExitsStats::disable() {
  std::unique_ptr<KernelExitSource> old;
  {
    std::lock_guard lock(mu_);
    old = std::move(source_);
    error_.clear();
  }
  // Detached outside the lock (json() callers need not wait for it).
}

bool KernelExitsStats::enabled() const {
  std::lock_guard lock(mu_);
  return source_ != nullptr;
}

Json in_kernel_pio_json(const std::vector<KernelPioAccess>& pio,
                        const std::vector<Bus::RangeStats>& base_ranges,
                        const std::vector<Bus::RangeStats>& now_ranges,
                        const UnclaimedTable::Snapshot& base_unclaimed,
                        const UnclaimedTable::Snapshot& now_unclaimed) {
  struct Group {
    uint64_t first = 0, last = 0;  // ports (a device's range, or one port)
    std::string device;
    bool in = false;
    uint64_t kvm = 0, user = 0;
  };
  // Key: (range base or port, is a device range, dir).
  std::map<std::tuple<uint64_t, bool, bool>, Group> groups;
  for (const KernelPioAccess& a : pio) {
    const Bus::RangeStats* range = nullptr;
    for (const Bus::RangeStats& r : now_ranges)
      if (a.port >= r.base && a.port - r.base < r.len) range = &r;
    if (range) {
      // First access of the group: its range and tern's count (by emplace, not by an empty
      // device name, which a device may have: each access used to start the group again).
      auto [it, first] = groups.try_emplace({range->base, true, a.in});
      Group& g = it->second;
      if (first) {
        g = Group{range->base,
                  range->base + range->len - 1,
                  range->device,
                  a.in,
                  0,
                  minus(range_count(now_ranges, range->base, a.in),
                        range_count(base_ranges, range->base, a.in))};
      }
      g.kvm += a.count;
    } else {
      Group& g = groups[{a.port, false, a.in}];
      g.first = g.last = a.port;
      g.in = a.in;
      g.kvm += a.count;
      g.user = minus(unclaimed_count(now_unclaimed, a.port, a.in),
                     unclaimed_count(base_unclaimed, a.port, a.in));
    }
  }
  std::vector<Group> rows;
  for (auto& [key, g] : groups) rows.push_back(g);
  std::stable_sort(rows.begin(), rows.end(), [](const Group& a, const Group& b) {
    uint64_t ka = a.kvm > a.user ? a.kvm - a.user : 0, kb = b.kvm > b.user ? b.kvm - b.user : 0;
    return ka > kb;
  });
  Json out = Json::array();
  for (const Group& g : rows) {
    Json row = {{"port", g.first == g.last ? hex(g.first) : hex(g.first) + "-" + hex(g.last)}};
    if (!g.device.empty()) row["device"] = g.device;
    row["dir"] = g.in ? "in" : "out";
    row["kvm_pio"] = g.kvm;
    row["userspace"] = g.user;
    row["in_kernel"] = g.kvm > g.user ? g.kvm - g.user : 0;
    out.push_back(std::move(row));
  }
  return out;
}

std::string mmio_page_device(const std::vector<Bus::RangeStats>& mmio_ranges, uint64_t gpa_page) {
  const uint64_t lo = gpa_page << 12, hi = lo + 4096;  // [lo, hi)
  for (const Bus::RangeStats& r : mmio_ranges)
    if (r.base < hi && r.base + r.len > lo) return r.device;
  // KVM's in-kernel irqchip (KVM_CREATE_IRQCHIP): the IOAPIC and the local APICs' default base.
  if (lo == 0xfec00000) return "kvm-ioapic";
  if (lo == 0xfee00000) return "kvm-lapic";
  return "unclaimed";
}

Json KernelExitsStats::json() const {
  std::lock_guard lock(mu_);
  if (!source_) {
    Json j = {{"enabled", false}};
    if (!error_.empty()) j["error"] = error_;
    return j;
  }
  // The sampling edge: KVM, maps, KVM (the bound is the exits between the two KVM readings plus
  // one in-flight exit per vCPU: kvm_exit fires before KVM increments stat.exits).
  Result<uint64_t> k0 = in_.kvm_exits ? in_.kvm_exits() : fail("KVM exits", "no reader");
  auto counts = source_->read();
  Result<uint64_t> k1 = in_.kvm_exits ? in_.kvm_exits() : fail("KVM exits", "no reader");
  const uint64_t user = in_.userspace_exits ? in_.userspace_exits() : 0;
  PioBaseline pio = pio_now();
  std::vector<Bus::RangeStats> mmio;
  if (in_.mmio) mmio = in_.mmio->range_stats();

  Json j = {{"enabled", true}, {"method", "ebpf"}, {"since_ns", since_ns_}};
  if (!counts) {
    j["error"] = counts.error().message();
    return j;
  }
  const uint64_t total = counts->total();
  j["total"] = total;
  if (k0 && k1 && kvm_base_) {
    const uint64_t kvm = minus(*k1, *kvm_base_);
    j["kvm_exits"] = kvm;
    j["kvm_exits_edge"] = minus(*k1, *k0);
    j["kvm_exits_start_edge"] = kvm_start_edge_;
    j["difference"] = signed_difference(total, kvm);
  } else {
    const Error& e = !kvm_base_ ? kvm_base_.error() : !k0 ? k0.error() : k1.error();
    j["kvm_exits_error"] = "no reconciliation: " + e.message();
  }
  j["vcpus"] = in_.vcpus;
  j["userspace_exits"] = minus(user, user_base_);

  Json reasons = Json::array();
  for (const KernelExitReason& r : by_count(counts->reasons))
    reasons.push_back({{"isa", exit_isa_name(r.isa)},
                       {"code", r.code},
                       {"reason", kernel_exit_reason_name(r.isa, r.code)},
                       {"count", r.count},
                       {"time_ns", r.time_ns}});
  j["reasons"] = reasons;
  Json msrs = Json::array();
  for (const KernelMsrAccess& m : by_count(counts->msrs))
    msrs.push_back({{"msr", hex(m.msr)},
                    {"name", msr_name(m.msr)},
                    {"access", m.write ? "write" : "read"},
                    {"count", m.count}});
  j["msrs"] = msrs;
  Json pio_rows = Json::array();
  for (const KernelPioAccess& p : by_count(counts->pio)) {
    Json row = {{"port", hex(p.port)}, {"dir", p.in ? "in" : "out"}, {"count", p.count}};
    for (const Bus::RangeStats& r : pio.ranges)
      if (p.port >= r.base && p.port - r.base < r.len) row["device"] = r.device;
    pio_rows.push_back(std::move(row));
  }
  j["pio"] = pio_rows;
  j["pio_in_kernel"] = in_kernel_pio_json(counts->pio, pio_base_.ranges, pio.ranges,
                                          pio_base_.unclaimed, pio.unclaimed);
  Json npf = Json::array();
  for (const KernelNpf& n : by_count(counts->npf)) {
    Json row = {{"kind", npf_kind_name(n.kind)}};
    if (n.kind == NpfKind::kMmioCached || n.kind == NpfKind::kMmioOther) {
      row["gpa"] = hex(n.gpa_page << 12);
      row["device"] = mmio_page_device(mmio, n.gpa_page);
    }
    row["count"] = n.count;
    npf.push_back(std::move(row));
  }
  j["npf"] = npf;
  Json irqs = Json::array();
  for (const KernelInjectedIrq& i : by_count(counts->irqs))
    irqs.push_back({{"vector", i.vector}, {"count", i.count}});
  j["injected_irqs"] = irqs;
  j["dropped"] = counts->dropped;
  return j;
}

}  // namespace tern
