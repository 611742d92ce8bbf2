#include "firmware/fw_cfg/fw_cfg_smbios.h"

#include <fmt/format.h>

#include <cstring>
#include <string>

#include "arch/x86/checksum.h"

namespace tern::fw_cfg {

namespace {

// Handles as QEMU (hw/smbios/smbios.c) numbers them: type T at T << 8, one more per instance.
uint16_t handle(uint8_t type, uint32_t instance = 0) {
  return static_cast<uint16_t>((uint32_t{type} << 8) + instance);
}
constexpr uint16_t kNoHandle = 0xFFFE;       // "not provided"
constexpr uint16_t kNoCacheHandle = 0xFFFF;  // processor cache handles: "no cache info"

/// One structure: a zeroed formatted area of `length` bytes with type, length and handle set,
/// then its strings (numbered from 1), then the double NUL.
class Structure {
 public:
  Structure(uint8_t type, uint8_t length, uint16_t h) : area_(length, 0) {
    area_[0] = type;
    area_[1] = length;
    put(2, h, 2);
  }
  void put(size_t off, uint64_t v, size_t width) {
    for (size_t i = 0; i < width; ++i) area_.at(off + i) = static_cast<uint8_t>(v >> (8 * i));
  }
  /// Adds `s` and stores its number at `off` (0 and no string for an empty one).
  void string(size_t off, const std::string& s) {
    if (s.empty()) return;
    strings_.push_back(s);
    area_.at(off) = static_cast<uint8_t>(strings_.size());
  }
  void append_to(std::vector<uint8_t>& out) const {
    out.insert(out.end(), area_.begin(), area_.end());
    for (const std::string& s : strings_) {
      out.insert(out.end(), s.begin(), s.end());
      out.push_back(0);
    }
    if (strings_.empty()) out.push_back(0);
    out.push_back(0);
  }

 private:
  std::vector<uint8_t> area_;
  std::vector<std::string> strings_;
};

constexpr uint64_t kKiB = 1024;
constexpr uint64_t kMiB = 1024 * kKiB;

}  // namespace

Result<SmbiosFiles> build_smbios_files(const SmbiosMachine& m) {
  if (m.num_vcpus == 0 || m.num_vcpus > 0xFF)
    return fail("SMBIOS", fmt::format("{} vCPUs (1..255)", m.num_vcpus));
  uint64_t ram = 0;
  for (const RegionSpec& r : m.ram) ram += r.size;
  if (ram == 0) return fail("SMBIOS", "no RAM");

  std::vector<Structure> s;
  // System Information (7.2), 2.4+ layout: 0x1B bytes. UUID all zero: "not present".
  s.emplace_back(1, 0x1B, handle(1));
  s.back().string(4, "tern");
  s.back().string(5, "tern virtual machine");
  s.back().put(0x18, 6, 1);  // wake-up type: power switch
  s.back().string(0x1A, "Virtual Machine");

  // System Enclosure or Chassis (7.4), 2.7+ layout with no contained elements: 0x16 bytes.
  s.emplace_back(3, 0x16, handle(3));
  s.back().string(4, "tern");
  s.back().put(5, 1, 1);    // type: other
  s.back().put(9, 3, 1);    // boot-up state: safe
  s.back().put(0xA, 3, 1);  // power supply state: safe
  s.back().put(0xB, 3, 1);  // thermal state: safe
  s.back().put(0xC, 2, 1);  // security status: unknown

  // Processor Information (7.5), 2.6+ layout: 0x2A bytes.
  for (uint32_t i = 0; i < m.num_vcpus; ++i) {
    s.emplace_back(4, 0x2A, handle(4, i));
    Structure& p = s.back();
    p.string(4, fmt::format("CPU {}", i));
    p.put(5, 3, 1);  // central processor
    p.put(6, 1, 1);  // family: other
    p.string(7, "tern");
    p.put(0x14, 2000, 2);  // max speed, MHz (unknown; QEMU's default)
    p.put(0x16, 2000, 2);  // current speed
    p.put(0x18, 0x41, 1);  // socket populated, CPU enabled
    p.put(0x19, 1, 1);     // upgrade: other
    p.put(0x1A, kNoCacheHandle, 2);
    p.put(0x1C, kNoCacheHandle, 2);
    p.put(0x1E, kNoCacheHandle, 2);
    p.put(0x23, 1, 1);  // core count
    p.put(0x24, 1, 1);  // cores enabled
    p.put(0x25, 1, 1);  // thread count
    p.put(0x26, 2, 2);  // characteristics: unknown
    p.put(0x28, 1, 2);  // family 2: other
  }

  // Physical Memory Array (7.17), 2.7+ layout: 0x17 bytes.
  s.emplace_back(16, 0x17, handle(16));
  s.back().put(4, 1, 1);  // location: other
  s.back().put(5, 3, 1);  // use: system memory
  s.back().put(6, 3, 1);  // error correction: none
  if (ram / kKiB < 0x80000000) {
    s.back().put(7, ram / kKiB, 4);
  } else {
    s.back().put(7, 0x80000000, 4);
    s.back().put(0xF, ram, 8);  // extended maximum capacity, bytes
  }
  s.back().put(0xB, kNoHandle, 2);
  s.back().put(0xD, 1, 2);  // one memory device

  // Memory Device (7.18), 2.8 layout: 0x28 bytes. One device with all of RAM.
  s.emplace_back(17, 0x28, handle(17));
  {
    Structure& d = s.back();
    d.put(4, handle(16), 2);
    d.put(6, kNoHandle, 2);
    d.put(8, 0xFFFF, 2);  // total width: unknown
    d.put(0xA, 0xFFFF, 2);
    const uint64_t mib = ram / kMiB;
    if (mib < 0x7FFF) {
      d.put(0xC, mib, 2);
    } else {
      d.put(0xC, 0x7FFF, 2);
      d.put(0x1C, mib, 4);  // extended size, MiB
    }
    d.put(0xE, 9, 1);  // form factor: DIMM
    d.string(0x10, "DIMM 0");
    d.put(0x12, 7, 1);  // memory type: RAM
    d.put(0x13, 2, 2);  // type detail: other
    d.string(0x17, "tern");
  }

  // Memory Array Mapped Address (7.20), 2.7+ layout: 0x1F bytes, one per RAM region.
  for (size_t i = 0; i < m.ram.size(); ++i) {
    const RegionSpec& r = m.ram[i];
    if (r.size == 0) continue;
    s.emplace_back(19, 0x1F, handle(19, static_cast<uint32_t>(i)));
    Structure& a = s.back();
    const uint64_t end = r.gpa + r.size - 1;
    if (end / kKiB < 0xFFFFFFFF) {
      a.put(4, r.gpa / kKiB, 4);
      a.put(8, end / kKiB, 4);
    } else {
      a.put(4, 0xFFFFFFFF, 4);
      a.put(8, 0xFFFFFFFF, 4);
      a.put(0xF, r.gpa, 8);
      a.put(0x17, end, 8);
    }
    a.put(0xC, handle(16), 2);
    a.put(0xE, 1, 1);  // partition width
  }

  // System Boot Information (7.33): 0x0B bytes, status 0 "no errors detected".
  s.emplace_back(32, 0x0B, handle(32));
  // End-of-Table (7.45).
  s.emplace_back(127, 4, handle(127));

  SmbiosFiles f;
  for (const Structure& st : s) st.append_to(f.tables);

  f.anchor.assign(24, 0);
  std::memcpy(f.anchor.data(), "_SM3_", 5);
  f.anchor[6] = 24;  // length
  f.anchor[7] = 3;   // major
  f.anchor[8] = 0;   // minor
  f.anchor[9] = 0;   // docrev
  f.anchor[10] = 1;  // entry point revision: 3.0
  for (size_t i = 0; i < 4; ++i)
    f.anchor[12 + i] = static_cast<uint8_t>(f.tables.size() >> (8 * i));
  f.anchor[5] = x86::checksum_for(f.anchor);
  return f;
}

Result<void> add_smbios_files(FwCfgItems& items, const SmbiosMachine& m) {
  ASSIGN_OR_RETURN(SmbiosFiles f, build_smbios_files(m));
  TRY(items.add_file("etc/smbios/smbios-anchor", std::move(f.anchor)));
  TRY(items.add_file("etc/smbios/smbios-tables", std::move(f.tables)));
  return {};
}

}  // namespace tern::fw_cfg
