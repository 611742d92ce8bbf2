#include "stats/vm_stats.h"

#include <fmt/format.h>

#include <algorithm>

#include "base/clock.h"
#include "stats/prometheus.h"
#include "stats/thread_cpu.h"

namespace tern {

namespace {

std::string hex(uint64_t v) {
  return fmt::format("{:#x}", v);
}

}  // namespace

void VmStats::add_vcpu(uint32_t id, const ExitStats& exits, Result<KvmStatsReader> kvm) {
  vcpus_.push_back(Vcpu{id, &exits, std::move(kvm)});
}

void VmStats::set_kernel_exit_starter(KernelExitStarter start) {
  KernelExitsInputs in;
  in.start = std::move(start);
  in.kvm_exits = [this] { return kvm_exits(); };
  in.userspace_exits = [this] {
    uint64_t n = 0;
    for (const Vcpu& v : vcpus_) n += v.exits->run_returns();
    return n;
  };
  in.vcpus = static_cast<uint32_t>(vcpus_.size());
  in.pio = &pio_;
  in.mmio = &mmio_;
  kernel_ = std::make_unique<KernelExitsStats>(std::move(in));
}

Result<uint64_t> VmStats::kvm_exits() const {
  uint64_t n = 0;
  for (const Vcpu& v : vcpus_) {
    if (!v.kvm) return fail("vCPU " + std::to_string(v.id) + " KVM stats", v.kvm.error().message());
    ASSIGN_OR_RETURN(std::vector<KvmStat> stats, v.kvm->read());
    auto it = std::find_if(stats.begin(), stats.end(), [](const KvmStat& s) {
      return s.name == "exits" && s.values.size() == 1;
    });
    if (it == stats.end())
      return fail("vCPU " + std::to_string(v.id) + " KVM stats", "no \"exits\" counter");
    n += it->values[0];
  }
  return n;
}

nlohmann::json exit_stats_json(const ExitStats& exits) {
  nlohmann::json by_reason = nlohmann::json::object();
  for (uint32_t r = 0; r < ExitStats::kMaxReason; ++r) {
    LatencyHistogram::Snapshot h = exits.histogram(r).snapshot();
    if (h.count == 0) continue;
    nlohmann::json buckets = nlohmann::json::array();
    for (size_t i = 0; i < LatencyHistogram::kBuckets; ++i) {
      if (h.buckets[i] == 0) continue;
      nlohmann::json le = i < LatencyHistogram::kFinite
                              ? nlohmann::json(LatencyHistogram::bucket_le(i))
                              : nlohmann::json("+Inf");
      buckets.push_back({le, h.buckets[i]});
    }
    by_reason[exit_reason_name(r)] = {{"count", h.count},
                                      {"sum_ns", h.sum_ns},
                                      {"min_ns", h.min_ns},
                                      {"max_ns", h.max_ns},
                                      {"buckets", buckets}};
  }
  return by_reason;
}

nlohmann::json kvm_stats_json(const Result<KvmStatsReader>& reader) {
  if (!reader) return {{"error", "kvm in-kernel stats unavailable: " + reader.error().message()}};
  auto values = reader->read();
  if (!values) return {{"error", "kvm in-kernel stats unavailable: " + values.error().message()}};
  nlohmann::json counters = nlohmann::json::object(), gauges = nlohmann::json::object(),
                 hists = nlohmann::json::object();
  for (const KvmStat& s : *values) {
    if (s.values.size() == 1 && s.type == "cumulative") {
      counters[s.name] = s.values[0];
    } else if (s.values.size() == 1) {
      gauges[s.name] = s.values[0];
    } else {
      hists[s.name] = {{"type", s.type}, {"bucket_size", s.bucket_size}, {"values", s.values}};
    }
  }
  return {{"id", reader->id()}, {"counters", counters}, {"gauges", gauges}, {"histograms", hists}};
}

nlohmann::json unclaimed_json(const UnclaimedTable& table) {
  UnclaimedTable::Snapshot s = table.snapshot();
  nlohmann::json rows = nlohmann::json::array();
  uint64_t reads = s.other.reads, writes = s.other.writes;
  for (const auto& r : s.rows) {
    rows.push_back({{"addr", hex(r.addr)}, {"reads", r.reads}, {"writes", r.writes}});
    reads += r.reads;
    writes += r.writes;
  }
  return {{"reads", reads},
          {"writes", writes},
          {"addresses", rows},
          {"other", {{"reads", s.other.reads}, {"writes", s.other.writes}}}};
}

nlohmann::json device_counters_json(const std::vector<DeviceCounters>& devices) {
  nlohmann::json out = nlohmann::json::array();
  for (const DeviceCounters& d : devices) {
    nlohmann::json counters = nlohmann::json::object();
    for (const auto& [name, value] : d.counters) counters[name] = value;
    nlohmann::json queues = nlohmann::json::array();
    for (const QueueCountersSnapshot& q : d.queues) {
      queues.push_back({{"index", q.index},
                        {"kicks", q.kicks},
                        {"requests", q.requests},
                        {"interrupts", q.interrupts},
                        {"interrupts_suppressed", q.interrupts_suppressed},
                        {"interrupts_coalesced", q.interrupts_coalesced},
                        {"poll_hits", q.poll_hits},
                        {"poll_ns", q.poll_ns},
                        {"bytes", q.bytes},
                        {"errors", q.errors}});
    }
    out.push_back({{"name", d.name}, {"kind", d.kind}, {"counters", counters}, {"queues", queues}});
  }
  return out;
}

nlohmann::json VmStats::stats_json() const {
  nlohmann::json j;
  j["version"] = 1;
  j["timestamp_ns"] = monotonic_ns();

  nlohmann::json vcpus = nlohmann::json::array();
  nlohmann::json total_by_reason = nlohmann::json::object();
  uint64_t total = 0, run_returns = 0;
  for (const Vcpu& v : vcpus_) {
    nlohmann::json exits = exit_stats_json(*v.exits);
    uint64_t vtotal = 0;
    for (auto it = exits.begin(); it != exits.end(); ++it) {
      uint64_t c = it.value()["count"].get<uint64_t>();
      vtotal += c;
      total_by_reason[it.key()] = total_by_reason.value(it.key(), uint64_t{0}) + c;
    }
    total += vtotal;
    uint64_t rr = v.exits->run_returns();
    run_returns += rr;
    vcpus.push_back({{"id", v.id},
                     {"exits_total", vtotal},
                     {"kvm_run_returns", rr},
                     {"exits", exits},
                     {"kvm", kvm_stats_json(v.kvm)}});
  }
  j["exits"] = {{"total", total}, {"kvm_run_returns", run_returns}, {"by_reason", total_by_reason}};
  j["vcpus"] = vcpus;

  nlohmann::json devices = nlohmann::json::array();
  for (const Bus* bus : {&pio_, &mmio_}) {
    for (const Bus::RangeStats& r : bus->range_stats()) {
      devices.push_back({{"name", r.device},
                         {"bus", bus->kind()},
                         {"base", hex(r.base)},
                         {"len", r.len},
                         {"reads", r.reads},
                         {"writes", r.writes},
                         {"time_ns", r.time_ns}});
    }
  }
  j["devices"] = devices;
  j["unclaimed"] = {{pio_.kind(), unclaimed_json(pio_.unclaimed())},
                    {mmio_.kind(), unclaimed_json(mmio_.unclaimed())}};

  j["device_counters"] =
      device_counters_json(devices_ ? devices_() : std::vector<DeviceCounters>{});
  j["kvm"] = {{"vm", kvm_stats_json(vm_kvm_)}};
  j["kernel_exits"] = kernel_ ? kernel_->json() : nlohmann::json{{"enabled", false}};

  if (auto p = read_process_cpu()) {
    j["process"] = {{"pid", p->tid},
                    {"user_ns", p->user_ns},
                    {"system_ns", p->system_ns},
                    {"guest_ns", p->guest_ns}};
  }
  nlohmann::json threads = nlohmann::json::array();
  if (auto t = read_thread_cpu()) {
    for (const ThreadCpu& c : *t) {
      threads.push_back({{"tid", c.tid},
                         {"name", c.name},
                         {"user_ns", c.user_ns},
                         {"system_ns", c.system_ns},
                         {"guest_ns", c.guest_ns},
                         {"cpus_allowed", c.cpus_allowed},
                         {"last_cpu", c.last_cpu}});
    }
    j["threads"] = threads;
  } else {
    j["threads"] = threads;
    j["threads_error"] = t.error().message();
  }
  return j;
}

std::string VmStats::metrics_text() const {
  return prometheus_text(stats_json());
}

}  // namespace tern
