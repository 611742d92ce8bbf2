// Byte layouts of the ACPI structures tern writes (ACPI 6.0, chapter 5.2). All packed,
// little-endian; offsets asserted against the spec.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tern::x86::acpi {

/// Root System Description Pointer, revision 2 (ACPI 5.2.5.3).
struct [[gnu::packed]] Rsdp {
  char signature[8];  // "RSD PTR "
  uint8_t checksum;   // first 20 bytes
  char oem_id[6];
  uint8_t revision;  // 2
  uint32_t rsdt_address;
  uint32_t length;  // 36
  uint64_t xsdt_address;
  uint8_t extended_checksum;  // all 36 bytes
  uint8_t reserved[3];
};
static_assert(sizeof(Rsdp) == 36);
static_assert(offsetof(Rsdp, xsdt_address) == 24 && offsetof(Rsdp, extended_checksum) == 32);
inline constexpr size_t kRsdpV1Length = 20;  ///< Bytes covered by Rsdp::checksum.

/// System Description Table Header (ACPI 5.2.6), 36 bytes at the start of every table.
struct [[gnu::packed]] TableHeader {
  char signature[4];
  uint32_t length;  // whole table, header included
  uint8_t revision;
  uint8_t checksum;  // whole table
  char oem_id[6];
  char oem_table_id[8];
  uint32_t oem_revision;
  char creator_id[4];
  uint32_t creator_revision;
};
static_assert(sizeof(TableHeader) == 36);

/// Generic Address Structure (ACPI 5.2.3.2).
struct [[gnu::packed]] Gas {
  uint8_t address_space_id;  // 0 SystemMemory, 1 SystemIO
  uint8_t register_bit_width;
  uint8_t register_bit_offset;
  uint8_t access_size;  // 1 byte, 2 word, 3 dword, 4 qword
  uint64_t address;
};
static_assert(sizeof(Gas) == 12);
inline constexpr uint8_t kGasSystemIo = 1;
inline constexpr uint8_t kGasAccessByte = 1;
inline constexpr uint8_t kGasAccessWord = 2;
inline constexpr uint8_t kGasAccessDword = 3;

/// Fixed ACPI Description Table, revision 6 (ACPI 6.0 table 5-34): 276 bytes.
struct [[gnu::packed]] Fadt {
  TableHeader header;  // "FACP"
  uint32_t firmware_ctrl;
  uint32_t dsdt;
  uint8_t reserved0;
  uint8_t preferred_pm_profile;
  uint16_t sci_int;
  uint32_t smi_cmd;
  uint8_t acpi_enable;
  uint8_t acpi_disable;
  uint8_t s4bios_req;
  uint8_t pstate_cnt;
  uint32_t pm1a_evt_blk;
  uint32_t pm1b_evt_blk;
  uint32_t pm1a_cnt_blk;
  uint32_t pm1b_cnt_blk;
  uint32_t pm2_cnt_blk;
  uint32_t pm_tmr_blk;
  uint32_t gpe0_blk;
  uint32_t gpe1_blk;
  uint8_t pm1_evt_len;
  uint8_t pm1_cnt_len;
  uint8_t pm2_cnt_len;
  uint8_t pm_tmr_len;
  uint8_t gpe0_blk_len;
  uint8_t gpe1_blk_len;
  uint8_t gpe1_base;
  uint8_t cst_cnt;
  uint16_t p_lvl2_lat;
  uint16_t p_lvl3_lat;
  uint16_t flush_size;
  uint16_t flush_stride;
  uint8_t duty_offset;
  uint8_t duty_width;
  uint8_t day_alrm;
  uint8_t mon_alrm;
  uint8_t century;
  uint16_t iapc_boot_arch;
  uint8_t reserved1;
  uint32_t flags;
  Gas reset_reg;
  uint8_t reset_value;
  uint16_t arm_boot_arch;
  uint8_t fadt_minor_version;
  uint64_t x_firmware_ctrl;
  uint64_t x_dsdt;
  Gas x_pm1a_evt_blk;
  Gas x_pm1b_evt_blk;
  Gas x_pm1a_cnt_blk;
  Gas x_pm1b_cnt_blk;
  Gas x_pm2_cnt_blk;
  Gas x_pm_tmr_blk;
  Gas x_gpe0_blk;
  Gas x_gpe1_blk;
  Gas sleep_control_reg;
  Gas sleep_status_reg;
  uint64_t hypervisor_vendor_identity;
};
static_assert(sizeof(Fadt) == 276);
static_assert(offsetof(Fadt, dsdt) == 40);
static_assert(offsetof(Fadt, iapc_boot_arch) == 109);
static_assert(offsetof(Fadt, flags) == 112);
static_assert(offsetof(Fadt, reset_reg) == 116);
static_assert(offsetof(Fadt, reset_value) == 128);
static_assert(offsetof(Fadt, fadt_minor_version) == 131);
static_assert(offsetof(Fadt, x_dsdt) == 140);
static_assert(offsetof(Fadt, x_pm1a_evt_blk) == 148);
static_assert(offsetof(Fadt, sleep_control_reg) == 244);
static_assert(offsetof(Fadt, sleep_status_reg) == 256);
static_assert(offsetof(Fadt, hypervisor_vendor_identity) == 268);

// FADT Flags (ACPI 6.0 table 5-35) and IA-PC boot architecture flags (table 5-36).
inline constexpr uint32_t kFadtWbinvd = 1u << 0;
inline constexpr uint32_t kFadtPwrButton = 1u << 4;  ///< Set: no fixed-feature power button.
inline constexpr uint32_t kFadtSlpButton = 1u << 5;  ///< Set: no fixed-feature sleep button.
inline constexpr uint32_t kFadtResetRegSup = 1u << 10;
inline constexpr uint32_t kFadtHwReducedAcpi = 1u << 20;
inline constexpr uint16_t kBootArch8042 = 1u << 1;
inline constexpr uint16_t kBootArchVgaNotPresent = 1u << 2;
inline constexpr uint16_t kBootArchCmosRtcNotPresent = 1u << 5;

/// Firmware ACPI Control Structure (ACPI 5.2.10): 64 bytes, 64-byte aligned, no checksum.
/// Required on fixed-hardware (not hardware-reduced) platforms.
struct [[gnu::packed]] Facs {
  char signature[4];  // "FACS"
  uint32_t length;    // 64
  uint32_t hardware_signature;
  uint32_t firmware_waking_vector;
  uint32_t global_lock;
  uint32_t flags;
  uint64_t x_firmware_waking_vector;
  uint8_t version;  // 2
  uint8_t reserved0[3];
  uint32_t ospm_flags;
  uint8_t reserved1[24];
};
static_assert(sizeof(Facs) == 64);

/// Multiple APIC Description Table header fields after the standard header (ACPI 5.2.12).
struct [[gnu::packed]] Madt {
  TableHeader header;  // "APIC"
  uint32_t local_apic_address;
  uint32_t flags;  // bit 0 PCAT_COMPAT
};
static_assert(sizeof(Madt) == 44);
inline constexpr uint32_t kMadtPcatCompat = 1u << 0;

/// MADT Processor Local APIC structure (type 0).
struct [[gnu::packed]] MadtLocalApic {
  uint8_t type;    // 0
  uint8_t length;  // 8
  uint8_t acpi_processor_uid;
  uint8_t apic_id;
  uint32_t flags;  // bit 0 Enabled
};
static_assert(sizeof(MadtLocalApic) == 8);
inline constexpr uint32_t kMadtLapicEnabled = 1u << 0;

/// MADT I/O APIC structure (type 1).
struct [[gnu::packed]] MadtIoApic {
  uint8_t type;    // 1
  uint8_t length;  // 12
  uint8_t io_apic_id;
  uint8_t reserved;
  uint32_t io_apic_address;
  uint32_t global_system_interrupt_base;
};
static_assert(sizeof(MadtIoApic) == 12);

}  // namespace tern::x86::acpi
