#include "vcpu/vcpu_thread.h"

#include <signal.h>
#include <unistd.h>

#include <cstring>

#include "base/clock.h"
#include "base/cpu_affinity.h"
#include "base/log.h"

namespace tern {

namespace {

int kick_signal() { return SIGRTMIN + 1; }

void on_kick(int) {}

thread_local VcpuThread* t_current = nullptr;  // the VcpuThread running on this thread

}  // namespace

VcpuThread::VcpuThread(KvmVcpu vcpu, Bus& pio, Bus& mmio, StopLatch& stop)
    : vcpu_(std::move(vcpu)), pio_(pio), mmio_(mmio), stop_latch_(stop) {}

VcpuThread::~VcpuThread() {
  stop();
  join();
}

void VcpuThread::install_kick_handler() {
  struct sigaction sa {};
  sa.sa_handler = on_kick;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: KVM_RUN must return EINTR
  sigaction(kick_signal(), &sa, nullptr);
}

void VcpuThread::start() {
  state_ = VcpuThreadState::kRunning;
  thread_ = std::thread([this] {
    handle_ = pthread_self();
    tid_ = ::gettid();
    thread_started_ = true;
    std::string name = "vcpu" + std::to_string(vcpu_.id());
    pthread_setname_np(pthread_self(), name.c_str());
    pin_this_thread(ThreadClass::kVcpu, vcpu_.id());  // --cpu-affinity vcpuN / vcpu
    t_current = this;
    loop();
    {
      std::lock_guard lock(pause_mu_);
      state_ = VcpuThreadState::kExited;
    }
    pause_cv_.notify_all();
  });
}

void VcpuThread::stop() {
  {
    std::lock_guard lock(pause_mu_);
    stop_requested_ = true;
    vcpu_.run_state()->immediate_exit = 1;
  }
  pause_cv_.notify_all();
  if (thread_started_ && state_ != VcpuThreadState::kExited) pthread_kill(handle_, kick_signal());
}

// Pause ordering rule (KVM api.rst, "immediate_exit" and KVM_EXIT_IO/MMIO): a PIO/MMIO exit that
// userspace has handled is only completed (IN data written to the guest register, RIP advanced)
// when KVM_RUN is entered again; the kernel finishes it before it looks at immediate_exit or at
// pending signals. So:
//   request_pause(): pause_requested_ = true, then immediate_exit = 1 (both under pause_mu_), then
//                    the kick signal (the signal covers a thread already inside the guest).
//   vCPU thread:     parks only after a KVM_RUN returned -EINTR. If the thread was between an exit
//                    and the next KVM_RUN, that next KVM_RUN sees immediate_exit = 1, completes the
//                    pending exit without running guest code, and returns -EINTR: the vCPU parks
//                    with its state consistent. While parked it waits on pause_cv_ (no CPU).
//   re-arming:       immediate_exit is cleared only under pause_mu_ and only when neither a pause
//                    nor a stop is pending, so a request that races with the clear is never lost.
void VcpuThread::request_pause() {
  std::lock_guard lock(pause_mu_);
  if (state_ != VcpuThreadState::kRunning) return;
  pause_requested_ = true;
  state_ = VcpuThreadState::kPausing;
  vcpu_.run_state()->immediate_exit = 1;
  if (thread_started_) pthread_kill(handle_, kick_signal());
}

void VcpuThread::wait_paused() {
  std::unique_lock lock(pause_mu_);
  pause_cv_.wait(lock, [&] { return state_ != VcpuThreadState::kPausing; });
}

void VcpuThread::resume() {
  {
    std::lock_guard lock(pause_mu_);
    if (!pause_requested_) return;
    pause_requested_ = false;
    // Parked (outside KVM_RUN, so the vCPU ioctl does not wait for an exit): the guest's clock
    // ran on while it stood still; flag the stop in its pvclock page so its soft-lockup watchdog
    // does not report the pause as a hung CPU (KVM API KVM_KVMCLOCK_CTRL; QEMU does it at every
    // VM start, Firecracker at pause).
    if (state_ == VcpuThreadState::kPaused) {
      if (auto r = vcpu_.kvmclock_ctrl(); !r)
        spdlog::warn("vCPU {}: {} (resumed all the same)", vcpu_.id(), r.error().message());
    }
    if (state_ == VcpuThreadState::kPausing) state_ = VcpuThreadState::kRunning;  // kicked, not yet parked
  }
  pause_cv_.notify_all();
}

bool VcpuThread::after_kick() {
  std::unique_lock lock(pause_mu_);
  if (pause_requested_ && !stop_requested_) {
    state_ = VcpuThreadState::kPaused;
    pause_cv_.notify_all();
    pause_cv_.wait(lock, [&] { return !pause_requested_ || stop_requested_; });
    if (!stop_requested_) state_ = VcpuThreadState::kRunning;
  }
  if (stop_requested_) return false;
  vcpu_.run_state()->immediate_exit = 0;
  return true;
}

void VcpuThread::join() {
  if (thread_.joinable()) thread_.join();
}

StopEvent VcpuThread::stop_event_here(StopKind kind, std::string detail) {
  StopEvent e;
  e.kind = kind;
  e.detail = std::move(detail);
  if (t_current != nullptr) {
    e.vcpu = static_cast<int>(t_current->vcpu_.id());
    if (auto regs = t_current->vcpu_.get_regs()) e.rip = regs->rip;
  }
  return e;
}

void VcpuThread::post_stop(StopKind kind, std::string detail) {
  StopEvent e;
  e.kind = kind;
  e.vcpu = static_cast<int>(vcpu_.id());
  if (auto regs = vcpu_.get_regs()) e.rip = regs->rip;
  e.detail = std::move(detail);
  stop_latch_.post(std::move(e));
}

void VcpuThread::loop() {
  while (!stop_requested_.load(std::memory_order_relaxed)) {
    int r = vcpu_.run();
    // Exit accounting: time from KVM_RUN's return to the end of handling (ns); a kick (-EINTR)
    // counts as KVM_EXIT_INTR and its time excludes any pause that follows it.
    const uint64_t exit_start_ns = monotonic_ns();
    stats_.count_run_return();
    if (r == -EINTR || r == -EAGAIN) {
      stats_.record(KVM_EXIT_INTR, monotonic_ns() - exit_start_ns);
      if (!after_kick()) return;
      continue;
    }
    if (r < 0) {
      post_stop(StopKind::kHostError, std::string("KVM_RUN failed: ") + std::strerror(-r));
      return;
    }
    const uint32_t reason = vcpu_.run_state()->exit_reason;
    const bool keep_running = handle_exit();
    stats_.record(reason, monotonic_ns() - exit_start_ns);
    if (!keep_running) return;
  }
}

bool VcpuThread::handle_exit() {
  kvm_run* run = vcpu_.run_state();
  switch (run->exit_reason) {
    case KVM_EXIT_IO: {
      auto* base = reinterpret_cast<uint8_t*>(run) + run->io.data_offset;
      for (uint32_t i = 0; i < run->io.count; ++i) {
        uint8_t* p = base + static_cast<size_t>(i) * run->io.size;
        if (run->io.direction == KVM_EXIT_IO_OUT)
          pio_.write(run->io.port, std::span<const uint8_t>(p, run->io.size));
        else
          pio_.read(run->io.port, std::span<uint8_t>(p, run->io.size));
      }
      return !stop_latch_.posted();  // see below
    }
    case KVM_EXIT_MMIO: {
      uint32_t len = run->mmio.len > 8 ? 8 : run->mmio.len;
      if (run->mmio.is_write)
        mmio_.write(run->mmio.phys_addr, std::span<const uint8_t>(run->mmio.data, len));
      else
        mmio_.read(run->mmio.phys_addr, std::span<uint8_t>(run->mmio.data, len));
      // A device this access reached may have stopped the VM (a reset request: PIIX3 RC, the
      // ACPI reset register, the i8042 pulse; S5 power-off): this vCPU stops here, at the
      // instruction that asked, as the hardware's CPU does. Else it would run on until the
      // control thread's kick reached it — measured on the test host: the hostile firmware's
      // 1000 port reads and a console line after its RESET_REG write (tests/e2e hostile).
      return !stop_latch_.posted();
    }
    case KVM_EXIT_HLT:
    case KVM_EXIT_INTR:
    case KVM_EXIT_IRQ_WINDOW_OPEN:
      return true;
    case KVM_EXIT_SHUTDOWN:
      post_stop(StopKind::kTripleFault, "KVM_EXIT_SHUTDOWN (triple fault)");
      return false;
    case KVM_EXIT_SYSTEM_EVENT:
      switch (run->system_event.type) {
        case KVM_SYSTEM_EVENT_SHUTDOWN:
          post_stop(StopKind::kPowerOff, "KVM_EXIT_SYSTEM_EVENT shutdown");
          return false;
        case KVM_SYSTEM_EVENT_RESET:
          post_stop(StopKind::kReboot, "KVM_EXIT_SYSTEM_EVENT reset");
          return false;
        default:
          post_stop(StopKind::kInternalError,
                    "KVM_EXIT_SYSTEM_EVENT type " + std::to_string(run->system_event.type));
          return false;
      }
    case KVM_EXIT_INTERNAL_ERROR:
      post_stop(StopKind::kInternalError,
                "KVM_EXIT_INTERNAL_ERROR suberror " + std::to_string(run->internal.suberror));
      return false;
    case KVM_EXIT_FAIL_ENTRY:
      post_stop(StopKind::kInternalError,
                "KVM_EXIT_FAIL_ENTRY hardware reason " +
                    std::to_string(run->fail_entry.hardware_entry_failure_reason));
      return false;
    default:
      post_stop(StopKind::kInternalError, "unexpected " + exit_reason_name(run->exit_reason));
      return false;
  }
}

}  // namespace tern
