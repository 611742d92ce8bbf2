// VarsFile: the file behind OVMF's variable store (--firmware-vars PATH): validated, locked,
// created from the template on first use, and replaced atomically on every store.
//
// Durability: store() writes a temporary beside the file, fsyncs it, renames it over the file
// and fsyncs the directory (snap::ReplacementFile), so the path always names a complete store —
// the previous one or the new one — whatever instant tern is killed at, power loss included.
// A stray ".NAME.tern-tmp-XXXXXX" may remain after a kill; it is never read.
//
// Locking: an OFD write lock (block/image_lock.h), as for disk images, so two tern processes
// cannot run on one store. Each store locks the new inode before renaming it into place, so the
// path is never unlocked while this VarsFile lives.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/fd.h"
#include "base/result.h"

namespace tern {

/// The field every vars-file error names.
inline constexpr const char* kVarsField = "firmware-vars";

/// What to open.
struct VarsFileSpec {
  std::string path;            ///< --firmware-vars: the per-VM store
  std::string template_path;   ///< OVMF_VARS_4M.fd: copied to `path` when it does not exist;
                               ///< when set, `path` must have exactly its size. May be empty.
  uint32_t block_size = 4096;  ///< the flash erase-block size the size must be a multiple of
  uint64_t max_size = 0;       ///< bytes available below the code image (0: no limit)
};

class VarsFile {
 public:
  /// Opens (creating from the template when missing) and locks the store, and reads it. Errors
  /// name "firmware-vars" and the path: a directory, a missing parent directory, a read-only file
  /// or directory, a size that is zero / not a multiple of block_size / not the template's /
  /// larger than max_size, a missing template when the file does not exist yet, a lock held by
  /// another process. Nothing is created or changed when an error is returned.
  [[nodiscard]] static Result<VarsFile> open(const VarsFileSpec& spec);

  VarsFile(VarsFile&&) noexcept = default;
  VarsFile& operator=(VarsFile&&) noexcept = default;

  /// The contents read at open(), or handed to carry_over().
  [[nodiscard]] const std::vector<uint8_t>& initial() const { return initial_; }
  /// Reset in place: `contents` (exactly size() bytes, the flash as the guest left it) become
  /// initial(), what the next VM's flash starts from. The file is not written here.
  void carry_over(std::vector<uint8_t> contents);
  [[nodiscard]] uint64_t size() const { return initial_.size(); }
  [[nodiscard]] const std::string& path() const { return path_; }
  /// True when open() created the file from the template.
  [[nodiscard]] bool created() const { return created_; }

  /// Replaces the file with `contents` (exactly size() bytes) atomically and durably (see the
  /// file comment). On error the file holds its previous contents and no temporary remains.
  [[nodiscard]] Result<void> store(std::span<const uint8_t> contents);

 private:
  VarsFile() = default;
  std::string path_;    // as given (error messages)
  std::string target_;  // the file stores replace: path_ with symlinks resolved
  UniqueFd fd_;         // the current inode, holding the OFD write lock
  std::vector<uint8_t> initial_;
  bool created_ = false;
};

}  // namespace tern
