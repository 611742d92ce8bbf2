// Unit tests: `tern snapshot` (run_snapshot) against tern's API stack in-process (api_harness.h):
// what the client leaves the VM in when it is interrupted.
#include "cli/snapshot_command.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <nlohmann/json.hpp>

#include "api/testing/api_harness.h"
#include "base/testing/temp_dir.h"

namespace tern {
namespace {

using testing::ApiHarness;

SnapshotOptions options(const ApiHarness& h, const testing::TempDir& dir) {
  SnapshotOptions o;
  o.api_sock = h.sock;
  o.state = dir.path() + "/vm.state";
  o.mem = dir.path() + "/vm.mem";
  return o;
}

std::string vm_state(ApiHarness& h) {
  return nlohmann::json::parse(h.call("GET", "/").body).value("state", "");
}

// --keep-paused without an interruption: the VM stays paused (what the next test's Ctrl-C must
// undo), exit status 0.
TEST(SnapshotCommand, KeepPausedLeavesTheVmPaused) {
  ApiHarness h;
  h.configure_and_start();
  testing::TempDir dir;
  SnapshotOptions o = options(h, dir);
  o.keep_paused = true;
  EXPECT_EQ(run_snapshot(o), 0);
  EXPECT_EQ(h.machine->pauses, 1);
  EXPECT_EQ(h.machine->resumes, 0);
  EXPECT_EQ(vm_state(h), "Paused");
}

// Ctrl-C while the save runs: the client waits for the save, resumes the VM it paused — even
// with --keep-paused — and exits 128 + SIGINT, instead of dying with the VM paused (issue 31
// item 14b). The signal is raised on the saver thread, in the middle of the save.
TEST(SnapshotCommand, InterruptDuringTheSaveResumesTheVmItPaused) {
  ApiHarness h;
  h.configure_and_start();
  h.machine->during_save = [] { ::raise(SIGINT); };
  testing::TempDir dir;
  SnapshotOptions o = options(h, dir);
  o.keep_paused = true;
  EXPECT_EQ(run_snapshot(o), 128 + SIGINT);
  EXPECT_EQ(h.machine->pauses, 1);
  EXPECT_EQ(h.machine->resumes, 1);
  EXPECT_EQ(vm_state(h), "Running");
  // The handler is gone again: SIGINT's disposition is what it was before (the default here).
  struct sigaction now {};
  ASSERT_EQ(::sigaction(SIGINT, nullptr, &now), 0);
  EXPECT_EQ(now.sa_handler, SIG_DFL);
}

// --exit and Ctrl-C: no power-off; the VM runs on.
TEST(SnapshotCommand, InterruptWithExitDoesNotPowerOff) {
  ApiHarness h;
  h.configure_and_start();
  h.machine->during_save = [] { ::raise(SIGTERM); };
  testing::TempDir dir;
  SnapshotOptions o = options(h, dir);
  o.exit_after = true;
  EXPECT_EQ(run_snapshot(o), 128 + SIGTERM);
  EXPECT_EQ(h.machine->resumes, 1);
  EXPECT_EQ(vm_state(h), "Running");
}

// A VM someone else paused before the client ran: Ctrl-C during the save leaves it paused (the
// client never resumes a VM it did not pause).
TEST(SnapshotCommand, InterruptNeverResumesAVmItDidNotPause) {
  ApiHarness h;
  h.configure_and_start();
  ASSERT_EQ(h.call("PATCH", "/vm", R"({"state":"Paused"})").status, 204);
  h.machine->during_save = [] { ::raise(SIGINT); };
  testing::TempDir dir;
  EXPECT_EQ(run_snapshot(options(h, dir)), 128 + SIGINT);
  EXPECT_EQ(h.machine->pauses, 1);
  EXPECT_EQ(h.machine->resumes, 0);
  EXPECT_EQ(vm_state(h), "Paused");
}

// A signal the client was started with ignored (nohup: SIGHUP; a background job of a
// non-interactive shell: SIGINT) stays ignored: the terminal going away must not turn
// --keep-paused (or --exit) into a resume. The disposition is the same afterwards.
TEST(SnapshotCommand, AnIgnoredSignalStaysIgnored) {
  struct sigaction ignore {};
  struct sigaction before {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  ASSERT_EQ(::sigaction(SIGHUP, &ignore, &before), 0);
  ApiHarness h;
  h.configure_and_start();
  h.machine->during_save = [] { ::raise(SIGHUP); };
  testing::TempDir dir;
  SnapshotOptions o = options(h, dir);
  o.keep_paused = true;
  EXPECT_EQ(run_snapshot(o), 0);
  EXPECT_EQ(h.machine->resumes, 0);
  EXPECT_EQ(vm_state(h), "Paused");
  struct sigaction now {};
  ASSERT_EQ(::sigaction(SIGHUP, &before, &now), 0);
  EXPECT_EQ(now.sa_handler, SIG_IGN);
}

}  // namespace
}  // namespace tern
