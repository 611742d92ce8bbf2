// The in-kernel exits section of `tern stat --kernel-exits` and `tern run --stats-on-exit`: rates
// between two GET /tern/stats snapshots' "kernel_exits" objects (KernelExitsStats::json()), the
// reconciliation line and the text tables. docs/stats.md, "In-kernel exits".
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>

namespace tern {

/// Rates of the "kernel_exits" objects of two snapshots (whole snapshots, by their timestamp_ns):
///   {"enabled": true, "interval_s": x, "since_ns", "total", "kvm_exits", "kvm_exits_edge",
///    "kvm_exits_start_edge", "difference", "bound", "within_bound", "vcpus", "userspace_exits",
///    "dropped", "rates": {"reasons"|"msrs"|"pio_in_kernel"|"npf"|"injected_irqs"|"userspace":
///    {row: {"total": n, "per_s": r}}}}
/// (reasons' rows also "time_ns" and "mean_ns" over the interval, -1 without exits in it), or
/// {"enabled": false} / {"enabled": false, "error": reason} from `cur`. Rows: reasons by name
/// ("npf", "EPT_VIOLATION"), msrs "0x80b X2APIC_EOI write", pio_in_kernel "0x40 out" or
/// "0x3f8-0x3ff out serial0", npf "ram-not-present" or "mmio-cached 0xfebf1000 virtio-blk0",
/// injected_irqs "vector 236", userspace "reached userspace". When the accounting started after
/// `prev` (another since_ns), the interval starts at its since_ns and counts start from 0.
/// The reconciliation bound is kvm_exits_edge + kvm_exits_start_edge + vcpus.
[[nodiscard]] nlohmann::json kernel_exit_rates(const nlohmann::json& prev,
                                               const nlohmann::json& cur);

/// "sum 12345 = KVM exits 12347 (difference -2, bound ±5: exits between the two samples + 1 in
/// flight per vCPU)" from a "kernel_exits" object or kernel_exit_rates() output ("≠" and "outside
/// the bound" when |difference| exceeds it; the reason when KVM's counter could not be read).
[[nodiscard]] std::string reconciliation_line(const nlohmann::json& k);

/// The `tern stat` block of kernel_exit_rates() output: exits by reason (total, per s, mean time
/// in the kernel), the reconciliation line, "reached userspace: N", top MSRs, in-kernel PIO, NPF
/// by kind and MMIO page/device, injected vectors; at most `max_rows` rows per table (0: all).
/// Unavailable: one line "in-kernel exits: unavailable: <reason>" (or "off").
[[nodiscard]] std::string render_kernel_exit_rates(const nlohmann::json& rates, size_t max_rows);

/// The totals block of one snapshot's "kernel_exits" (`tern run --stats-on-exit`): empty when the
/// accounting is off without error; the reason line when it could not start.
[[nodiscard]] std::string render_kernel_exit_summary(const nlohmann::json& kernel_exits);

}  // namespace tern
