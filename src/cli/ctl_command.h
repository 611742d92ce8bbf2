// `tern ctl`: operate a running tern through its API socket (info, pause, resume, ctrl-alt-del,
// power-off, events, config, stats, metrics).
#pragma once

#include <CLI/CLI.hpp>

#include <string>

namespace tern {

/// Raw `tern ctl` options.
struct CtlOptions {
  std::string api_sock;
  std::string verb;
};

/// Adds the `ctl` subcommand to `app`.
CLI::App* add_ctl_command(CLI::App& app, CtlOptions& opts);

/// Runs one verb. Prints the answer (JSON bodies as returned, events one per line) on stdout;
/// returns 0 on success, 1 with the fault_message on stderr otherwise.
int run_ctl(const CtlOptions& opts);

}  // namespace tern
