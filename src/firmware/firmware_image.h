// A firmware image (`tern run --firmware`): Debian's SeaBIOS (bios.bin, bios-256k.bin) or OVMF's
// code volume (OVMF_CODE_4M.fd), checked and placed the way a PC's chipset maps its boot flash:
//
//   [4 GiB - vars - size, 4 GiB - size)  the UEFI variable store (pflash, --firmware-vars)
//   [4 GiB - size, 4 GiB)                 the image, read-only (x86 reset vector at 0xFFFFFFF0)
//   [1 MiB - min(size,128K), 1 MiB)       a RAM copy of the image's last 128 KiB (the isa-bios
//                                         alias QEMU's x86_bios_rom_init() makes; SeaBIOS copies
//                                         itself into the PAM shadow from there)
//
// Everything firmware-related lives in [kFirmwareAreaStart, 4 GiB): the image and the variable
// store together take at most kMaxFirmwareBytes.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "base/result.h"

namespace tern::firmware {

inline constexpr uint64_t kFourGiB = 0x100000000;
/// The largest image plus variable store tern maps (the 16 MiB below 4 GiB, as a PC's flash).
inline constexpr uint64_t kMaxFirmwareBytes = 16ull << 20;
inline constexpr uint64_t kFirmwareAreaStart = kFourGiB - kMaxFirmwareBytes;  ///< 0xFF000000.
/// How much of the image's end is copied below 1 MiB (the isa-bios alias).
inline constexpr uint64_t kIsaBiosAliasBytes = 128 << 10;
inline constexpr uint64_t kIsaBiosAliasEnd = 0x100000;
/// Firmware boots move KVM's private pages where QEMU puts them (target/i386/kvm/kvm.c
/// kvm_arch_init: identity map 0xFEFFC000, the 3-page TSS right after it): below
/// kFirmwareAreaStart, above the IOAPIC/LAPIC pages, outside RAM and the PCI MMIO window.
inline constexpr uint64_t kFirmwareIdentityMapAddr = 0xFEFFC000;
inline constexpr uint64_t kFirmwareTssAddr = 0xFEFFD000;
static_assert(kFirmwareTssAddr + 3 * 0x1000 == kFirmwareAreaStart);

/// What kind of firmware an image is.
enum class FirmwareKind {
  kLegacyBios,  ///< A BIOS (SeaBIOS): no firmware volume header.
  kUefi,        ///< A UEFI code volume (OVMF): an EFI_FIRMWARE_VOLUME_HEADER ("_FVH") at offset 0.
};

/// "bios" or "uefi".
[[nodiscard]] const char* firmware_kind_name(FirmwareKind k);

/// The facts about a checked image that placement needs.
struct FirmwareInfo {
  FirmwareKind kind = FirmwareKind::kLegacyBios;
  uint64_t size = 0;  ///< Bytes (a multiple of 4 KiB, at most kMaxFirmwareBytes).
  /// Guest-physical address of the image's first byte: 4 GiB - size.
  [[nodiscard]] uint64_t gpa() const { return kFourGiB - size; }
};

/// Checks that `image` is x86 firmware tern can map: its size is a non-zero multiple of 4 KiB and
/// at most kMaxFirmwareBytes, and its last 16 bytes (the reset vector at 0xFFFFFFF0) begin with a
/// jump: a far JMP (EA) or near/short JMP (E9/EB) after optional NOPs (SeaBIOS: EA 5B E0 00 F0;
/// OVMF_CODE_4M: 90 90 E9), or OVMF's older "mov eax, cr0" prologue (0F 20 C0) with a jump after
/// it. Errors (op "not firmware") say which rule failed; the caller prefixes the field.
[[nodiscard]] Result<FirmwareInfo> check_firmware_image(std::span<const uint8_t> image);

/// Guest-physical address of the variable store of `vars_bytes` directly below the image.
[[nodiscard]] inline uint64_t vars_gpa(const FirmwareInfo& fw, uint64_t vars_bytes) {
  return fw.gpa() - vars_bytes;
}

/// The variable-store template beside a UEFI code image: `code_path` with "CODE" in its file
/// name replaced by "VARS" (Debian: OVMF_CODE_4M.fd -> OVMF_VARS_4M.fd) when that file exists;
/// else empty (then --firmware-vars must name an existing store).
[[nodiscard]] std::string vars_template_for(const std::string& code_path);

/// The part of `image` copied to RAM ending at 1 MiB: its last min(size, 128 KiB) bytes.
[[nodiscard]] std::span<const uint8_t> isa_bios_alias(std::span<const uint8_t> image);

/// zlib crc32 of the whole image: what a snapshot records so that a restore refuses a firmware
/// file that changed since the save (an update, another build). Not a cryptographic hash.
[[nodiscard]] uint32_t image_crc32(std::span<const uint8_t> image);

}  // namespace tern::firmware
