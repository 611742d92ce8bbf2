// ConsoleOutput: the guest console's bytes on their way to stdout or a file.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <thread>

#include "base/checked.h"
#include "base/fd.h"
#include "base/log.h"
#include "base/result.h"
#include "devices/byte_ring.h"
#include "devices/console/byte_sink.h"
#include "devices/console/console_target.h"

namespace tern {

struct ConsoleOutputOptions {
  size_t capacity = 64 * KiB;  ///< Ring buffer size; bytes beyond it are dropped.
  /// How long destruction keeps writing what is still queued before dropping it.
  std::chrono::milliseconds shutdown_timeout{2000};
  /// How long the writer, woken by the first byte after an idle spell, waits for more before it
  /// writes (flush(), shutdown or a full chunk end the wait at once). A UART sends one byte per
  /// guest exit; without the wait each byte cost a wake-up of this thread and a write(2) of its
  /// own (and one more wake-up of whatever reads the console). 5 ms is far below what a person
  /// at the console notices.
  std::chrono::milliseconds linger{5};
};

/// A bounded ring buffer drained by a writer thread into an fd.
///
/// write() never waits for I/O: it copies what fits and drops (and counts) the rest, so a slow
/// or stuck reader of stdout can never stall a vCPU. Bytes that arrive one at a time are
/// gathered for up to `linger` and written together. The writer uses poll() with a timeout and
/// writes at most one page at a time, so it notices shutdown even when the fd is not writable,
/// and it blocks SIGPIPE for itself (a closed pipe is an error, not a dead VMM).
/// Thread-safe.
class ConsoleOutput {
 public:
  struct Stats {
    uint64_t bytes_written = 0;
    uint64_t bytes_dropped = 0;  ///< Ring full, write error, or still queued at shutdown.
    uint64_t write_errors = 0;
    uint64_t writes = 0;  ///< write(2) calls that wrote something
  };

  /// Opens the target (stdio: a dup of stdout; file: created/truncated, mode 0644) and starts
  /// the writer thread.
  [[nodiscard]] static Result<std::unique_ptr<ConsoleOutput>> create(
      const ConsoleTarget& target, ConsoleOutputOptions options = {});
  /// Writes to an fd the caller opened (tests, or an already open console).
  [[nodiscard]] static std::unique_ptr<ConsoleOutput> create_for_fd(
      UniqueFd fd, ConsoleOutputOptions options = {});

  ConsoleOutput(const ConsoleOutput&) = delete;
  ConsoleOutput& operator=(const ConsoleOutput&) = delete;
  /// Writes what is queued (bounded by shutdown_timeout), then stops and joins the writer.
  ~ConsoleOutput();

  /// Queues bytes; never blocks on I/O. Bytes that do not fit are dropped and counted.
  void write(std::span<const uint8_t> bytes);
  /// A ByteSink that forwards to write(); this object must outlive every user of the sink.
  [[nodiscard]] ByteSink sink() {
    return [this](std::span<const uint8_t> b) { write(b); };
  }
  /// Waits until everything queued so far has been written; false on timeout.
  bool flush(std::chrono::milliseconds timeout);

  [[nodiscard]] Stats stats() const;

 private:
  ConsoleOutput(UniqueFd fd, ConsoleOutputOptions options);
  void run();
  size_t write_all(std::span<const uint8_t> data);
  bool shutdown_expired() const;

  UniqueFd fd_;
  const ConsoleOutputOptions options_;
  mutable std::mutex mu_;
  std::condition_variable work_cv_;     // writer waits for data or stop
  std::condition_variable drained_cv_;  // flush() waits for an empty ring
  ByteRing ring_;
  size_t in_flight_ = 0;   // bytes taken from the ring, being written
  int flush_waiters_ = 0;  // flush() calls waiting: the writer does not linger
  bool stop_ = false;
  std::chrono::steady_clock::time_point stop_deadline_;
  Stats stats_;
  RateLimit log_limit_{5};
  std::thread writer_;  // last: started after everything above is initialised
};

}  // namespace tern
