#include "vcpu/vcpu_thread.h"

#include <signal.h>

#include <cstring>

#include "base/log.h"

namespace tern {

namespace {

int kick_signal() { return SIGRTMIN + 1; }

void on_kick(int) {}

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
  state_ = VcpuState::kRunning;
  thread_ = std::thread([this] {
    handle_ = pthread_self();
    thread_started_ = true;
    std::string name = "vcpu" + std::to_string(vcpu_.id());
    pthread_setname_np(pthread_self(), name.c_str());
    loop();
    state_ = VcpuState::kExited;
  });
}

void VcpuThread::stop() {
  stop_requested_ = true;
  vcpu_.run_state()->immediate_exit = 1;
  if (thread_started_ && state_ != VcpuState::kExited) pthread_kill(handle_, kick_signal());
}

void VcpuThread::join() {
  if (thread_.joinable()) thread_.join();
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
    if (r == -EINTR || r == -EAGAIN) {
      vcpu_.run_state()->immediate_exit = stop_requested_ ? 1 : 0;
      continue;
    }
    if (r < 0) {
      post_stop(StopKind::kHostError, std::string("KVM_RUN failed: ") + std::strerror(-r));
      return;
    }
    stats_.count(vcpu_.run_state()->exit_reason);
    if (!handle_exit()) return;
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
      return true;
    }
    case KVM_EXIT_MMIO: {
      uint32_t len = run->mmio.len > 8 ? 8 : run->mmio.len;
      if (run->mmio.is_write)
        mmio_.write(run->mmio.phys_addr, std::span<const uint8_t>(run->mmio.data, len));
      else
        mmio_.read(run->mmio.phys_addr, std::span<uint8_t>(run->mmio.data, len));
      return true;
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
