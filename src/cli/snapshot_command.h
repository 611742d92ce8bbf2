// `tern snapshot` (save a running tern's VM through its API socket, with a progress bar) and
// `tern restore` (rebuild a VM from a snapshot in this process and run it, like `tern run`).
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace tern {

/// Raw `tern snapshot` options.
struct SnapshotOptions {
  std::string api_sock;      ///< The running tern's API socket.
  std::string state;         ///< --state FILE (Firecracker's snapshot_path).
  std::string mem;           ///< --mem FILE (Firecracker's mem_file_path).
  std::string rate_limit;    ///< --rate-limit SIZE per second ("" or "0": none).
  bool direct = false;       ///< --direct: O_DIRECT memory file writes.
  bool exit_after = false;   ///< --exit: power the VM off (tern exits 0) once saved.
  bool keep_paused = false;  ///< --keep-paused: leave the VM paused once saved.
};

/// Raw `tern restore` options.
struct RestoreOptions {
  std::string state;
  std::string mem;
  std::string api_sock;
  bool resume = false;
  std::string console = "stdio";
  bool stats_on_exit = false;
  bool kernel_exits = false;   ///< --kernel-exits: in-kernel exit accounting from the first resume.
  std::string memory_backend;  ///< --memory-backend; empty: automatic from the restored devices.
  std::string on_reboot;       ///< --on-reboot exit|restart; empty: what the saved VM did.
  std::string cpu_affinity;    ///< --cpu-affinity (not saved in the snapshot); empty: none.
};

CLI::App* add_snapshot_command(CLI::App& app, SnapshotOptions& o);
CLI::App* add_restore_command(CLI::App& app, RestoreOptions& o);

/// Pauses the VM (if running), PUT /snapshot/create with a progress bar on stderr, then resumes,
/// keeps it paused or powers it off. A failed save resumes a VM it paused. Exit status 0 on
/// success, 1 with the reason on stderr otherwise. SIGINT, SIGTERM or SIGHUP (Ctrl-C) while it
/// runs: a save in progress is waited for (the API cannot cancel it), then the VM it paused is
/// resumed (whatever --keep-paused or --exit said) and the status is 128 + the signal's number
/// (a signal ignored when the client started, as under nohup, stays ignored);
/// a second signal acts as usual.
int run_snapshot(const SnapshotOptions& o);

/// Restores and runs the VM until it stops; exit statuses as `tern run` (README).
int run_restore(const RestoreOptions& o);

}  // namespace tern
