#include "firmware/firmware_image.h"

#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cstring>

namespace tern::firmware {

namespace {

constexpr uint64_t kPage = 4096;
constexpr size_t kResetVectorBytes = 16;
// EFI_FIRMWARE_VOLUME_HEADER (PI spec vol. 3 §3.2.1): Signature "_FVH" at offset 40.
constexpr size_t kFvSignatureOffset = 40;

bool is_jump(uint8_t op) { return op == 0xEA || op == 0xE9 || op == 0xEB; }

/// Whether the 16 reset-vector bytes start with a jump the way x86 firmware does.
bool has_reset_jump(std::span<const uint8_t> v) {
  size_t i = 0;
  while (i < v.size() && v[i] == 0x90) ++i;  // NOP padding (OVMF: 90 90 E9 ...)
  if (i < v.size() && is_jump(v[i])) return true;
  // OVMF's protected-mode-aware vector: mov eax, cr0; test al, 1; jz ...; jmp ...
  if (v.size() >= 3 && v[0] == 0x0F && v[1] == 0x20 && v[2] == 0xC0)
    return std::any_of(v.begin() + 3, v.end(), is_jump);
  return false;
}

}  // namespace

const char* firmware_kind_name(FirmwareKind k) {
  return k == FirmwareKind::kUefi ? "uefi" : "bios";
}

Result<FirmwareInfo> check_firmware_image(std::span<const uint8_t> image) {
  const uint64_t size = image.size();
  if (size == 0) return fail("not firmware", "the file is empty");
  if (size % kPage != 0)
    return fail("not firmware", "its size (" + std::to_string(size) +
                                    " bytes) is not a multiple of 4 KiB");
  if (size > kMaxFirmwareBytes)
    return fail("not firmware", "it is larger than 16 MiB (" + std::to_string(size) + " bytes)");
  auto vector = image.last(kResetVectorBytes);
  if (!has_reset_jump(vector))
    return fail("not firmware",
                "no x86 reset-vector jump in its last 16 bytes (the code at 0xFFFFFFF0)");
  FirmwareInfo info;
  info.size = size;
  if (size >= kFvSignatureOffset + 4 &&
      std::memcmp(image.data() + kFvSignatureOffset, "_FVH", 4) == 0)
    info.kind = FirmwareKind::kUefi;
  return info;
}

std::string vars_template_for(const std::string& code_path) {
  size_t slash = code_path.rfind('/');
  size_t name = slash == std::string::npos ? 0 : slash + 1;
  size_t at = code_path.find("CODE", name);
  if (at == std::string::npos) return {};
  std::string vars = code_path;
  vars.replace(at, 4, "VARS");
  return ::access(vars.c_str(), R_OK) == 0 ? vars : std::string();
}

std::span<const uint8_t> isa_bios_alias(std::span<const uint8_t> image) {
  return image.last(std::min<size_t>(image.size(), kIsaBiosAliasBytes));
}

uint32_t image_crc32(std::span<const uint8_t> image) {
  uLong crc = ::crc32(0L, Z_NULL, 0);
  // zlib takes a uInt length: feed it in chunks (images are at most 16 MiB, but stay general).
  while (!image.empty()) {
    const size_t n = std::min<size_t>(image.size(), 1u << 30);
    crc = ::crc32(crc, image.data(), static_cast<uInt>(n));
    image = image.subspan(n);
  }
  return static_cast<uint32_t>(crc);
}

}  // namespace tern::firmware
