// EventStreamQueue: the lines of one GET /tern/events subscriber on their way from the EventLog
// (any thread) to the socket writer (the API io thread), bounded so that a subscriber that does
// not read cannot make tern hold more than `limit_bytes` for it.
#pragma once

#include <cstddef>
#include <mutex>
#include <string>

namespace tern {

/// Thread-safe. Bytes count from push() until the writer reports them written (written()), so
/// what waits in the queue plus what is in flight stays within the limit. A push() that would
/// exceed it overflows the queue: the line is not taken, `drop_line` is appended as the last line
/// (beyond the limit) and every later push() is ignored.
class EventStreamQueue {
 public:
  /// What a push() means for the writer.
  enum class Push {
    kQueued,      ///< Appended behind lines the writer has not taken yet: nothing to do.
    kWake,        ///< Appended to an empty queue: the writer should take() it.
    kOverflowed,  ///< This push overflowed the queue (once): drop the subscriber after take().
    kIgnored,     ///< The queue had overflowed already.
  };

  EventStreamQueue(size_t limit_bytes, std::string drop_line)
      : limit_(limit_bytes), drop_line_(std::move(drop_line)) {}

  /// Appends `line` (publisher side).
  Push push(const std::string& line);
  /// Takes every queued line, concatenated (writer side); empty when none are queued. They still
  /// count toward the limit until written() is called with their size.
  [[nodiscard]] std::string take();
  /// The writer wrote `bytes` it had taken.
  void written(size_t bytes);
  /// Whether the queue overflowed (its last line is, or was, the drop line).
  [[nodiscard]] bool overflowed() const;
  /// Bytes pushed and not yet written (at most the limit, plus the drop line after an overflow).
  [[nodiscard]] size_t pending_bytes() const;

 private:
  mutable std::mutex mu_;
  const size_t limit_;
  const std::string drop_line_;
  std::string queued_;  // taken as one buffer by the writer
  size_t pending_ = 0;  // queued_ plus taken but not yet written
  bool overflowed_ = false;
};

}  // namespace tern
