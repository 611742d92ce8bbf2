#include "devices/device_activator.h"

#include <algorithm>

#include "base/result.h"

namespace tern {

DeviceActivator::~DeviceActivator() {
  std::lock_guard lock(mu_);
  TERN_CHECK(queue_.empty());
}

bool DeviceActivator::inline_locked() const {
  return !attached_ || inline_depth_ > 0 || std::this_thread::get_id() == control_;
}

void DeviceActivator::run(const Work& work) {
  Job job{&work};
  std::function<void()> notify;
  {
    std::unique_lock lock(mu_);
    if (inline_locked()) {
      ++inline_runs_;
      lock.unlock();
      work();
      return;
    }
    queue_.push_back(&job);
    notify = notify_;
  }
  notify();
  std::unique_lock lock(mu_);
  // Wait until the control thread ran it, or until inline mode began before it took the job
  // (deadlock rule 1): then take it back and run it here.
  cv_.wait(lock, [&] { return job.done || (!job.taken && inline_locked()); });
  if (job.done) return;
  queue_.erase(std::find(queue_.begin(), queue_.end(), &job));
  ++inline_runs_;
  lock.unlock();
  work();
}

void DeviceActivator::run_pending() {
  std::unique_lock lock(mu_);
  while (!queue_.empty()) {
    Job* job = queue_.front();
    queue_.pop_front();
    job->taken = true;
    ++queued_runs_;
    lock.unlock();
    (*job->work)();
    lock.lock();
    job->done = true;  // the waiter owns `job`: no access after this under the lock
    cv_.notify_all();
  }
}

void DeviceActivator::attach(std::function<void()> notify) {
  std::lock_guard lock(mu_);
  notify_ = std::move(notify);
  control_ = std::this_thread::get_id();
  attached_ = true;
}

void DeviceActivator::detach() {
  std::lock_guard lock(mu_);
  attached_ = false;
  control_ = {};
  cv_.notify_all();
  // notify_ stays callable: a run() that read it before detach() may still call it.
}

DeviceActivator::InlineScope::InlineScope(DeviceActivator& a) : a_(a) {
  std::lock_guard lock(a_.mu_);
  ++a_.inline_depth_;
  a_.cv_.notify_all();
}

DeviceActivator::InlineScope::~InlineScope() {
  std::lock_guard lock(a_.mu_);
  --a_.inline_depth_;
}

uint64_t DeviceActivator::queued_runs() const {
  std::lock_guard lock(mu_);
  return queued_runs_;
}

uint64_t DeviceActivator::inline_runs() const {
  std::lock_guard lock(mu_);
  return inline_runs_;
}

}  // namespace tern
