#include "arch/x86/bzimage.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "arch/x86/boot_params.h"

namespace tern::x86 {

namespace {

constexpr size_t kSectorSize = 512;
constexpr uint64_t kSyssizeUnit = 16;  ///< setup_header.syssize counts 16-byte paragraphs.
constexpr size_t kJumpOffsetByte = 0x201;  ///< The setup header ends at 0x202 + this byte.
constexpr size_t kMagicEnd = 0x206;        ///< End of the "HdrS" magic.
/// End of the fields a 2.12 header must have (through handover_offset).
constexpr size_t kMinHeaderEnd = 0x268;

tl::unexpected<Error> bad(std::string what) {
  return fail("bzImage", std::move(what));
}

}  // namespace

std::string boot_protocol_string(uint16_t version) {
  return fmt::format("{}.{:02}", version >> 8, version & 0xFF);
}

Result<BzImage> parse_bzimage(std::span<const uint8_t> file) {
  if (file.size() < kMagicEnd)
    return bad(fmt::format("truncated: file is {} bytes, a bzImage header needs at least {:#x}",
                           file.size(), kMinHeaderEnd));
  // Read what the file holds of the header into a zeroed struct; fields past the end stay 0.
  SetupHeader h{};
  size_t avail = std::min(file.size() - kSetupHeaderOffset, sizeof(SetupHeader));
  std::memcpy(&h, file.data() + kSetupHeaderOffset, avail);

  if (h.boot_flag != kBootFlagMagic)
    return bad(fmt::format("not a bzImage: boot_flag at 0x1FE is {:#06x}, expected 0xaa55",
                           static_cast<uint16_t>(h.boot_flag)));
  if (h.header != kHdrSMagic) return bad("not a bzImage: missing HdrS magic at 0x202");
  const uint16_t version = h.version;
  if (version < kMinBootProtocol)
    return bad(fmt::format("boot protocol {} too old: tern needs >= {}",
                           boot_protocol_string(version), boot_protocol_string(kMinBootProtocol)));

  const size_t header_end = 0x202 + size_t{file[kJumpOffsetByte]};
  if (header_end < kMinHeaderEnd || header_end > kMaxSetupHeaderEnd)
    return bad(
        fmt::format("malformed setup header: it ends at {:#x} (0x202 + byte at 0x201), "
                    "expected {:#x}..{:#x} for protocol {}",
                    header_end, kMinHeaderEnd, kMaxSetupHeaderEnd, boot_protocol_string(version)));
  if (file.size() < header_end)
    return bad(fmt::format("truncated: file is {} bytes, the setup header ends at {:#x}",
                           file.size(), header_end));

  if ((h.xloadflags & kXlfKernel64) == 0)
    return bad(
        fmt::format("kernel has no 64-bit entry point (XLF_KERNEL_64 clear in xloadflags "
                    "{:#06x}): tern boots 64-bit kernels only",
                    static_cast<uint16_t>(h.xloadflags)));
  if ((h.loadflags & kLoadedHigh) == 0)
    return bad("not a bzImage: LOADED_HIGH clear in loadflags (a zImage loaded at 0x10000)");

  BzImage k;
  k.version = version;
  k.setup_sects = h.setup_sects == 0 ? 4 : h.setup_sects;
  const size_t payload_offset = (size_t{k.setup_sects} + 1) * kSectorSize;
  if (payload_offset >= file.size())
    return bad(
        fmt::format("truncated: setup_sects={} puts the protected-mode kernel at {:#x} but "
                    "the file is only {} bytes",
                    k.setup_sects, payload_offset, file.size()));
  // syssize counts 16-byte paragraphs, rounded up (memtest86+ 6.10's x64.bin is 8 bytes short of
  // syssize * 16): a file that ends inside the last paragraph holds the whole kernel, as QEMU and
  // GRUB take it; a whole paragraph missing is a truncated file.
  const uint64_t payload_size = file.size() - payload_offset;
  const uint64_t syssize_bytes = uint64_t{h.syssize} * kSyssizeUnit;
  if (payload_size + (kSyssizeUnit - 1) < syssize_bytes)
    return bad(fmt::format(
        "truncated: the protected-mode kernel is {} bytes but syssize says {} ({} paragraphs "
        "of {} bytes)",
        payload_size, syssize_bytes, static_cast<uint32_t>(h.syssize), kSyssizeUnit));
  if (h.init_size == 0) return bad("malformed setup header: init_size is 0");
  const uint32_t align = h.kernel_alignment;
  if (h.relocatable_kernel != 0 && (align == 0 || (align & (align - 1)) != 0))
    return bad(
        fmt::format("malformed setup header: kernel_alignment {:#x} is not a power of two", align));

  k.loadflags = h.loadflags;
  k.xloadflags = h.xloadflags;
  k.init_size = h.init_size;
  k.cmdline_size = h.cmdline_size;
  k.initrd_addr_max = h.initrd_addr_max;
  k.kernel_alignment = align;
  k.relocatable_kernel = h.relocatable_kernel != 0;
  k.pref_address = h.pref_address;
  k.setup_header.assign(file.begin() + kSetupHeaderOffset, file.begin() + header_end);
  k.payload.assign(file.begin() + payload_offset, file.end());

  // kernel_version points (minus 0x200) at a NUL-terminated string inside the setup code.
  if (h.kernel_version != 0) {
    size_t at = size_t{h.kernel_version} + 0x200;
    if (at < payload_offset) {
      const auto* s = reinterpret_cast<const char*>(file.data() + at);
      k.kernel_version.assign(s, strnlen(s, payload_offset - at));
    }
  }
  return k;
}

}  // namespace tern::x86
