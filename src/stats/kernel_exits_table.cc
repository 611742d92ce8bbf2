#include "stats/kernel_exits_table.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <limits>
#include <map>
#include <vector>

#include "stats/json_fields.h"
#include "stats/number_text.h"

namespace tern {

namespace {

using Json = nlohmann::json;
using Rows = std::map<std::string, uint64_t>;

using stats_json::u64;

// A signed integer field; 0 when absent or not an integer, an unsigned value above INT64_MAX
// clamped to it (it used to wrap: 2^64 - 1 read as -1).
int64_t i64(const Json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number_integer()) return 0;
  if (it->is_number_unsigned())
    return static_cast<int64_t>(
        std::min<uint64_t>(it->get<uint64_t>(), std::numeric_limits<int64_t>::max()));
  return it->get<int64_t>();
}

// |d| without the signed overflow of -INT64_MIN.
uint64_t magnitude(int64_t d) {
  return d < 0 ? uint64_t{0} - static_cast<uint64_t>(d) : static_cast<uint64_t>(d);
}

// A boolean field; false when absent or not a boolean ("enabled": "yes" or 1 from another server
// used to throw nlohmann's type_error out of tern stat).
bool flag(const Json& j, const char* key) {
  if (!j.is_object()) return false;
  auto it = j.find(key);
  return it != j.end() && it->is_boolean() && it->get<bool>();
}

std::string str(const Json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

using stats_text::human;

std::string ns_text(double ns) {
  if (ns < 0) return "-";
  if (ns >= 1e6) return fmt::format("{:.2f}ms", ns / 1e6);
  if (ns >= 1e3) return fmt::format("{:.1f}us", ns / 1e3);
  return fmt::format("{:.0f}ns", ns);
}

// The tables of the section, in display order, and their titles.
constexpr std::array<std::pair<const char*, const char*>, 5> kTables{{
    {"reasons", "in-kernel exits by reason (all vCPUs)"},
    {"msrs", "in-kernel MSR accesses"},
    {"pio_in_kernel", "in-kernel PIO (kvm_pio minus exits to tern)"},
    {"npf", "in-kernel NPF by kind (MMIO: page, device)"},
    {"injected_irqs", "in-kernel injected interrupts"},
}};

struct Flat {
  std::map<std::string, Rows> sections;
  Rows reason_time_ns;
};

std::string pio_row_name(const Json& p) {
  std::string name = str(p, "port") + " " + str(p, "dir");
  if (p.contains("device")) name += " " + str(p, "device");
  return name;
}

Flat flatten(const Json& k) {
  Flat f;
  for (const auto& t : kTables) f.sections[t.first];
  f.sections["userspace"];
  if (!k.is_object() || !flag(k, "enabled") || k.contains("error")) return f;
  for (const Json& r : k.value("reasons", Json::array())) {
    std::string name = str(r, "reason");
    f.sections["reasons"][name] += u64(r, "count");
    f.reason_time_ns[name] += u64(r, "time_ns");
  }
  for (const Json& m : k.value("msrs", Json::array())) {
    std::string name = str(m, "msr");
    if (!str(m, "name").empty()) name += " " + str(m, "name");
    f.sections["msrs"][name + " " + str(m, "access")] += u64(m, "count");
  }
  for (const Json& p : k.value("pio_in_kernel", Json::array()))
    f.sections["pio_in_kernel"][pio_row_name(p)] += u64(p, "in_kernel");
  for (const Json& n : k.value("npf", Json::array())) {
    std::string name = str(n, "kind");
    if (n.contains("gpa")) name += " " + str(n, "gpa") + " " + str(n, "device");
    f.sections["npf"][name] += u64(n, "count");
  }
  for (const Json& i : k.value("injected_irqs", Json::array()))
    f.sections["injected_irqs"]["vector " + std::to_string(u64(i, "vector"))] += u64(i, "count");
  f.sections["userspace"]["reached userspace"] = u64(k, "userspace_exits");
  return f;
}

const Json& kernel_of(const Json& stats) {
  static const Json kOff = {{"enabled", false}};
  auto it = stats.find("kernel_exits");
  return it != stats.end() && it->is_object() ? *it : kOff;
}

bool usable(const Json& k) {
  return flag(k, "enabled") && !k.contains("error");
}

uint64_t bound_of(const Json& k) {
  return u64(k, "kvm_exits_edge") + u64(k, "kvm_exits_start_edge") + u64(k, "vcpus");
}

struct Row {
  std::string name;
  uint64_t total;
  double per_s;
  double mean_ns;
};

// Rows of one rates section with a non-zero total, by rate then total.
std::vector<Row> sorted_rows(const Json& section) {
  std::vector<Row> rows;
  for (auto it = section.begin(); it != section.end(); ++it) {
    uint64_t total = u64(*it, "total");
    if (total == 0) continue;
    rows.push_back({it.key(), total, it->value("per_s", 0.0), it->value("mean_ns", -1.0)});
  }
  std::stable_sort(rows.begin(), rows.end(), [](const Row& x, const Row& y) {
    return x.per_s != y.per_s ? x.per_s > y.per_s : x.total > y.total;
  });
  return rows;
}

// A field as text: the string itself, else its JSON ("" when absent).
std::string text(const Json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end()) return {};
  return it->is_string() ? it->get<std::string>()
                         : it->dump(-1, ' ', false, Json::error_handler_t::replace);
}

std::string unavailable_line(const Json& k) {
  if (k.contains("error")) return "in-kernel exits: unavailable: " + text(k, "error") + "\n";
  return "in-kernel exits: off\n";
}

}  // namespace

Json kernel_exit_rates(const Json& prev, const Json& cur) {
  const Json& kc = kernel_of(cur);
  if (!usable(kc)) {
    Json j = {{"enabled", false}};
    if (kc.contains("error")) j["error"] = kc["error"];
    return j;
  }
  const Json& kp = kernel_of(prev);
  const uint64_t since = u64(kc, "since_ns");
  const bool same = usable(kp) && u64(kp, "since_ns") == since;
  uint64_t t0 = u64(prev, "timestamp_ns");
  const uint64_t t1 = u64(cur, "timestamp_ns");
  if (!same) t0 = std::max(t0, since);  // started within the interval: count from its start
  const double interval = t1 > t0 ? static_cast<double>(t1 - t0) / 1e9 : 0.0;
  Flat a = same ? flatten(kp) : Flat{}, b = flatten(kc);

  Json rates = Json::object();
  for (const auto& [section, rows] : b.sections) {
    Json s = Json::object();
    for (const auto& [name, total] : rows) {
      uint64_t before = 0;
      if (auto it = a.sections[section].find(name); it != a.sections[section].end())
        before = it->second;
      const uint64_t delta = total >= before ? total - before : total;
      Json row = {{"total", total},
                  {"per_s", interval > 0 ? static_cast<double>(delta) / interval : 0.0}};
      if (section == "reasons") {
        const uint64_t tn = b.reason_time_ns[name], tb = a.reason_time_ns[name];
        const uint64_t dt = tn >= tb ? tn - tb : tn;
        row["time_ns"] = tn;
        row["mean_ns"] = delta ? static_cast<double>(dt) / static_cast<double>(delta) : -1.0;
      }
      s[name] = std::move(row);
    }
    rates[section] = std::move(s);
  }
  Json j = {{"enabled", true},
            {"interval_s", interval},
            {"since_ns", since},
            {"total", u64(kc, "total")},
            {"vcpus", u64(kc, "vcpus")},
            {"userspace_exits", u64(kc, "userspace_exits")},
            {"dropped", u64(kc, "dropped")}};
  if (kc.contains("kvm_exits")) {
    j["kvm_exits"] = u64(kc, "kvm_exits");
    j["kvm_exits_edge"] = u64(kc, "kvm_exits_edge");
    j["kvm_exits_start_edge"] = u64(kc, "kvm_exits_start_edge");
    j["difference"] = i64(kc, "difference");
    j["bound"] = bound_of(kc);
    j["within_bound"] = magnitude(i64(kc, "difference")) <= bound_of(kc);
  } else if (kc.contains("kvm_exits_error")) {
    j["kvm_exits_error"] = kc["kvm_exits_error"];
  }
  j["rates"] = std::move(rates);
  return j;
}

std::string reconciliation_line(const Json& k) {
  if (!k.contains("kvm_exits"))
    return fmt::format("sum {} (KVM exits: {})", u64(k, "total"),
                       k.contains("kvm_exits_error") ? text(k, "kvm_exits_error") : "not read");
  const int64_t d = i64(k, "difference");
  const uint64_t bound = bound_of(k), start_edge = u64(k, "kvm_exits_start_edge");
  const bool within = magnitude(d) <= bound;
  std::string why = "exits between the two samples";
  if (start_edge) why += fmt::format(", {} while it started,", start_edge);
  why += " + 1 in flight per vCPU";
  return fmt::format("sum {} {} KVM exits {} (difference {}, {}bound ±{}: {})", u64(k, "total"),
                     within ? "=" : "≠", u64(k, "kvm_exits"), d, within ? "" : "outside the ",
                     bound, why);
}

std::string render_kernel_exit_rates(const Json& r, size_t max_rows) {
  if (!flag(r, "enabled")) return "\n" + unavailable_line(r);
  const Json& rates = r.value("rates", Json::object());
  std::string out;
  for (const auto& [section, title] : kTables) {
    std::vector<Row> rows = sorted_rows(rates.value(section, Json::object()));
    const bool reasons = std::string_view(section) == "reasons";
    if (rows.empty() && !reasons) continue;
    out += fmt::format("\n{:<44} {:>12} {:>12}{}\n", title, "total", "per s",
                       reasons ? fmt::format(" {:>10}", "mean time") : "");
    size_t shown = 0;
    for (const Row& row : rows) {
      if (max_rows && shown++ == max_rows) {
        out += fmt::format("  ... {} more\n", rows.size() - max_rows);
        break;
      }
      out += fmt::format("  {:<42} {:>12} {:>12}{}\n", row.name,
                         human(static_cast<double>(row.total)), human(row.per_s),
                         reasons ? fmt::format(" {:>10}", ns_text(row.mean_ns)) : "");
    }
    if (reasons) {
      out += "  " + reconciliation_line(r) + "\n";
      const Json& u =
          rates.value("userspace", Json::object()).value("reached userspace", Json::object());
      const uint64_t total = u64(r, "total"), user = u64(u, "total");
      out +=
          fmt::format("  reached userspace: {} of {} ({:.1f}%), {}/s\n", user, total,
                      total ? 100.0 * static_cast<double>(user) / static_cast<double>(total) : 0.0,
                      human(u.value("per_s", 0.0)));
    }
  }
  if (u64(r, "dropped"))
    out += fmt::format(
        "\nnote: in-kernel exits: {} breakdown rows dropped (a kernel map was full; "
        "their exits are still counted)\n",
        u64(r, "dropped"));
  return out;
}

std::string render_kernel_exit_summary(const Json& k) {
  if (!k.is_object()) return {};
  if (!usable(k)) return k.contains("error") ? "  " + unavailable_line(k) : std::string();
  Flat f = flatten(k);
  std::string out;
  for (const auto& [section, title] : kTables) {
    std::vector<std::pair<std::string, uint64_t>> rows;
    for (const auto& [name, total] : f.sections[section])
      if (total) rows.emplace_back(name, total);
    const bool reasons = std::string_view(section) == "reasons";
    if (rows.empty() && !reasons) continue;
    std::stable_sort(rows.begin(), rows.end(),
                     [](auto& x, auto& y) { return x.second > y.second; });
    out += fmt::format("  {:<44} {:>12}{}\n", title, "count",
                       reasons ? fmt::format(" {:>12}", "mean time") : "");
    size_t shown = 0;
    for (const auto& [name, total] : rows) {
      if (shown++ == 12) {
        out += fmt::format("    ... {} more\n", rows.size() - 12);
        break;
      }
      out += fmt::format(
          "    {:<42} {:>12}{}\n", name, total,
          reasons ? fmt::format(" {:>12}", ns_text(static_cast<double>(f.reason_time_ns[name]) /
                                                   static_cast<double>(total)))
                  : "");
    }
    if (reasons) {
      out += "    " + reconciliation_line(k) + "\n";
      out += fmt::format("    reached userspace: {} of {}\n", u64(k, "userspace_exits"),
                         u64(k, "total"));
    }
  }
  if (u64(k, "dropped"))
    out += fmt::format("    note: {} breakdown rows dropped (a kernel map was full)\n",
                       u64(k, "dropped"));
  return out;
}

}  // namespace tern
