#include "devices/legacy/i8042_port.h"

#include "arch/x86/layout.h"

namespace tern {

Result<void> insert_i8042(Bus& pio, std::shared_ptr<I8042> controller) {
  TRY(pio.insert(std::make_shared<I8042Port>(controller, I8042Port::Kind::kData),
                 x86::kI8042DataPort, 1));
  TRY(pio.insert(std::make_shared<I8042Port>(controller, I8042Port::Kind::kCommand),
                 x86::kI8042CommandPort, 1));
  return {};
}

}  // namespace tern
