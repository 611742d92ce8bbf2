#include "firmware/fw_cfg/fw_cfg_acpi.h"

#include <cstring>

namespace tern::fw_cfg {

namespace {

constexpr uint32_t kTablesAlign = 64;  // the FACS inside must be 64-byte aligned
constexpr uint32_t kRsdpAlign = 16;    // OSes scan for the RSDP on 16-byte boundaries

/// One 128-byte loader entry under construction (little-endian fields at fixed offsets, QEMU
/// hw/acpi/bios-linker-loader.c BiosLinkerLoaderEntry).
class Entry {
 public:
  explicit Entry(uint32_t command) { put32(0, command); }
  void name(size_t at, std::string_view n) { std::memcpy(b_.data() + at, n.data(), n.size()); }
  void put8(size_t at, uint8_t v) { b_[at] = v; }
  void put32(size_t at, uint32_t v) {
    for (size_t i = 0; i < 4; ++i) b_[at + i] = static_cast<uint8_t>(v >> (8 * i));
  }
  void append_to(std::vector<uint8_t>& out) const { out.insert(out.end(), b_.begin(), b_.end()); }

 private:
  std::array<uint8_t, kLoaderEntrySize> b_{};
};

// Field offsets inside an entry: the u32 command, then the union.
constexpr size_t kFile1 = 4;                       // alloc.file, pointer.dest_file, cksum.file
constexpr size_t kFile2 = kFile1 + kFileNameSize;  // pointer.src_file
constexpr size_t kAllocAlign = kFile2;             // u32, then u8 zone
constexpr size_t kPointerOffset = kFile2 + kFileNameSize;  // u32, then u8 size
constexpr size_t kChecksumFields = kFile2;                 // u32 offset, u32 start, u32 length

void allocate(std::vector<uint8_t>& out, std::string_view file, uint32_t align, uint8_t zone) {
  Entry e(kLoaderAllocate);
  e.name(kFile1, file);
  e.put32(kAllocAlign, align);
  e.put8(kAllocAlign + 4, zone);
  e.append_to(out);
}

}  // namespace

Result<AcpiFwCfgFiles> build_acpi_fw_cfg_files(const x86::AcpiConfig& config) {
  ASSIGN_OR_RETURN(x86::AcpiImage img,
                   x86::build_acpi_image(config, x86::AcpiRsdpPlacement::kSeparate));
  AcpiFwCfgFiles f;
  // Both files first (each must be allocated before a command names it).
  allocate(f.loader, kAcpiTablesFile, kTablesAlign, kLoaderZoneHigh);
  allocate(f.loader, kAcpiRsdpFile, kRsdpAlign, kLoaderZoneFseg);
  auto file_of = [](bool in_rsdp) { return in_rsdp ? kAcpiRsdpFile : kAcpiTablesFile; };
  // Every pointer points into the tables; its bytes already hold the pointee's offset there.
  for (const x86::AcpiPointerField& p : img.pointers) {
    Entry e(kLoaderAddPointer);
    e.name(kFile1, file_of(p.in_rsdp));
    e.name(kFile2, kAcpiTablesFile);
    e.put32(kPointerOffset, p.offset);
    e.put8(kPointerOffset + 4, p.size);
    e.append_to(f.loader);
  }
  // After the pointers, since the checksums cover them (the firmware runs commands in order).
  for (const x86::AcpiChecksumField& c : img.checksums) {
    Entry e(kLoaderAddChecksum);
    e.name(kFile1, file_of(c.in_rsdp));
    e.put32(kChecksumFields, c.offset);
    e.put32(kChecksumFields + 4, c.start);
    e.put32(kChecksumFields + 8, c.length);
    e.append_to(f.loader);
  }
  f.tables = std::move(img.tables);
  f.rsdp = std::move(img.rsdp);
  return f;
}

Result<void> add_acpi_files(FwCfgItems& items, const x86::AcpiConfig& config) {
  ASSIGN_OR_RETURN(AcpiFwCfgFiles f, build_acpi_fw_cfg_files(config));
  TRY(items.add_file(kAcpiTablesFile, std::move(f.tables)));
  TRY(items.add_file(kAcpiRsdpFile, std::move(f.rsdp)));
  TRY(items.add_file(kTableLoaderFile, std::move(f.loader)));
  return {};
}

}  // namespace tern::fw_cfg
