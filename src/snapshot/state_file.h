// The snapshot state file: device and KVM state of a paused VM as a list of sections.
//
// Layout (all integers little-endian, written with snap::ByteWriter):
//   "TERNSNAP"              8 bytes magic
//   u16 major, u16 minor    format version (kStateFormatMajor.kStateFormatMinor)
//   u32 header flags        0 in format 1.0; readers refuse any other value
//   u32 len + bytes         tern_version of the writer (at most kMaxTernVersionLen bytes)
//   u32 section count
//   per section: u32 id, u32 version, u64 length, `length` bytes
//   u32 crc32               zlib crc32 (IEEE 802.3) of every byte before it
// Readers validate the whole file (magic, major version, lengths, unique ids, checksum) before
// returning anything: the file is user input. Guest RAM lives in a separate memory file
// (memory_file.h).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/result.h"

namespace tern::snap {

/// Readers refuse files whose major version differs; minor versions only add compatible data.
inline constexpr uint16_t kStateFormatMajor = 1;
inline constexpr uint16_t kStateFormatMinor = 0;
/// Longest tern_version string the format allows, in bytes.
inline constexpr size_t kMaxTernVersionLen = 64;
/// Largest state file read_state_file() accepts, in bytes.
inline constexpr uint64_t kMaxStateFileSize = 256ull << 20;

/// One section: the state of one device or KVM object, encoded by its owner with ByteWriter.
struct StateSection {
  uint32_t id = 0;       ///< Which object this is (unique within a file).
  uint32_t version = 0;  ///< Version of the section's own encoding, checked by its reader.
  std::vector<uint8_t> data;
};

/// A parsed (or to-be-written) state file.
struct StateFile {
  std::string tern_version;              ///< TERN_VERSION of the writer.
  std::vector<StateSection> sections;    ///< In file order; ids unique.
  /// The section with `id`, or nullptr if absent.
  [[nodiscard]] const StateSection* find(uint32_t id) const;
};

/// Writes `f` atomically: PATH.tmp (mode 0600), fsync, rename over `path`, fsync of the
/// directory. Errors (ENOSPC, EACCES, a tern_version longer than 64 bytes, duplicate ids...) name
/// the path; a failed write removes PATH.tmp and never leaves a partial file at `path`.
[[nodiscard]] Result<void> write_state_file(const std::string& path, const StateFile& f);

/// Reads and validates `path` (a regular file of at most kMaxStateFileSize bytes); see
/// parse_state_file() for the checks. Errors name the path.
[[nodiscard]] Result<StateFile> read_state_file(const std::string& path);

/// Parses and validates a whole state file held in memory: magic, major version ("format
/// version X.Y, this tern reads 1.x"), header flags, lengths within the file ("truncated"), the
/// checksum ("checksum mismatch: the file is corrupt"), duplicate section ids. `name` (usually the
/// path) is used in error messages.
[[nodiscard]] Result<StateFile> parse_state_file(std::span<const uint8_t> bytes,
                                                 const std::string& name);

/// Encodes `f` in the layout above. Precondition (TERN_CHECK): tern_version at most 64 bytes and
/// section ids unique — write_state_file() checks both and returns an error instead.
[[nodiscard]] std::vector<uint8_t> serialize_state_file(const StateFile& f);

}  // namespace tern::snap
