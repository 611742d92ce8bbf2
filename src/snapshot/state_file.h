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
// Format 1.1 (this tern) adds the pairing section (sections.h) whose token the memory file's
// trailer repeats; 1.0 files (no pairing section, no trailer) are still read.
// Readers validate the whole file (magic, major version, lengths, unique ids, checksum) before
// returning anything: the file is user input. Guest RAM lives in a separate memory file
// (memory_file.h).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/result.h"
#include "snapshot/replace_file.h"

namespace tern::snap {

/// Readers refuse files whose major version differs; minor versions only add compatible data.
inline constexpr uint16_t kStateFormatMajor = 1;
inline constexpr uint16_t kStateFormatMinor = 1;
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
  /// Minor format version: what a parsed file says; serialize_state_file() always writes
  /// kStateFormatMinor.
  uint16_t format_minor = kStateFormatMinor;
  /// The section with `id`, or nullptr if absent.
  [[nodiscard]] const StateSection* find(uint32_t id) const;
};

/// Writes `f` into a ReplacementFile beside `path` (".NAME.tern-tmp-XXXXXX", mode 0600), fsynced
/// and closed but not yet renamed: commit() puts it in place. `path` must be a regular file or not
/// exist. Errors (ENOSPC, EACCES, a tern_version longer than 64 bytes, duplicate ids...) name the
/// path; on error nothing is left behind.
[[nodiscard]] Result<ReplacementFile> prepare_state_file(const std::string& path,
                                                         const StateFile& f);

/// prepare_state_file() then commit(): `path` is replaced atomically (rename, directory fsynced)
/// and never holds a partial file.
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
