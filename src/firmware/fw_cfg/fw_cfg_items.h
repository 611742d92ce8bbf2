// FwCfgItems: the data behind QEMU's firmware configuration interface (fw_cfg) — numbered items
// and named files with their directory (QEMU docs/specs/fw_cfg.rst, "Firmware Configuration
// Items").
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace tern::fw_cfg {

// Selector keys (fw_cfg.rst; the numbered ones SeaBIOS src/fw/paravirt.c and OVMF
// QemuFwCfgLib read). Multi-byte numbered items are little-endian.
inline constexpr uint16_t kSignature = 0x0000;  ///< "QEMU".
inline constexpr uint16_t kId = 0x0001;         ///< le32 feature bitmap (kIdTraditional|kIdDma).
inline constexpr uint16_t kUuid = 0x0002;       ///< 16 bytes.
inline constexpr uint16_t kRamSize = 0x0003;    ///< le64 bytes of guest RAM.
inline constexpr uint16_t kNoGraphic = 0x0004;  ///< le16: 1 = no display (SeaBIOS: serial console).
inline constexpr uint16_t kNbCpus = 0x0005;     ///< le16 vCPUs present at boot.
inline constexpr uint16_t kBootMenu = 0x000e;   ///< le16: 1 = show the boot menu.
inline constexpr uint16_t kMaxCpus = 0x000f;    ///< le16 most vCPUs (SeaBIOS's "etc/max-cpus").
inline constexpr uint16_t kFileDir = 0x0019;    ///< The file directory (FWCfgFiles, big-endian).
inline constexpr uint16_t kFileFirst = 0x0020;  ///< First key given to a file.
/// Keys are 14 bits; bit 14 is the (obsolete) write channel, bit 15 marks architecture items.
inline constexpr uint16_t kWriteChannel = 0x4000;
inline constexpr uint16_t kArchLocal = 0x8000;
/// File keys run from kFileFirst up to (not including) this: generic items end at 0x4000.
inline constexpr uint16_t kFileLimit = 0x4000;

inline constexpr uint32_t kIdTraditional = 1u << 0;  ///< Selector/data ports (always set).
inline constexpr uint32_t kIdDma = 1u << 1;          ///< The DMA interface at 0x514.

/// FWCfgFile::name is 56 bytes, NUL-terminated: names are 1..55 bytes.
inline constexpr size_t kFileNameSize = 56;
/// One directory entry: be32 size, be16 select, be16 reserved, char name[56].
inline constexpr size_t kFileEntrySize = 64;

/// The item table a FwCfgDevice serves, built once before the guest runs (not thread-safe for
/// writes; FwCfgDevice only reads it).
///
/// Always holds kSignature ("QEMU"), kId (traditional | DMA) and kFileDir. Files are kept sorted
/// by name, as QEMU does since 2.5 (fw_cfg_add_file_callback inserts in name order): the i-th
/// file by name gets key kFileFirst + i, so adding a file renumbers the ones after it. The
/// directory item (be32 count, then one 64-byte FWCfgFile per file in key order) is rebuilt on
/// every add.
class FwCfgItems {
 public:
  FwCfgItems();

  /// Sets numbered item `key` (below kFileFirst, or an architecture item >= kArchLocal; not
  /// kSignature, kId or kFileDir, which the table owns). Errors (op "fw_cfg item") name the key.
  [[nodiscard]] Result<void> set_item(uint16_t key, std::vector<uint8_t> bytes);
  /// A little-endian integer item of `width` bytes (2, 4 or 8), e.g. kNbCpus as le16.
  [[nodiscard]] Result<void> set_item_le(uint16_t key, uint64_t value, size_t width);

  /// Adds file `name` (1..55 bytes, no NUL) with `bytes` (at most 4 GiB - 1). Refused (op
  /// "fw_cfg file", naming the file) when the name is empty, too long, has a NUL, is already
  /// present, or the 0x3FE0 file keys are used up.
  [[nodiscard]] Result<void> add_file(std::string_view name, std::vector<uint8_t> bytes);

  /// The item a selector value reaches (the write-channel bit ignored, as QEMU does), or
  /// nullptr for a key with no item (reads as zeros).
  [[nodiscard]] const std::vector<uint8_t>* find(uint16_t selector) const;
  /// The key of file `name`, if present.
  [[nodiscard]] std::optional<uint16_t> file_key(std::string_view name) const;
  /// File contents by name, or nullptr.
  [[nodiscard]] const std::vector<uint8_t>* file(std::string_view name) const;
  /// File names in key order (sorted).
  [[nodiscard]] std::vector<std::string> file_names() const;
  [[nodiscard]] size_t file_count() const { return files_.size(); }

 private:
  void rebuild_directory();

  struct File {
    std::string name;
    std::vector<uint8_t> bytes;
  };
  std::map<uint16_t, std::vector<uint8_t>> items_;  // numbered items, kFileDir included
  std::vector<File> files_;  // sorted by name: files_[i] has key kFileFirst + i
};

}  // namespace tern::fw_cfg
