// DeviceActivator: hands device activation and reset (DRIVER_OK, status 0: work that starts or
// joins device threads, and may later do a vhost-user handshake) from the vCPU thread that
// triggered it to the VM's control thread, and makes the vCPU wait until it is done (Cloud
// Hypervisor's activator + barrier; STYLE.md runtime model). The guest sees the same thing as if
// the work ran inline: when its MMIO write returns, the work is complete.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace tern {

/// Modes, decided per run() under one mutex:
/// - detached (no control thread attached: unit tests, kvm tests, a Vm without a ControlLoop) →
///   the caller runs the work itself (inline);
/// - attached, and the caller IS the control thread (restore, tests driving devices from it) →
///   inline;
/// - attached, but the control thread is waiting for vCPUs (inside an InlineScope: Vm::pause,
///   Vm::finish, ~Vm) → inline;
/// - otherwise the work is queued, the control thread is notified, and the caller blocks until
///   the control thread ran it (run_pending()).
///
/// DEADLOCK RULES (why each mode exists):
/// 1. A vCPU blocked in run() never reaches its park point, so Vm::pause (which waits for every
///    vCPU to park) and Vm::finish (which joins them) would wait forever for a vCPU that waits for
///    them. They hold an InlineScope while they wait: entering it wakes every waiter whose work the
///    control thread has not taken yet; such a waiter takes its work back and runs it itself. The
///    control thread is single: while it is inside the scope it is not inside run_pending(), so no
///    work is half-run by it — every job is run exactly once, by exactly one thread.
/// 2. The caller of run() may hold locks (a virtio-pci transport's mutex, PciRoot's config and
///    BAR-map locks). The work must not take them, and nothing the control thread does outside
///    an InlineScope may take them either (e.g. statistics read atomics only) — else the control
///    thread blocks on a lock held by a vCPU that waits for the control thread.
/// 3. The work must not wait for vCPUs (it runs while one is stopped in an MMIO exit).
/// 4. detach() (the control loop goes away) behaves like a scope that never ends.
///
/// Thread-safety: run() from any thread; attach(), detach(), run_pending() and InlineScope from
/// the control thread only.
class DeviceActivator {
 public:
  using Work = std::function<void()>;

  DeviceActivator() = default;
  DeviceActivator(const DeviceActivator&) = delete;
  DeviceActivator& operator=(const DeviceActivator&) = delete;
  /// No work may be waiting (the VM's vCPUs are joined before it is destroyed).
  ~DeviceActivator();

  /// Runs `work` to completion before returning — on the control thread, or inline (see above).
  void run(const Work& work);

  /// The calling thread becomes the control thread; `notify` (called without the activator's
  /// lock, from the thread that queued work) must make it call run_pending() soon. Thread-safe
  /// to call while vCPUs run.
  void attach(std::function<void()> notify);
  /// Back to inline mode; waiters not yet served run their own work.
  void detach();
  /// Control thread: runs every queued job, in order, and wakes its waiter.
  void run_pending();

  /// Inline mode for its lifetime (nestable): held by the control thread while it waits for vCPUs.
  class InlineScope {
   public:
    explicit InlineScope(DeviceActivator& a);
    ~InlineScope();
    InlineScope(const InlineScope&) = delete;
    InlineScope& operator=(const InlineScope&) = delete;

   private:
    DeviceActivator& a_;
  };
  [[nodiscard]] InlineScope inline_scope() { return InlineScope(*this); }

  /// Jobs run by the control thread and inline (for tests and statistics).
  [[nodiscard]] uint64_t queued_runs() const;
  [[nodiscard]] uint64_t inline_runs() const;

 private:
  struct Job {
    const Work* work;
    bool taken = false;  // the control thread is running it
    bool done = false;
  };
  bool inline_locked() const;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::function<void()> notify_;
  std::thread::id control_;
  bool attached_ = false;
  int inline_depth_ = 0;
  std::deque<Job*> queue_;
  uint64_t queued_runs_ = 0;
  uint64_t inline_runs_ = 0;
};

}  // namespace tern
