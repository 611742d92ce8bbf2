// Parsing a Linux bzImage for the 64-bit boot protocol (Documentation/x86/boot.rst, "The Real-Mode
// Kernel Header" and "64-bit BOOT PROTOCOL").
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/result.h"

namespace tern::x86 {

inline constexpr uint16_t kMinBootProtocol = 0x020C;  ///< 2.12: first with xloadflags.

/// A validated bzImage: the setup-header fields tern needs, the raw header to copy into
/// boot_params.hdr, and the protected-mode kernel (the "payload") to load at 1 MiB.
struct BzImage {
  uint16_t version = 0;           ///< Boot protocol version, e.g. 0x020F for 2.15.
  uint8_t setup_sects = 0;        ///< Real-mode setup sectors (0 in the file already mapped to 4).
  uint8_t loadflags = 0;          ///< setup_header.loadflags as found in the file.
  uint16_t xloadflags = 0;        ///< setup_header.xloadflags (XLF_KERNEL_64 is always set).
  uint32_t init_size = 0;         ///< Bytes the kernel needs from its decompression address.
  uint32_t cmdline_size = 0;      ///< Longest command line the kernel accepts, without the NUL.
  uint32_t initrd_addr_max = 0;   ///< Highest byte address the initrd may occupy (inclusive).
  uint32_t kernel_alignment = 0;  ///< Alignment of the decompression address (power of two).
  bool relocatable_kernel = false;
  uint64_t pref_address = 0;  ///< Preferred (and, if not relocatable, fixed) load address.
  /// Raw setup header bytes: file offsets [0x1F1, 0x202 + file[0x201]) — what boot.rst says to
  /// copy into boot_params.hdr before filling in the loader's fields.
  std::vector<uint8_t> setup_header;
  /// The protected-mode kernel: file bytes from (setup_sects + 1) * 512 to the end.
  std::vector<uint8_t> payload;
  /// The kernel's version string (e.g. "6.1.0-57-cloud-amd64 (...) #1 SMP ..."), empty if absent.
  std::string kernel_version;
};

/// Parses and validates a bzImage held in memory. Checks, in order: length, boot_flag 0xAA55 at
/// 0x1FE, "HdrS" at 0x202, protocol >= 2.12, a sane header length, XLF_KERNEL_64, LOADED_HIGH,
/// that the payload at (setup_sects + 1) * 512 is non-empty, inside the file and reaches into
/// the last of its syssize 16-byte paragraphs (syssize is rounded up: a file up to 15 bytes short
/// of syssize * 16 is whole), init_size != 0 and (if relocatable) a power-of-two kernel_alignment. Errors
/// (op "bzImage") name what is wrong, e.g. "not a bzImage: missing HdrS magic".
[[nodiscard]] Result<BzImage> parse_bzimage(std::span<const uint8_t> file);

/// "2.15" for 0x020F: boot protocol versions as boot.rst writes them.
[[nodiscard]] std::string boot_protocol_string(uint16_t version);

}  // namespace tern::x86
