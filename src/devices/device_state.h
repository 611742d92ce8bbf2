// Helpers shared by the devices' save_state()/restore_state(): the leading per-device version and
// errors that name the device and the field (snapshot files are untrusted input).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/result.h"
#include "snapshot/codec.h"

namespace tern::devstate {

/// An invalid field in a device's saved state: "restore <device>: <field>: <detail>".
[[nodiscard]] inline tl::unexpected<Error> bad_field(std::string_view device,
                                                     std::string_view field,
                                                     const std::string& detail) {
  return fail("restore " + std::string(device), std::string(field) + ": " + detail);
}

/// Prefixes a codec error (truncation) with the device name.
template <class T>
[[nodiscard]] Result<T> named(std::string_view device, std::string_view field, Result<T> r) {
  if (!r)
    return fail("restore " + std::string(device),
                std::string(field) + ": " + r.error().message());
  return r;
}

/// Reads the leading u32 version and refuses anything but `want`.
[[nodiscard]] inline Result<void> expect_version(snap::ByteReader& r, std::string_view device,
                                                 uint32_t want) {
  ASSIGN_OR_RETURN(uint32_t v, named(device, "version", r.u32()));
  if (v != want)
    return bad_field(device, "version",
                     std::to_string(v) + " (this tern reads version " + std::to_string(want) + ")");
  return {};
}

}  // namespace tern::devstate
