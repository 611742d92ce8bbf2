#include "arch/x86/reset_vector.h"

#include "arch/x86/layout.h"

namespace tern::x86 {

std::array<uint8_t, 9> reset_vector_stub() {
  constexpr auto port_lo = static_cast<uint8_t>(kAcpiResetPort & 0xFF);
  constexpr auto port_hi = static_cast<uint8_t>(kAcpiResetPort >> 8);
  // clang-format off
  return {
      0xB0, kAcpiResetValue,    // mov al, imm8
      0xBA, port_lo, port_hi,   // mov dx, imm16
      0xEE,                     // out dx, al
      0xF4,                     // hlt
      0xEB, 0xFD,               // jmp short -3: back to the hlt
  };
  // clang-format on
}

Result<void> write_reset_vector_stub(const GuestMemory& mem) {
  static_assert(kResetVectorAddr + 16 == kBiosEnd);
  const auto stub = reset_vector_stub();
  return mem.write(kResetVectorAddr, stub);
}

}  // namespace tern::x86
