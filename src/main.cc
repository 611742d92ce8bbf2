// tern: a KVM virtual machine monitor. Entry point: parses the command line and dispatches.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>

#include <spdlog/sinks/stdout_color_sinks.h>

#include "base/log.h"
#include "base/process_memory.h"
#include "vmm/exit_status.h"
#include "cli/run_command.h"
#include "cli/vmm_runner.h"
#include "cli/ctl_command.h"
#include "cli/snapshot_command.h"
#include "cli/stat_command.h"
#include "cli/vhost_user_blk_command.h"

int main(int argc, char** argv) {
  // Before any thread exists: malloc thresholds and arenas, thread stack size.
  tern::tune_process_memory();
  CLI::App app{"tern: a KVM virtual machine monitor"};
  app.set_version_flag("--version", std::string("tern ") + TERN_VERSION);
  // No subcommand: Firecracker-style `tern --api-sock PATH` and/or `tern --config-file FILE`.
  app.require_subcommand(0, 1);
  tern::VmmOptions vmm_opts;
  app.add_option("--api-sock", vmm_opts.api_sock,
                 "Serve the control API on this Unix socket (alone: wait to be configured)");
  app.add_option("--config-file", vmm_opts.config_file,
                 "Start the VM described by this Firecracker-style JSON config file");
  std::string log_level = "warn";
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error or off")
      ->capture_default_str();
  tern::RunOptions run_opts;
  CLI::App* run = tern::add_run_command(app, run_opts);
  tern::CtlOptions ctl_opts;
  CLI::App* ctl = tern::add_ctl_command(app, ctl_opts);
  tern::StatOptions stat_opts;
  CLI::App* stat = tern::add_stat_command(app, stat_opts);
  tern::SnapshotOptions snapshot_opts;
  CLI::App* snapshot = tern::add_snapshot_command(app, snapshot_opts);
  tern::RestoreOptions restore_opts;
  CLI::App* restore = tern::add_restore_command(app, restore_opts);
  tern::VhostUserBlkOptions vub_opts;
  CLI::App* vub = tern::add_vhost_user_blk_command(app, vub_opts);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "tern: %s\nRun 'tern --help' or 'tern COMMAND --help' for usage.\n", e.what());
    return tern::kExitError;
  }
  // The guest console owns stdout: tern's own messages go to stderr.
  spdlog::set_default_logger(spdlog::stderr_color_mt("tern"));
  spdlog::set_level(spdlog::level::from_str(log_level));
  spdlog::set_pattern("tern: [%l] %v");
  try {
    if (run->parsed()) {
      if (run_opts.api_sock.empty()) run_opts.api_sock = vmm_opts.api_sock;
      if (!vmm_opts.config_file.empty()) {
        std::fprintf(stderr, "tern: --config-file: not with 'run' (the file describes the VM)\n");
        return tern::kExitError;
      }
      return tern::run_vm(run_opts);
    }
    if (ctl->parsed()) return tern::run_ctl(ctl_opts);
    if (stat->parsed()) return tern::run_stat(stat_opts);
    if (snapshot->parsed()) return tern::run_snapshot(snapshot_opts);
    if (vub->parsed()) return tern::run_vhost_user_blk(vub_opts);
    if (restore->parsed()) {
      if (restore_opts.api_sock.empty()) restore_opts.api_sock = vmm_opts.api_sock;
      return tern::run_restore(restore_opts);
    }
    if (vmm_opts.api_sock.empty() && vmm_opts.config_file.empty()) {
      std::fprintf(stderr,
                   "tern: nothing to do: give a subcommand (run, ctl), --api-sock PATH or "
                   "--config-file FILE\nRun 'tern --help' for usage.\n");
      return tern::kExitError;
    }
    return tern::run_vmm_command(vmm_opts);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tern: internal error: %s\n", e.what());
    return tern::kExitError;
  }
  return tern::kExitError;
}
