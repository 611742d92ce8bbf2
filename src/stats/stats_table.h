// Turning GET /tern/stats snapshots into per-second rates and text tables (`tern stat`,
// `tern run --stats-on-exit`).
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>

namespace tern {

/// A snapshot flattened to counters: section -> row name -> value. Sections: "exits" (by reason,
/// all vCPUs), "vcpus" (exits per vCPU), "devices" (reads+writes per device name),
/// "device_time_ns" (ns inside each device), "unclaimed" ("pio 0x510", ..., "pio other"), "queues"
/// ("<device>/q<index> kicks|requests|interrupts|interrupts_suppressed|bytes|errors", from
/// device_counters[].queues), "device_counters" ("<device> <counter name>"), "kvm_vm" and
/// "kvm_vcpu" (cumulative in-kernel counters, vCPUs summed), "cpu_ns" ("<thread>/<tid>
/// user|system|guest", and "process (all threads) ..." which still counts threads that have
/// exited).
using StatCounters = std::map<std::string, std::map<std::string, uint64_t>>;
StatCounters flatten_stats(const nlohmann::json& stats);

/// Totals and per-second rates between two snapshots (by their timestamp_ns):
/// {"interval_s": x, "rates": {section: {row: {"total": n, "per_s": r}}}, "errors": [...]}.
/// A counter that went backwards (a different VM) counts from 0. With `kernel_exits` (`tern stat
/// --kernel-exits`) also "kernel_exits": kernel_exit_rates(prev, cur) (kernel_exits_table.h).
nlohmann::json compute_rates(const nlohmann::json& prev, const nlohmann::json& cur,
                             bool kernel_exits = false);

/// The `tern stat` screen for compute_rates() output: one block per section, rows sorted by rate
/// then total, at most `max_rows` rows per section (0: all); CPU time is shown as % of one CPU.
/// Device queues are one block with a column per counter (kicks, requests, interrupts,
/// suppressed, bytes, errors) and two lines per queue: per-second rates, then totals. A last
/// block gives each PCI function's MMIO exits per request: its "mmio_reads" + "mmio_writes"
/// counters over its queues' requests, over the totals and over the interval ("-": none).
std::string render_rates_table(const nlohmann::json& rates, size_t max_rows);

/// A compact totals table of one snapshot (for `tern run --stats-on-exit`); device queues and MMIO
/// exits per request as in render_rates_table(), totals only; the in-kernel exits section when the
/// accounting is on (or the reason it could not start).
std::string render_summary(const nlohmann::json& stats);

}  // namespace tern
