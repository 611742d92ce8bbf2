// `tern vhost-user-blk --socket PATH --disk path=IMG[,cache=…][,readonly=on][,serial=…][,queues=N]
// [,io=…] [--seccomp on|off]`: tern's own vhost-user-blk back-end (src/vhost_user/backend,
// docs/vhost-user-backend.md). Serves until SIGTERM or SIGINT; SIGUSR1 logs the counters.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace tern {

/// `tern vhost-user-blk` options as typed.
struct VhostUserBlkOptions {
  std::string socket;          ///< --socket PATH to listen at
  std::string disk;            ///< --disk, parsed by parse_disk_option
  std::string seccomp = "on";  ///< --seccomp on|off
};

/// Adds the `vhost-user-blk` subcommand to `app`.
CLI::App* add_vhost_user_blk_command(CLI::App& app, VhostUserBlkOptions& opts);

/// Validates the options (errors name the field, before anything is served), then serves.
/// Returns 0 after a clean stop, 1 with a one-line reason on stderr.
int run_vhost_user_blk(const VhostUserBlkOptions& opts);

}  // namespace tern
