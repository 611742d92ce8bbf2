#include "stats/stats_table.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <vector>

#include "stats/json_fields.h"
#include "stats/kernel_exits_table.h"
#include "stats/number_text.h"

namespace tern {

namespace {

using Json = nlohmann::json;

using stats_json::u64;

void add_kvm_counters(std::map<std::string, uint64_t>& out, const Json& kvm) {
  auto it = kvm.find("counters");
  if (it == kvm.end() || !it->is_object()) return;
  for (auto c = it->begin(); c != it->end(); ++c)
    if (c->is_number_unsigned()) out[c.key()] += c->get<uint64_t>();
}

const char* section_title(const std::string& s) {
  if (s == "lifecycle") return "VM lifecycle";
  if (s == "exits") return "exits by reason (all vCPUs)";
  if (s == "vcpus") return "exits by vCPU";
  if (s == "devices") return "PIO/MMIO accesses by device";
  if (s == "device_time_ns") return "time in device handlers (% of one CPU)";
  if (s == "unclaimed") return "unclaimed accesses (bus address)";
  if (s == "queues") return "device queues";
  if (s == "device_counters") return "device counters";
  if (s == "kvm_vm") return "KVM in-kernel, VM";
  if (s == "kvm_vcpu") return "KVM in-kernel, all vCPUs";
  if (s == "cpu_ns") return "host CPU per tern thread (% of one CPU)";
  return "other";
}

bool is_time(const std::string& section) {
  return section == "cpu_ns" || section == "device_time_ns";
}

using stats_text::human;

// Display order of sections.
const std::vector<std::string>& section_order() {
  static const std::vector<std::string> order{
      "lifecycle", "exits",           "vcpus",  "devices",  "device_time_ns", "unclaimed",
      "queues",    "device_counters", "kvm_vm", "kvm_vcpu", "cpu_ns"};
  return order;
}

// The per-queue fields (QueueCountersSnapshot), in column order, and their column titles. The
// last kTuningFields (notification tuning: --disk coalesce_us= / poll_us=) are columns only when a
// queue shown has a non-zero one, so the table of an untuned VM keeps its width.
constexpr std::array<const char*, 9> kQueueFields{
    "kicks",  "requests", "interrupts",           "interrupts_suppressed", "bytes",
    "errors", "interrupts_coalesced", "poll_hits", "poll_ns"};
constexpr std::array<const char*, 9> kQueueColumns{
    "kicks",  "requests",  "interrupts", "suppressed", "bytes",
    "errors", "coalesced", "poll_hits",  "poll_ns"};
constexpr size_t kTuningFields = 3;

// One queue of the "queues" section: rows "<queue> <field>" regrouped into columns.
struct QueueRow {
  std::string queue;
  std::array<uint64_t, kQueueFields.size()> total{};
  std::array<double, kQueueFields.size()> per_s{};
  double cpu_ns_per_s = -1;  // the queue's worker thread(s), user + system; < 0: no such thread
};

// Adds to each queue the CPU rate of the threads named as the queue (QueueWorker names its
// thread "<device>/q<index>"; cpu_ns rows are "<thread name>/<tid> user|system|guest").
void add_queue_cpu(std::vector<QueueRow>& queues, const Json& cpu_section) {
  for (QueueRow& q : queues) {
    const std::string prefix = q.queue.substr(0, 15) + "/";
    for (auto row = cpu_section.begin(); row != cpu_section.end(); ++row) {
      const std::string& key = row.key();
      if (key.rfind(prefix, 0) != 0) continue;
      if (key.find(' ', prefix.size()) == std::string::npos) continue;
      if (key.ends_with(" guest")) continue;  // part of user time
      if (q.cpu_ns_per_s < 0) q.cpu_ns_per_s = 0;
      q.cpu_ns_per_s += row->value("per_s", 0.0);
    }
  }
}

// "cpu/req": host CPU per request of the queue's thread, in µs ("-" without a thread or
// requests in the interval).
std::string cpu_per_request(const QueueRow& q) {
  const double req = q.per_s[1];
  if (q.cpu_ns_per_s < 0 || req <= 0) return "-";
  return fmt::format("{:.1f}us", q.cpu_ns_per_s / req / 1e3);
}

// Queues of a compute_rates() "queues" section, in name order, skipping queues with no counts.
std::vector<QueueRow> queue_rows(const Json& section) {
  std::map<std::string, QueueRow> by_queue;
  for (auto row = section.begin(); row != section.end(); ++row) {
    const std::string& key = row.key();
    size_t space = key.rfind(' ');
    if (space == std::string::npos) continue;
    std::string field = key.substr(space + 1);
    for (size_t i = 0; i < kQueueFields.size(); ++i) {
      if (field != kQueueFields[i]) continue;
      QueueRow& q = by_queue[key.substr(0, space)];
      q.queue = key.substr(0, space);
      q.total[i] = u64(*row, "total");
      q.per_s[i] = row->value("per_s", 0.0);
    }
  }
  std::vector<QueueRow> out;
  for (auto& [name, q] : by_queue) {
    bool any = false;
    for (uint64_t t : q.total) any = any || t != 0;
    if (any) out.push_back(std::move(q));
  }
  return out;
}

// How many of kQueueFields the table shows: all when a queue has a non-zero tuning counter.
size_t queue_columns(const std::vector<QueueRow>& queues) {
  for (const QueueRow& q : queues)
    for (size_t i = kQueueFields.size() - kTuningFields; i < kQueueFields.size(); ++i)
      if (q.total[i] != 0) return kQueueFields.size();
  return kQueueFields.size() - kTuningFields;
}

std::string queue_header(const char* indent, const char* title, size_t columns,
                         bool cpu = false) {
  std::string out = fmt::format("{}{:<30}", indent, title);
  for (size_t i = 0; i < columns; ++i) out += fmt::format(" {:>10}", kQueueColumns[i]);
  if (cpu) out += fmt::format(" {:>10}", "cpu/req");
  return out + "\n";
}

// MMIO exits per request of each PCI function: its "mmio_reads" + "mmio_writes" device counters
// (guest BAR accesses that exited to tern) over the requests of all its queues. Inputs are a
// compute_rates() "device_counters" and "queues" section (or totals in that shape).
struct ExitRatio {
  std::string device;
  double total = 0;  // over the totals
  double now = -1;   // over the interval's rates; < 0: no requests in the interval
};
std::vector<ExitRatio> exits_per_request(const Json& counters, const Json& queues) {
  std::map<std::string, std::array<double, 4>> by_device;  // mmio total, per s; req total, per s
  for (auto row = counters.begin(); row != counters.end(); ++row) {
    const std::string& key = row.key();
    for (const char* suffix : {" mmio_reads", " mmio_writes"}) {
      if (!key.ends_with(suffix)) continue;
      auto& d = by_device[key.substr(0, key.size() - std::string_view(suffix).size())];
      d[0] += static_cast<double>(u64(*row, "total"));
      d[1] += row->value("per_s", 0.0);
    }
  }
  for (auto row = queues.begin(); row != queues.end(); ++row) {
    const std::string& key = row.key();
    size_t slash = key.rfind('/');
    if (slash == std::string::npos || !key.ends_with(" requests")) continue;
    auto it = by_device.find(key.substr(0, slash));
    if (it == by_device.end()) continue;
    it->second[2] += static_cast<double>(u64(*row, "total"));
    it->second[3] += row->value("per_s", 0.0);
  }
  std::vector<ExitRatio> out;
  for (const auto& [device, d] : by_device) {
    if (d[2] <= 0) continue;  // no requests yet (or a device without queues)
    out.push_back({device, d[0] / d[2], d[3] > 0 ? d[1] / d[3] : -1});
  }
  return out;
}

constexpr const char* kExitRatioTitle = "MMIO exits per request (guest BAR accesses / requests)";

}  // namespace

StatCounters flatten_stats(const Json& stats) {
  StatCounters c;
  for (const std::string& s : section_order()) c[s];
  // Guest resets restarted in place (--on-reboot restart; the control loop's count: the VM's
  // own counters below start again from zero at each reset, the VM being new).
  c["lifecycle"]["guest resets"] = u64(stats.value("lifecycle", Json::object()), "resets");
  const Json& exits = stats.value("exits", Json::object()).value("by_reason", Json::object());
  for (auto r = exits.begin(); r != exits.end(); ++r)
    if (r->is_number_unsigned()) c["exits"][r.key()] = r->get<uint64_t>();
  for (const Json& v : stats.value("vcpus", Json::array())) {
    c["vcpus"]["vcpu" + std::to_string(u64(v, "id"))] = u64(v, "exits_total");
    add_kvm_counters(c["kvm_vcpu"], v.value("kvm", Json::object()));
  }
  for (const Json& d : stats.value("devices", Json::array())) {
    std::string name = d.value("name", "?");
    c["devices"][name] += u64(d, "reads") + u64(d, "writes");
    c["device_time_ns"][name] += u64(d, "time_ns");
  }
  const Json& unclaimed = stats.value("unclaimed", Json::object());
  for (auto b = unclaimed.begin(); b != unclaimed.end(); ++b) {
    for (const Json& row : b->value("addresses", Json::array()))
      c["unclaimed"][b.key() + " " + row.value("addr", "?")] =
          u64(row, "reads") + u64(row, "writes");
    const Json& other = b->value("other", Json::object());
    if (u64(other, "reads") + u64(other, "writes") > 0)
      c["unclaimed"][b.key() + " other"] = u64(other, "reads") + u64(other, "writes");
  }
  for (const Json& d : stats.value("device_counters", Json::array())) {
    const std::string device = d.value("name", "?");
    for (const Json& q : d.value("queues", Json::array())) {
      const std::string queue = device + "/q" + std::to_string(u64(q, "index"));
      for (const char* field : kQueueFields) c["queues"][queue + " " + field] = u64(q, field);
    }
    const Json& counters = d.value("counters", Json::object());
    for (auto it = counters.begin(); it != counters.end(); ++it)
      c["device_counters"][device + " " + it.key()] = u64(counters, it.key().c_str());
  }
  add_kvm_counters(c["kvm_vm"], stats.value("kvm", Json::object()).value("vm", Json::object()));
  for (const Json& t : stats.value("threads", Json::array())) {
    std::string name = t.value("name", "?") + "/" + std::to_string(u64(t, "tid"));
    c["cpu_ns"][name + " user"] = u64(t, "user_ns");
    c["cpu_ns"][name + " system"] = u64(t, "system_ns");
    c["cpu_ns"][name + " guest"] = u64(t, "guest_ns");
  }
  // The whole process, exited threads included (what --stats-on-exit can still see).
  if (auto p = stats.find("process"); p != stats.end() && p->is_object()) {
    c["cpu_ns"]["process (all threads) user"] = u64(*p, "user_ns");
    c["cpu_ns"]["process (all threads) system"] = u64(*p, "system_ns");
    c["cpu_ns"]["process (all threads) guest"] = u64(*p, "guest_ns");
  }
  return c;
}

Json compute_rates(const Json& prev, const Json& cur, bool kernel_exits) {
  const uint64_t t0 = u64(prev, "timestamp_ns"), t1 = u64(cur, "timestamp_ns");
  const double interval = t1 > t0 ? static_cast<double>(t1 - t0) / 1e9 : 0.0;
  StatCounters a = flatten_stats(prev), b = flatten_stats(cur);
  Json rates = Json::object();
  for (const auto& [section, rows] : b) {
    Json s = Json::object();
    for (const auto& [name, total] : rows) {
      uint64_t before = 0;
      if (auto it = a[section].find(name); it != a[section].end()) before = it->second;
      uint64_t delta = total >= before ? total - before : total;
      double per_s = interval > 0 ? static_cast<double>(delta) / interval : 0.0;
      s[name] = {{"total", total}, {"per_s", per_s}};
    }
    rates[section] = s;
  }
  Json errors = Json::array();
  auto note = [&](const Json& kvm, const std::string& who) {
    if (kvm.is_object() && kvm.contains("error"))
      errors.push_back(who + ": " + kvm["error"].get<std::string>());
  };
  note(cur.value("kvm", Json::object()).value("vm", Json::object()), "VM");
  for (const Json& v : cur.value("vcpus", Json::array()))
    note(v.value("kvm", Json::object()), "vCPU " + std::to_string(u64(v, "id")));
  Json out = {{"interval_s", interval}, {"rates", rates}, {"errors", errors}};
  // Where each thread may run and last ran (--cpu-affinity), as of `cur`.
  Json placement = Json::array();
  for (const Json& t : cur.value("threads", Json::array()))
    if (t.is_object() && t.contains("cpus_allowed"))
      placement.push_back({{"thread", t.value("name", "?") + "/" + std::to_string(u64(t, "tid"))},
                           {"cpus_allowed", t.value("cpus_allowed", "")},
                           {"last_cpu", t.value("last_cpu", -1)}});
  out["threads"] = placement;
  if (kernel_exits) out["kernel_exits"] = kernel_exit_rates(prev, cur);
  return out;
}

std::string render_rates_table(const Json& r, size_t max_rows) {
  std::string out = fmt::format("tern stat — rates over {:.2f} s\n", r.value("interval_s", 0.0));
  const Json& rates = r.value("rates", Json::object());
  for (const std::string& section : section_order()) {
    auto it = rates.find(section);
    if (it == rates.end()) continue;
    if (section == "queues") {
      std::vector<QueueRow> queues = queue_rows(*it);
      if (queues.empty()) continue;
      add_queue_cpu(queues, rates.value("cpu_ns", Json::object()));
      const size_t columns = queue_columns(queues);
      out += "\n" + queue_header("", section_title(section), columns, true);
      size_t shown = 0;
      for (const QueueRow& q : queues) {
        if (max_rows && shown++ == max_rows) {
          out += fmt::format("  ... {} more\n", queues.size() - max_rows);
          break;
        }
        std::string rate = fmt::format("  {:<28}", q.queue + " per s");
        std::string total = fmt::format("  {:<28}", q.queue + " total");
        for (size_t i = 0; i < columns; ++i) {
          rate += fmt::format(" {:>10}", human(q.per_s[i]));
          total += fmt::format(" {:>10}", human(static_cast<double>(q.total[i])));
        }
        rate += fmt::format(" {:>10}", cpu_per_request(q));
        out += rate + "\n" + total + "\n";
      }
      continue;
    }
    struct Row {
      std::string name;
      uint64_t total;
      double per_s;
    };
    std::vector<Row> rows;
    for (auto row = it->begin(); row != it->end(); ++row) {
      uint64_t total = u64(*row, "total");
      if (total == 0) continue;
      rows.push_back({row.key(), total, row->value("per_s", 0.0)});
    }
    if (rows.empty()) continue;
    std::stable_sort(rows.begin(), rows.end(), [](const Row& x, const Row& y) {
      return x.per_s != y.per_s ? x.per_s > y.per_s : x.total > y.total;
    });
    const bool time = is_time(section);
    out += fmt::format("\n{:<44} {:>12} {:>12}\n", section_title(section),
                       time ? "total s" : "total", time ? "%cpu" : "per s");
    size_t shown = 0;
    for (const Row& row : rows) {
      if (max_rows && shown++ == max_rows) {
        out += fmt::format("  ... {} more\n", rows.size() - max_rows);
        break;
      }
      if (time) {
        out += fmt::format("  {:<42} {:>12.2f} {:>11.1f}%\n", row.name,
                           static_cast<double>(row.total) / 1e9, row.per_s / 1e7);
      } else {
        out += fmt::format("  {:<42} {:>12} {:>12}\n", row.name,
                           human(static_cast<double>(row.total)), human(row.per_s));
      }
    }
  }
  if (const Json& threads = r.value("threads", Json::array()); !threads.empty()) {
    out += fmt::format("\n{:<44} {:>12} {:>12}\n", "where threads run (--cpu-affinity)", "allowed",
                       "last CPU");
    for (const Json& t : threads)
      out += fmt::format("  {:<42} {:>12} {:>12}\n", t.value("thread", "?"),
                         t.value("cpus_allowed", "?"), t.value("last_cpu", -1));
  }
  std::vector<ExitRatio> ratios = exits_per_request(rates.value("device_counters", Json::object()),
                                                    rates.value("queues", Json::object()));
  if (!ratios.empty()) {
    out += fmt::format("\n{:<44} {:>12} {:>12}\n", kExitRatioTitle, "total", "now");
    for (const ExitRatio& e : ratios)
      out += fmt::format("  {:<42} {:>12.2f} {:>12}\n", e.device, e.total,
                         e.now < 0 ? std::string("-") : fmt::format("{:.2f}", e.now));
  }
  if (auto k = r.find("kernel_exits"); k != r.end()) out += render_kernel_exit_rates(*k, max_rows);
  for (const Json& e : r.value("errors", Json::array()))
    out += "\nnote: " + e.get<std::string>() + "\n";
  return out;
}

std::string render_summary(const Json& stats) {
  StatCounters c = flatten_stats(stats);
  std::string out = "tern: statistics at exit\n";
  for (const std::string& section : section_order()) {
    if (section == "queues") {
      Json totals = Json::object();
      for (const auto& [name, total] : c[section]) totals[name] = {{"total", total}};
      std::vector<QueueRow> queues = queue_rows(totals);
      if (queues.empty()) continue;
      const size_t columns = queue_columns(queues);
      out += queue_header("  ", section_title(section), columns);
      for (const QueueRow& q : queues) {
        std::string line = fmt::format("    {:<28}", q.queue);
        for (size_t i = 0; i < columns; ++i) line += fmt::format(" {:>10}", q.total[i]);
        out += line + "\n";
      }
      continue;
    }
    std::vector<std::pair<std::string, uint64_t>> rows;
    for (const auto& [name, total] : c[section])
      if (total) rows.emplace_back(name, total);
    if (rows.empty()) continue;
    std::stable_sort(rows.begin(), rows.end(),
                     [](auto& x, auto& y) { return x.second > y.second; });
    const bool time = is_time(section);
    out += fmt::format("  {}\n", section_title(section));
    size_t shown = 0;
    for (const auto& [name, total] : rows) {
      if (shown++ == 12) {
        out += fmt::format("    ... {} more\n", rows.size() - 12);
        break;
      }
      if (time)
        out += fmt::format("    {:<42} {:>12.3f} s\n", name, static_cast<double>(total) / 1e9);
      else
        out += fmt::format("    {:<42} {:>12}\n", name, total);
    }
  }
  {
    Json counters = Json::object(), queues = Json::object();
    for (const auto& [name, total] : c["device_counters"]) counters[name] = {{"total", total}};
    for (const auto& [name, total] : c["queues"]) queues[name] = {{"total", total}};
    std::vector<ExitRatio> ratios = exits_per_request(counters, queues);
    if (!ratios.empty()) {
      out += fmt::format("  {}\n", kExitRatioTitle);
      for (const ExitRatio& e : ratios)
        out += fmt::format("    {:<42} {:>12.2f}\n", e.device, e.total);
    }
  }
  // Exit handling latency per reason, summed over vCPUs: count, mean and max (ns).
  std::map<std::string, std::array<uint64_t, 3>> lat;  // count, sum, max
  for (const Json& v : stats.value("vcpus", Json::array())) {
    const Json& exits = v.value("exits", Json::object());
    for (auto e = exits.begin(); e != exits.end(); ++e) {
      auto& l = lat[e.key()];
      l[0] += u64(*e, "count");
      l[1] += u64(*e, "sum_ns");
      l[2] = std::max(l[2], u64(*e, "max_ns"));
    }
  }
  if (!lat.empty()) {
    out += fmt::format("  {:<44} {:>12} {:>12} {:>12}\n", "exit handling in tern (ns)", "count",
                       "mean", "max");
    for (const auto& [reason, l] : lat)
      out += fmt::format("    {:<42} {:>12} {:>12} {:>12}\n", reason, l[0], l[0] ? l[1] / l[0] : 0,
                         l[2]);
  }
  if (auto k = stats.find("kernel_exits"); k != stats.end()) out += render_kernel_exit_summary(*k);
  return out;
}

}  // namespace tern
