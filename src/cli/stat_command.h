// `tern stat`: a live, refreshing table of a running tern's statistics (like kvm_stat, per device).
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/result.h"

namespace tern {

/// `tern stat` options as typed.
struct StatOptions {
  /// --api-sock PATH of the running tern (repeatable with --all: one line per socket).
  std::vector<std::string> api_socks;
  bool all = false;                    ///< --all: one line per VM (stat_all.h)
  std::vector<std::string> sock_dirs;  ///< --sock-dir DIR (implies --all): every socket in DIR
  double interval_s = 1;  ///< --interval S between snapshots (rates are over this interval)
  bool once = false;      ///< --once: one interval, print, exit
  bool json = false;      ///< --json: rates + totals as JSON (one object per line when repeating)
  unsigned rows = 12;     ///< --rows N: rows per section in the table (0: all)
  /// --kernel-exits: the in-kernel exits section (turned on through PUT /tern/kernel-exits when
  /// the VM's accounting is off, also when it goes off while tern stat runs, and off again when
  /// tern stat ends, SIGINT/SIGTERM/SIGHUP/SIGQUIT/SIGPIPE included).
  bool kernel_exits = false;
};

/// GET /tern/stats from the tern at `sock`, checked to be a JSON object with "timestamp_ns" (a
/// running VM's); errors name the socket.
[[nodiscard]] Result<nlohmann::json> fetch_stats(const std::string& sock);

/// Adds the `stat` subcommand to `app`.
CLI::App* add_stat_command(CLI::App& app, StatOptions& opts);

/// Runs `tern stat`: GET /tern/stats every interval and show per-second rates. Returns 0, or 1 with
/// a one-line reason on stderr (bad option, socket unreachable, bad reply). Ended by SIGINT,
/// SIGTERM, SIGHUP, SIGQUIT or SIGPIPE (stdout's reader gone) after it turned the in-kernel
/// accounting on: turns it off, then dies of that signal.
int run_stat(const StatOptions& opts);

}  // namespace tern
