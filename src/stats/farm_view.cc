#include "stats/farm_view.h"

#include <fmt/format.h>

#include <map>
#include <string>

#include "stats/json_fields.h"
#include "stats/number_text.h"
#include "stats/stats_table.h"

namespace tern {

namespace {

using Json = nlohmann::json;
using stats_json::u64;
using stats_text::human;

// A row's total in `c`, 0 when absent.
uint64_t get(const StatCounters& c, const std::string& section, const std::string& row) {
  auto s = c.find(section);
  if (s == c.end()) return 0;
  auto r = s->second.find(row);
  return r == s->second.end() ? 0 : r->second;
}

// Per-second rate of `now` over `before` (from 0 when it went backwards).
double rate(uint64_t before, uint64_t now, double interval) {
  if (interval <= 0) return 0;
  return static_cast<double>(now >= before ? now - before : now) / interval;
}

}  // namespace

std::string_view thread_class(std::string_view name) {
  if (name.size() > 4 && name.substr(0, 4) == "vcpu" && name[4] >= '0' && name[4] <= '9')
    return "vcpu";
  if (name.find('/') != std::string_view::npos || name.substr(0, 3) == "io-") return "io";
  return "control";
}

FarmRow farm_row(const Json& prev, const Json& cur) {
  FarmRow f;
  const uint64_t t0 = u64(prev, "timestamp_ns"), t1 = u64(cur, "timestamp_ns");
  f.interval_s = t1 > t0 ? static_cast<double>(t1 - t0) / 1e9 : 0.0;
  const double dt = f.interval_s;
  const StatCounters a = flatten_stats(prev), b = flatten_stats(cur);
  for (const auto& [reason, total] : b.at("exits")) {
    const double r = rate(get(a, "exits", reason), total, dt);
    f.exits += r;
    if (reason == "KVM_EXIT_IO") f.exits_pio += r;
    else if (reason == "KVM_EXIT_MMIO") f.exits_mmio += r;
    else if (reason == "KVM_EXIT_HLT") f.exits_hlt += r;
    else f.exits_other += r;
  }
  if (auto k = b.at("kvm_vcpu").find("exits"); k != b.at("kvm_vcpu").end())
    f.kernel_exits = rate(get(a, "kvm_vcpu", "exits"), k->second, dt);
  // cpu_ns rows: "<thread name>/<tid> user|system|guest"; guest time is part of user.
  for (const auto& [row, total] : b.at("cpu_ns")) {
    const size_t space = row.rfind(' ');
    const std::string kind = row.substr(space + 1);
    if (kind == "guest" || row.rfind("process ", 0) == 0) continue;
    const std::string thread = row.substr(0, row.rfind('/', space));
    const double pct = rate(get(a, "cpu_ns", row), total, dt) / 1e7;  // ns/s → % of one CPU
    const std::string_view cls = thread_class(thread);
    (cls == "vcpu" ? f.cpu_vcpu : cls == "io" ? f.cpu_io : f.cpu_control) += pct;
  }
  // virtio-net: the tap's own statistics when the device has them (the only traffic counters
  // with vhost-net; the tap's rx is the guest's TX), else its queues below.
  std::map<std::string, std::string> kind_of;
  for (const Json& d : cur.value("device_counters", Json::array())) {
    const std::string name = d.value("name", "?");
    kind_of[name] = d.value("kind", "");
    if (kind_of[name] != "virtio-net" || !d.value("counters", Json::object()).contains("tap_tx_bytes"))
      continue;
    kind_of[name] = "virtio-net (tap)";
    const std::string rx = name + " tap_tx_bytes", tx = name + " tap_rx_bytes";
    f.net_rx_bytes += rate(get(a, "device_counters", rx), get(b, "device_counters", rx), dt);
    f.net_tx_bytes += rate(get(a, "device_counters", tx), get(b, "device_counters", tx), dt);
  }
  // Queue bytes by the device's kind; virtio-net: receiveq even, transmitq odd (virtio 1.2
  // §5.1.2; the control queue moves no bytes).
  for (const auto& [row, total] : b.at("queues")) {
    const size_t slash = row.rfind("/q"), space = row.rfind(' ');
    if (slash == std::string::npos || space == std::string::npos || row.substr(space + 1) != "bytes")
      continue;
    const std::string kind = kind_of[row.substr(0, slash)];
    const double r = rate(get(a, "queues", row), total, dt);
    if (kind == "virtio-net") {
      const unsigned index = static_cast<unsigned>(std::stoul(row.substr(slash + 2, space - slash - 2)));
      (index % 2 == 0 ? f.net_rx_bytes : f.net_tx_bytes) += r;
    } else if (kind == "virtio-blk" || kind == "nvme") {
      f.disk_bytes += r;
    }
  }
  return f;
}

std::string render_farm(const std::vector<FarmLine>& lines) {
  std::string out = fmt::format("{:<16} {:>8} {:>7} {:>7} {:>7} {:>7} {:>8} {:>6} {:>6} {:>6} {:>9} {:>9} {:>9}\n",
                                "VM", "exits/s", "pio", "mmio", "hlt", "other", "kvm/s",
                                "%vcpu", "%io", "%ctl", "net rx/s", "net tx/s", "disk/s");
  for (const FarmLine& l : lines) {
    if (!l.row) {
      out += fmt::format("{:<16} error: {}\n", l.name, l.error);
      continue;
    }
    const FarmRow& r = *l.row;
    out += fmt::format(
        "{:<16} {:>8} {:>7} {:>7} {:>7} {:>7} {:>8} {:>6.1f} {:>6.1f} {:>6.1f} {:>9} {:>9} {:>9}\n",
        l.name, human(r.exits), human(r.exits_pio), human(r.exits_mmio), human(r.exits_hlt),
        human(r.exits_other), r.kernel_exits < 0 ? std::string("-") : human(r.kernel_exits),
        r.cpu_vcpu, r.cpu_io, r.cpu_control, human(r.net_rx_bytes) + "B", human(r.net_tx_bytes) + "B",
        human(r.disk_bytes) + "B");
  }
  return out;
}

Json farm_json(const std::vector<FarmLine>& lines) {
  Json out = Json::array();
  for (const FarmLine& l : lines) {
    if (!l.row) {
      out.push_back({{"name", l.name}, {"error", l.error}});
      continue;
    }
    const FarmRow& r = *l.row;
    Json j = {{"name", l.name},
              {"interval_s", r.interval_s},
              {"exits_per_s",
               {{"total", r.exits},
                {"KVM_EXIT_IO", r.exits_pio},
                {"KVM_EXIT_MMIO", r.exits_mmio},
                {"KVM_EXIT_HLT", r.exits_hlt},
                {"other", r.exits_other}}},
              {"cpu_percent", {{"vcpu", r.cpu_vcpu}, {"io", r.cpu_io}, {"control", r.cpu_control}}},
              {"net_rx_bytes_per_s", r.net_rx_bytes},
              {"net_tx_bytes_per_s", r.net_tx_bytes},
              {"disk_bytes_per_s", r.disk_bytes}};
    if (r.kernel_exits >= 0) j["kvm_exits_per_s"] = r.kernel_exits;
    out.push_back(std::move(j));
  }
  return out;
}

}  // namespace tern
