#include "arch/x86/acpi.h"

#include <fmt/format.h>

#include <cstring>
#include <span>
#include <vector>

#include "arch/x86/acpi_dsdt.h"
#include "arch/x86/acpi_tables.h"
#include "arch/x86/checksum.h"
#include "arch/x86/layout.h"
#include "arch/x86/reset_vector.h"

namespace tern::x86 {

namespace {

using namespace acpi;

constexpr char kOemId[6] = {'T', 'E', 'R', 'N', ' ', ' '};
constexpr uint8_t kFadtRevision = 6;  // ACPI 6.0
constexpr uint8_t kFadtMinorVersion = 0;
constexpr uint8_t kMadtRevision = 4;  // ACPI 6.0 (5+ adds Online Capable semantics)
constexpr uint8_t kXsdtRevision = 1;
constexpr uint8_t kDsdtRevision = 2;  // 64-bit AML integers
constexpr uint8_t kMadtTypeLocalApic = 0;
constexpr uint8_t kMadtTypeIoApic = 1;
constexpr size_t kTableAlign = 16;

/// The ACPI area as a byte image starting at kAcpiStart, built in host memory and written once.
class Area {
 public:
  /// Reserves `size` zeroed bytes at the next 16-byte boundary; returns their offset.
  size_t reserve(size_t size) { return reserve_aligned(size, kTableAlign); }
  /// Same with an explicit power-of-two alignment (the FACS needs 64).
  size_t reserve_aligned(size_t size, size_t align) {
    size_t off = (bytes_.size() + align - 1) & ~(align - 1);
    bytes_.resize(off + size);
    return off;
  }
  template <class T>
  void put(size_t off, const T& v) {
    TERN_CHECK(off + sizeof(T) <= bytes_.size());
    std::memcpy(bytes_.data() + off, &v, sizeof(T));
  }
  std::span<uint8_t> at(size_t off, size_t len) { return std::span(bytes_).subspan(off, len); }
  static uint64_t gpa(size_t off) { return kAcpiStart + off; }
  [[nodiscard]] const std::vector<uint8_t>& bytes() const { return bytes_; }

 private:
  std::vector<uint8_t> bytes_;
};

TableHeader make_header(const char (&signature)[5], size_t length, uint8_t revision) {
  TableHeader h{};
  std::memcpy(h.signature, signature, 4);
  h.length = static_cast<uint32_t>(length);
  h.revision = revision;
  std::memcpy(h.oem_id, kOemId, sizeof kOemId);
  std::memcpy(h.oem_table_id, "TERN", 4);
  std::memcpy(h.oem_table_id + 4, signature, 4);
  h.oem_revision = 1;
  std::memcpy(h.creator_id, "TERN", 4);
  h.creator_revision = 1;
  return h;
}

/// Sets the checksum byte of the table at `off` (its header gives the length).
void seal_table(Area& area, size_t off) {
  TableHeader h;
  std::memcpy(&h, area.bytes().data() + off, sizeof h);
  auto table = area.at(off, h.length);
  table[offsetof(TableHeader, checksum)] = 0;
  table[offsetof(TableHeader, checksum)] = checksum_for(table);
}

Gas io_port(uint16_t port, uint8_t bits, uint8_t access) {
  return Gas{kGasSystemIo, bits, 0, access, port};
}

Fadt make_fadt(uint64_t dsdt_gpa, uint64_t facs_gpa) {
  Fadt f{};
  f.header = make_header("FACP", sizeof(Fadt), kFadtRevision);
  // Fixed hardware, not HW_REDUCED_ACPI: on a hardware-reduced platform Linux replaces the legacy
  // PIC with a null one (acpi_reduced_hw_init), so no ISA IRQ (8250 IRQ 4, i8042 IRQ 1) can be
  // requested. The platform is always in ACPI mode (SMI_CMD = 0, SCI_EN reads 1); power-off is
  // SLP_TYP|SLP_EN in PM1a_CNT, reboot the reset register (RESET_REG_SUP).
  f.flags = kFadtWbinvd | kFadtPwrButton | kFadtSlpButton | kFadtResetRegSup;
  f.sci_int = static_cast<uint16_t>(kAcpiSciIrq);
  f.smi_cmd = 0;
  f.pm1a_evt_blk = kAcpiPm1aEvtPort;
  f.pm1a_cnt_blk = kAcpiPm1aCntPort;
  f.pm1_evt_len = 4;
  f.pm1_cnt_len = 2;
  f.x_pm1a_evt_blk = io_port(kAcpiPm1aEvtPort, 32, kGasAccessWord);
  f.x_pm1a_cnt_blk = io_port(kAcpiPm1aCntPort, 16, kGasAccessWord);
  // arch/x86/kernel/acpi/boot.c acpi_parse_fadt(): without the 8042 bit (revision >= 3) Linux
  // marks the i8042 absent; VGA-not-present stops VGA probing. The CMOS RTC is present.
  f.iapc_boot_arch = kBootArch8042 | kBootArchVgaNotPresent;
  f.reset_reg = io_port(kAcpiResetPort, 8, kGasAccessByte);
  f.reset_value = kAcpiResetValue;
  f.fadt_minor_version = kFadtMinorVersion;
  f.x_firmware_ctrl = facs_gpa;  // FIRMWARE_CTRL stays 0 when X_FIRMWARE_CTRL is used
  f.dsdt = static_cast<uint32_t>(dsdt_gpa);  // same value as X_DSDT: ACPICA accepts both
  f.x_dsdt = dsdt_gpa;
  return f;
}

}  // namespace

Result<AcpiTablesInfo> write_acpi_tables(const GuestMemory& mem, uint32_t num_vcpus) {
  if (num_vcpus == 0 || num_vcpus > kAcpiMaxVcpus)
    return fail("ACPI tables",
                fmt::format("{} vCPUs: the MADT describes 1..{}", num_vcpus, kAcpiMaxVcpus));

  std::vector<uint8_t> aml = aml_s5_package(kAcpiS5SleepType);
  const std::vector<uint8_t> pci_root = aml_pci_root(static_cast<uint32_t>(kPciMmioStart),
                                                     static_cast<uint32_t>(kPciMmioEnd));
  aml.insert(aml.end(), pci_root.begin(), pci_root.end());
  const size_t madt_size = sizeof(Madt) + num_vcpus * sizeof(MadtLocalApic) + sizeof(MadtIoApic);
  constexpr size_t kXsdtEntries = 2;  // FADT, MADT

  Area area;
  const size_t rsdp_off = area.reserve(sizeof(Rsdp));
  const size_t xsdt_off = area.reserve(sizeof(TableHeader) + kXsdtEntries * sizeof(uint64_t));
  const size_t fadt_off = area.reserve(sizeof(Fadt));
  const size_t facs_off = area.reserve_aligned(sizeof(Facs), 64);
  const size_t dsdt_off = area.reserve(sizeof(TableHeader) + aml.size());
  const size_t madt_off = area.reserve(madt_size);
  AcpiTablesInfo info{Area::gpa(rsdp_off), Area::gpa(xsdt_off), Area::gpa(fadt_off),
                      Area::gpa(dsdt_off), Area::gpa(madt_off), Area::gpa(area.bytes().size())};
  if (info.end > kResetVectorAddr)
    return fail("ACPI tables",
                fmt::format("{} bytes at {:#x} would reach the reset vector at {:#x}",
                            area.bytes().size(), kAcpiStart, kResetVectorAddr));

  // DSDT: header + AML.
  area.put(dsdt_off, make_header("DSDT", sizeof(TableHeader) + aml.size(), kDsdtRevision));
  std::memcpy(area.at(dsdt_off + sizeof(TableHeader), aml.size()).data(), aml.data(), aml.size());
  seal_table(area, dsdt_off);

  Facs facs{};
  std::memcpy(facs.signature, "FACS", 4);
  facs.length = sizeof(Facs);
  facs.version = 2;
  area.put(facs_off, facs);

  area.put(fadt_off, make_fadt(info.dsdt, Area::gpa(facs_off)));
  seal_table(area, fadt_off);

  // MADT. No Interrupt Source Override: a PC firmware declares ISA IRQ 0 -> GSI 2 because its
  // PIT is wired to IOAPIC pin 2, but KVM's in-kernel PIT raises GSI 0 and KVM's default routing
  // sends GSI n to IOAPIC pin n. Without overrides Linux maps ISA IRQ n to GSI n
  // (mp_config_acpi_legacy_irqs), which is exactly that; an IRQ0 -> GSI 2 override would point the
  // timer at a pin nothing raises. The SCI (IRQ 9) keeps ACPI's default level/active-low
  // polarity; tern never raises it.
  Madt madt{};
  madt.header = make_header("APIC", madt_size, kMadtRevision);
  madt.local_apic_address = static_cast<uint32_t>(kLapicAddr);
  madt.flags = kMadtPcatCompat;
  area.put(madt_off, madt);
  size_t off = madt_off + sizeof(Madt);
  for (uint32_t i = 0; i < num_vcpus; ++i, off += sizeof(MadtLocalApic)) {
    area.put(off, MadtLocalApic{kMadtTypeLocalApic, sizeof(MadtLocalApic), static_cast<uint8_t>(i),
                                static_cast<uint8_t>(i), kMadtLapicEnabled});
  }
  area.put(off, MadtIoApic{kMadtTypeIoApic, sizeof(MadtIoApic), static_cast<uint8_t>(num_vcpus), 0,
                           static_cast<uint32_t>(kIoapicAddr), 0});
  seal_table(area, madt_off);

  // XSDT: header + 64-bit table addresses.
  area.put(xsdt_off, make_header("XSDT", sizeof(TableHeader) + kXsdtEntries * sizeof(uint64_t),
                                 kXsdtRevision));
  area.put(xsdt_off + sizeof(TableHeader), info.fadt);
  area.put(xsdt_off + sizeof(TableHeader) + sizeof(uint64_t), info.madt);
  seal_table(area, xsdt_off);

  Rsdp rsdp{};
  std::memcpy(rsdp.signature, "RSD PTR ", 8);
  std::memcpy(rsdp.oem_id, kOemId, sizeof kOemId);
  rsdp.revision = 2;
  rsdp.length = sizeof(Rsdp);
  rsdp.xsdt_address = info.xsdt;
  area.put(rsdp_off, rsdp);
  auto rsdp_bytes = area.at(rsdp_off, sizeof(Rsdp));
  rsdp_bytes[offsetof(Rsdp, checksum)] = checksum_for(rsdp_bytes.first(kRsdpV1Length));
  rsdp_bytes[offsetof(Rsdp, extended_checksum)] = checksum_for(rsdp_bytes);

  if (auto s = mem.slice(kAcpiStart, kBiosEnd - kAcpiStart); !s)
    return fail("ACPI tables", s.error().message());
  TRY(mem.write(kAcpiStart, area.bytes()));
  // A guest that reboots through the BIOS (reboot=b, or Linux's last fallback) jumps to the reset
  // vector: a stub there writes the reset register.
  TRY(write_reset_vector_stub(mem));
  return info;
}

}  // namespace tern::x86
