#include "stats/prometheus.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <vector>

#include "stats/json_fields.h"

namespace tern {

namespace {

using Json = nlohmann::json;
using Labels = std::vector<std::pair<std::string, std::string>>;

std::string escape(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

std::string label_text(const Labels& labels) {
  if (labels.empty()) return {};
  std::string out = "{";
  for (size_t i = 0; i < labels.size(); ++i) {
    if (i) out += ',';
    out += labels[i].first + "=\"" + escape(labels[i].second) + "\"";
  }
  return out + "}";
}

using stats_json::u64;

// Metric families in first-use order, each with its HELP/TYPE header once.
class Families {
 public:
  void add(const std::string& name, const char* type, const char* help, const std::string& sample) {
    auto it = index_.find(name);
    if (it == index_.end()) {
      index_[name] = families_.size();
      families_.push_back(
          {fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type), {}});
      it = index_.find(name);
    }
    families_[it->second].second += sample;
  }
  void sample(const std::string& name, const char* type, const char* help, const Labels& labels,
              uint64_t value, const std::string& suffix = {}) {
    add(name, type, help, fmt::format("{}{}{} {}\n", name, suffix, label_text(labels), value));
  }
  void sample_signed(const std::string& name, const char* type, const char* help,
                     const Labels& labels, int64_t value) {
    add(name, type, help, fmt::format("{}{} {}\n", name, label_text(labels), value));
  }
  std::string text() const {
    std::string out;
    for (const auto& f : families_) out += f.first + f.second;
    return out;
  }

 private:
  std::map<std::string, size_t> index_;
  std::vector<std::pair<std::string, std::string>> families_;
};

void kvm_metrics(Families& f, const Json& kvm, const std::string& prefix, const Labels& base) {
  if (!kvm.is_object() || kvm.contains("error")) return;
  if (auto it = kvm.find("counters"); it != kvm.end())
    for (auto c = it->begin(); c != it->end(); ++c)
      f.sample(prefix + prometheus_name(c.key()) + "_total", "counter",
               "KVM in-kernel statistic (binary stats fd, cumulative)", base, c->get<uint64_t>());
  if (auto it = kvm.find("gauges"); it != kvm.end())
    for (auto g = it->begin(); g != it->end(); ++g)
      f.sample(prefix + prometheus_name(g.key()), "gauge",
               "KVM in-kernel statistic (binary stats fd, instant or peak)", base,
               g->get<uint64_t>());
}

// Per queue: one counter family per QueueCountersSnapshot field; device-wide named counters: one
// family per name (different meanings never share a metric name).
void device_counter_metrics(Families& f, const Json& devices) {
  static constexpr std::pair<const char*, const char*> kQueueFields[] = {
      {"kicks", "Driver notifications (ioeventfd signals) of the queue"},
      {"requests", "Descriptor chains the device took from the queue's available ring"},
      {"interrupts", "Used-buffer notifications the device sent for the queue"},
      {"interrupts_suppressed",
       "Used-ring publishes the driver asked not to be notified of (EVENT_IDX, NO_INTERRUPT)"},
      {"interrupts_coalesced",
       "Used-buffer notifications folded into one already held (--disk coalesce_us)"},
      {"poll_hits", "Idle polls of the available ring that found new entries (--disk poll_us)"},
      {"poll_ns", "Nanoseconds the queue's worker spent polling its available ring"},
      {"bytes", "Payload bytes the queue's requests moved"},
      {"errors", "Requests of the queue completed with an error status or returned malformed"},
  };
  for (const Json& d : devices) {
    const std::string device = d.value("name", ""), kind = d.value("kind", "");
    for (const Json& q : d.value("queues", Json::array())) {
      Labels l{{"device", device}, {"kind", kind}, {"queue", std::to_string(u64(q, "index"))}};
      for (const auto& [field, help] : kQueueFields)
        f.sample(std::string("tern_device_queue_") + field + "_total", "counter", help, l,
                 u64(q, field));
    }
    const Json& counters = d.value("counters", Json::object());
    for (auto c = counters.begin(); c != counters.end(); ++c) {
      f.sample("tern_device_counter_" + prometheus_name(c.key()) + "_total", "counter",
               "Device-wide counter reported by the device (docs/stats.md)",
               {{"device", device}, {"kind", kind}}, u64(counters, c.key().c_str()));
    }
  }
}

// In-kernel exit accounting ("kernel_exits", docs/stats.md "In-kernel exits"): tern_kernel_*.
void kernel_exit_metrics(Families& f, const Json& k) {
  if (!k.is_object()) return;
  const bool on = k.value("enabled", false) && !k.contains("error");
  f.sample("tern_kernel_exits_enabled", "gauge",
           "1 while in-kernel exit accounting (eBPF on KVM's tracepoints) runs and reads", {},
           on ? 1 : 0);
  if (!on) return;
  for (const Json& r : k.value("reasons", Json::array())) {
    Labels l{{"isa", r.value("isa", "")},
             {"reason", r.value("reason", "")},
             {"code", std::to_string(u64(r, "code"))}};
    f.sample("tern_kernel_exits_total", "counter",
             "VM exits of tern's vCPUs by hardware exit reason (kvm:kvm_exit), since accounting "
             "started",
             l, u64(r, "count"));
    f.sample("tern_kernel_exit_time_ns_total", "counter",
             "Time from kvm_exit to the next kvm_entry on the same vCPU, ns, by exit reason", l,
             u64(r, "time_ns"));
  }
  if (k.contains("kvm_exits")) {
    f.sample("tern_kernel_exits_kvm_total", "counter",
             "KVM's own exits counter (binary stats, all vCPUs) since accounting started", {},
             u64(k, "kvm_exits"));
    f.sample_signed("tern_kernel_exits_difference", "gauge",
                    "Sum over exit reasons minus KVM's exits counter (bound: "
                    "tern_kernel_exits_edge + tern_kernel_exits_vcpus)",
                    {}, k.value("difference", int64_t{0}));
    f.sample("tern_kernel_exits_edge", "gauge",
             "KVM exits between the two KVM readings around the map reads of this scrape", {},
             u64(k, "kvm_exits_edge") + u64(k, "kvm_exits_start_edge"));
  }
  f.sample("tern_kernel_exits_vcpus", "gauge", "vCPUs whose exits are accounted", {},
           u64(k, "vcpus"));
  f.sample("tern_kernel_exits_userspace_total", "counter",
           "Exits that reached tern (KVM_RUN returns) since accounting started", {},
           u64(k, "userspace_exits"));
  for (const Json& m : k.value("msrs", Json::array()))
    f.sample("tern_kernel_msr_accesses_total", "counter",
             "MSR accesses KVM handled or forwarded (kvm:kvm_msr), by MSR and access",
             {{"msr", m.value("msr", "")},
              {"name", m.value("name", "")},
              {"access", m.value("access", "")}},
             u64(m, "count"));
  for (const Json& p : k.value("pio", Json::array())) {
    Labels l{{"port", p.value("port", "")}, {"dir", p.value("dir", "")}};
    if (p.contains("device")) l.emplace_back("device", p.value("device", ""));
    f.sample("tern_kernel_pio_total", "counter",
             "Port I/O seen by KVM (kvm:kvm_pio: in-kernel and userspace), by port and direction",
             l, u64(p, "count"));
  }
  for (const Json& p : k.value("pio_in_kernel", Json::array())) {
    Labels l{{"port", p.value("port", "")}, {"dir", p.value("dir", "")}};
    if (p.contains("device")) l.emplace_back("device", p.value("device", ""));
    f.sample("tern_kernel_pio_in_kernel_total", "counter",
             "Port I/O served in the kernel: kvm_pio minus the PIO exits that reached tern", l,
             u64(p, "in_kernel"));
  }
  for (const Json& n : k.value("npf", Json::array())) {
    Labels l{{"kind", n.value("kind", "")}};
    if (n.contains("gpa")) {
      l.emplace_back("gpa", n.value("gpa", ""));
      l.emplace_back("device", n.value("device", ""));
    }
    f.sample("tern_kernel_npf_total", "counter",
             "Nested page faults (NPF / EPT violation, misconfig) by kind and MMIO page", l,
             u64(n, "count"));
  }
  for (const Json& i : k.value("injected_irqs", Json::array()))
    f.sample("tern_kernel_injected_irqs_total", "counter",
             "Interrupts KVM injected (kvm:kvm_inj_virq), by vector",
             {{"vector", std::to_string(u64(i, "vector"))}}, u64(i, "count"));
  f.sample("tern_kernel_dropped_total", "counter",
           "Breakdown rows a full kernel map could not record (their exits are still counted)", {},
           u64(k, "dropped"));
}

}  // namespace

std::string prometheus_name(const std::string& s) {
  std::string out = s;
  for (char& c : out)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_'))
      c = '_';
  return out;
}

std::string prometheus_text(const Json& stats) {
  Families f;
  for (const Json& v : stats.value("vcpus", Json::array())) {
    const std::string vcpu = std::to_string(u64(v, "id"));
    f.sample("tern_vcpu_kvm_run_returns_total", "counter",
             "Returns of KVM_RUN to tern (all userspace exits)", {{"vcpu", vcpu}},
             u64(v, "kvm_run_returns"));
    const Json& exits = v.value("exits", Json::object());
    for (auto r = exits.begin(); r != exits.end(); ++r) {
      const char* name = "tern_vcpu_exit_handling_ns";
      const char* help =
          "Time from KVM_RUN's return to the end of handling the exit, ns, by reason";
      Labels labels{{"vcpu", vcpu}, {"reason", r.key()}};
      // Cumulative buckets up to the highest non-empty finite one, then +Inf.
      uint64_t cumulative = 0;
      std::map<uint64_t, uint64_t> finite;
      uint64_t overflow = 0;
      for (const Json& b : r->value("buckets", Json::array())) {
        if (b[0].is_string())
          overflow += b[1].get<uint64_t>();
        else
          finite[b[0].get<uint64_t>()] += b[1].get<uint64_t>();
      }
      uint64_t top = finite.empty() ? 1 : finite.rbegin()->first;
      for (uint64_t le = 1; le <= top && le != 0; le <<= 1) {
        auto it = finite.find(le);
        if (it != finite.end()) cumulative += it->second;
        Labels l = labels;
        l.emplace_back("le", std::to_string(le));
        f.sample(name, "histogram", help, l, cumulative, "_bucket");
      }
      Labels inf = labels;
      inf.emplace_back("le", "+Inf");
      f.sample(name, "histogram", help, inf, cumulative + overflow, "_bucket");
      f.sample(name, "histogram", help, labels, u64(*r, "sum_ns"), "_sum");
      f.sample(name, "histogram", help, labels, u64(*r, "count"), "_count");
    }
    kvm_metrics(f, v.value("kvm", Json::object()), "tern_kvm_vcpu_", {{"vcpu", vcpu}});
  }
  for (const Json& d : stats.value("devices", Json::array())) {
    Labels l{{"device", d.value("name", "")},
             {"bus", d.value("bus", "")},
             {"base", d.value("base", "")}};
    Labels r = l, w = l;
    r.emplace_back("op", "read");
    w.emplace_back("op", "write");
    const char* help = "Guest PIO/MMIO accesses dispatched to the device";
    f.sample("tern_device_accesses_total", "counter", help, r, u64(d, "reads"));
    f.sample("tern_device_accesses_total", "counter", help, w, u64(d, "writes"));
    f.sample("tern_device_time_ns_total", "counter",
             "Time spent inside the device's read/write handlers, ns", l, u64(d, "time_ns"));
  }
  const Json& unclaimed = stats.value("unclaimed", Json::object());
  for (auto b = unclaimed.begin(); b != unclaimed.end(); ++b) {
    const char* help = "Guest PIO/MMIO accesses that no device claimed, by port/address";
    auto emit = [&](const std::string& addr, const Json& row) {
      f.sample("tern_unclaimed_accesses_total", "counter", help,
               {{"device", "unclaimed"}, {"bus", b.key()}, {"addr", addr}, {"op", "read"}},
               u64(row, "reads"));
      f.sample("tern_unclaimed_accesses_total", "counter", help,
               {{"device", "unclaimed"}, {"bus", b.key()}, {"addr", addr}, {"op", "write"}},
               u64(row, "writes"));
    };
    for (const Json& row : b->value("addresses", Json::array())) emit(row.value("addr", ""), row);
    emit("other", b->value("other", Json::object()));
  }
  device_counter_metrics(f, stats.value("device_counters", Json::array()));
  kvm_metrics(f, stats.value("kvm", Json::object()).value("vm", Json::object()), "tern_kvm_vm_",
              {});
  for (const Json& t : stats.value("threads", Json::array())) {
    const std::string tid = std::to_string(u64(t, "tid")), name = t.value("name", "");
    const char* help = "Host CPU time of a tern thread, ns (guest is part of user)";
    for (const char* mode : {"user", "system", "guest"}) {
      f.sample("tern_thread_cpu_ns_total", "counter", help,
               {{"thread", name}, {"tid", tid}, {"mode", mode}},
               u64(t, (std::string(mode) + "_ns").c_str()));
    }
  }
  if (auto k = stats.find("kernel_exits"); k != stats.end()) kernel_exit_metrics(f, *k);
  if (auto p = stats.find("process"); p != stats.end() && p->is_object()) {
    for (const char* mode : {"user", "system", "guest"}) {
      f.sample("tern_process_cpu_ns_total", "counter",
               "Host CPU time of the whole tern process (exited threads included), ns",
               {{"mode", mode}}, u64(*p, (std::string(mode) + "_ns").c_str()));
    }
  }
  return f.text();
}

}  // namespace tern
