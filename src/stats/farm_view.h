// The host-wide view (`tern stat --all`): one line per running tern from two GET /tern/stats
// snapshots of it — exits per second by class, host CPU by thread class, network and disk rates.
// kvm_stat for a whole farm.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tern {

/// What a thread is for, from its name (tern names its threads): "vcpu" (vcpuN), "io" (device
/// workers "<device>/q<N>", "nvme0/cq1", and "io-..." threads), else "control" (main, api,
/// signals, console, ...).
[[nodiscard]] std::string_view thread_class(std::string_view thread_name);

/// One VM's rates over an interval (all per second; CPU in % of one host CPU).
struct FarmRow {
  double interval_s = 0;
  double exits = 0;          ///< Exits tern handled (KVM_RUN returns with a reason), all vCPUs.
  double exits_pio = 0;      ///< KVM_EXIT_IO
  double exits_mmio = 0;     ///< KVM_EXIT_MMIO
  double exits_hlt = 0;      ///< KVM_EXIT_HLT
  double exits_other = 0;    ///< every other reason
  double kernel_exits = -1;  ///< KVM's own "exits" counter (in-kernel ones too); < 0: unknown
  double cpu_vcpu = 0;       ///< vCPU threads, user + system (guest time included)
  double cpu_io = 0;         ///< device worker threads
  double cpu_control = 0;    ///< every other thread
  /// virtio-net bytes/s the guest received and sent: the tap's statistics (tap_tx_bytes,
  /// tap_rx_bytes; vhost-net too) when the device has them, else its receive queues (even
  /// indexes) and transmit queues (odd indexes).
  double net_rx_bytes = 0;
  double net_tx_bytes = 0;
  double disk_bytes = 0;     ///< virtio-blk and NVMe queues, bytes/s (read + written)
};

/// The rates between two snapshots of one VM (by timestamp_ns). A counter that went backwards
/// (the VM restarted in place) counts from 0. Throws nlohmann::json::exception on a reply of the
/// wrong shape.
[[nodiscard]] FarmRow farm_row(const nlohmann::json& prev, const nlohmann::json& cur);

/// One line of the farm table: a VM's row, or why it has none.
struct FarmLine {
  std::string name;  ///< The VM's name (its API socket's file name without ".sock")
  std::optional<FarmRow> row;
  std::string error;  ///< When row is empty: what went wrong with this VM only
};

/// The `tern stat --all` table: a header, then one line per VM in the order given.
[[nodiscard]] std::string render_farm(const std::vector<FarmLine>& lines);
/// The same as JSON: [{"name": ..., "exits_per_s": ..., ...} or {"name": ..., "error": ...}].
[[nodiscard]] nlohmann::json farm_json(const std::vector<FarmLine>& lines);

}  // namespace tern
