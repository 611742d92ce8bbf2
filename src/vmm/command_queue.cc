#include "vmm/command_queue.h"

#include <sys/eventfd.h>

namespace tern {

Result<std::unique_ptr<CommandQueue>> CommandQueue::create() {
  auto q = std::unique_ptr<CommandQueue>(new CommandQueue());
  ASSIGN_OR_RETURN(q->efd_, make_eventfd(0, EFD_NONBLOCK));
  return q;
}

void CommandQueue::push(Command c) {
  {
    std::lock_guard lock(mu_);
    items_.push_back(std::move(c));
  }
  uint64_t one = 1;
  (void)!::write(efd_.get(), &one, sizeof one);
}

std::deque<Command> CommandQueue::drain() {
  uint64_t n;
  (void)!::read(efd_.get(), &n, sizeof n);
  std::lock_guard lock(mu_);
  return std::exchange(items_, {});
}

}  // namespace tern
