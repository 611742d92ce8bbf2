// FakeControlThread (tests only): a thread that plays the VM's control thread for a
// DeviceActivator — attaches to it, runs queued device work when notified (while serving), and
// runs closures handed to call() the way the control loop runs commands.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

#include "devices/device_activator.h"

namespace tern::testing {

class FakeControlThread {
 public:
  explicit FakeControlThread(DeviceActivator& a, bool serving = true)
      : a_(a), serving_(serving), thread_([this] { loop(); }) {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return attached_; });
  }
  ~FakeControlThread() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

  [[nodiscard]] std::thread::id id() const { return thread_.get_id(); }
  /// Runs `f` on the control thread and waits for it.
  void call(std::function<void()> f) {
    bool done = false;
    std::unique_lock lock(mu_);
    calls_.push_back([&] {
      f();
      std::lock_guard l(mu_);
      done = true;
      cv_.notify_all();
    });
    cv_.notify_all();
    cv_.wait(lock, [&] { return done; });
  }
  /// Blocks until the activator notified at least `n` times (work was queued).
  void wait_notifications(uint64_t n) {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return notifications_ >= n; });
  }
  /// While not serving, notifications are counted but queued work is not run.
  void set_serving(bool serving) {
    std::lock_guard lock(mu_);
    serving_ = serving;
    cv_.notify_all();
  }

 private:
  void loop() {
    a_.attach([this] {
      std::lock_guard lock(mu_);
      ++notifications_;
      cv_.notify_all();
    });
    std::unique_lock lock(mu_);
    attached_ = true;
    cv_.notify_all();
    while (true) {
      cv_.wait(lock,
               [&] { return stop_ || !calls_.empty() || (serving_ && served_ < notifications_); });
      if (stop_) break;
      if (!calls_.empty()) {
        auto f = std::move(calls_.front());
        calls_.pop_front();
        lock.unlock();
        f();
        lock.lock();
        continue;
      }
      served_ = notifications_;
      lock.unlock();
      a_.run_pending();
      lock.lock();
    }
    lock.unlock();
    a_.detach();
  }

  DeviceActivator& a_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool serving_;
  bool attached_ = false;
  bool stop_ = false;
  uint64_t notifications_ = 0;
  uint64_t served_ = 0;
  std::deque<std::function<void()>> calls_;
  std::thread thread_;  // last: started after the members above
};

}  // namespace tern::testing
