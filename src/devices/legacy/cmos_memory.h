// CMOS memory-size bytes: the PC BIOS convention firmware falls back to when fw_cfg gives no
// memory map (SeaBIOS src/fw/paravirt.c, OVMF PlatformInitLib Cmos.c / MemDetect.c).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "devices/legacy/cmos_rtc.h"

namespace tern {

/// The guest's memory as the CMOS describes it.
struct CmosMemoryLayout {
  uint64_t below_4g = 0;  ///< RAM bytes from 0 up to the 32-bit hole.
  uint64_t above_4g = 0;  ///< RAM bytes from 4 GiB.
  unsigned cpus = 1;      ///< vCPUs at boot (1..256).
};

/// The (index, value) pairs to store, in index order:
/// - 15h/16h base memory in KiB (640 when there is that much), low byte first;
/// - 17h/18h and 30h/31h extended memory above 1 MiB in KiB (capped at FFFFh);
/// - 34h/35h memory above 16 MiB below 4 GiB in 64 KiB units (capped at FFFFh);
/// - 5Bh-5Dh memory above 4 GiB in 64 KiB units (24 bits);
/// - 5Fh number of CPUs minus one;
/// - 2Eh/2Fh the standard checksum: the 16-bit sum of bytes 10h-2Dh, high byte at 2Eh — over
///   the bytes above plus the other bytes of 10h-2Dh as `cmos` holds them (0 for a fresh one).
[[nodiscard]] std::vector<std::pair<uint8_t, uint8_t>> cmos_memory_bytes(
    const CmosMemoryLayout& layout, const CmosRtc& cmos);

/// Stores cmos_memory_bytes() into `cmos` (the firmware boot path, before vCPUs run; the bytes
/// are CMOS RAM, so they survive a guest reset).
void set_cmos_memory(CmosRtc& cmos, const CmosMemoryLayout& layout);

}  // namespace tern
