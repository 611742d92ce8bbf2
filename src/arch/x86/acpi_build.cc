#include "arch/x86/acpi_build.h"

#include <fmt/format.h>

#include <cstring>
#include <span>

#include "arch/x86/acpi.h"
#include "arch/x86/acpi_dsdt.h"
#include "arch/x86/acpi_tables.h"
#include "arch/x86/checksum.h"

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
constexpr uint16_t kPm1aCntOffset = kAcpiPm1aCntPort - kAcpiPm1aEvtPort;  // 4
constexpr uint16_t kPmTimerOffset = 8;  // PIIX4 PMTMR / ICH9 PM1_TMR

/// A growing byte image; offsets are from its start, which is placed 64-byte aligned.
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
  std::vector<uint8_t>& bytes() { return bytes_; }

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

Gas io_port(uint16_t port, uint8_t bits, uint8_t access) {
  return Gas{kGasSystemIo, bits, 0, access, port};
}

/// The FADT with DSDT/X_DSDT and X_FIRMWARE_CTRL holding the offsets of the DSDT and the FACS.
Fadt make_fadt(const AcpiConfig& c, uint32_t dsdt, uint32_t facs) {
  Fadt f{};
  f.header = make_header("FACP", sizeof(Fadt), kFadtRevision);
  // Fixed hardware, not HW_REDUCED_ACPI: on a hardware-reduced platform Linux replaces the legacy
  // PIC with a null one (acpi_reduced_hw_init), so no ISA IRQ (8250 IRQ 4, i8042 IRQ 1) can be
  // requested. The platform is always in ACPI mode (SMI_CMD = 0, SCI_EN reads 1); power-off is
  // SLP_TYP|SLP_EN in PM1a_CNT, reboot the reset register (RESET_REG_SUP).
  f.flags = kFadtWbinvd | kFadtPwrButton | kFadtSlpButton | kFadtResetRegSup;
  f.sci_int = static_cast<uint16_t>(kAcpiSciIrq);
  f.smi_cmd = 0;
  const auto evt = c.pm_base;
  const auto cnt = static_cast<uint16_t>(c.pm_base + kPm1aCntOffset);
  f.pm1a_evt_blk = evt;
  f.pm1a_cnt_blk = cnt;
  f.pm1_evt_len = 4;
  f.pm1_cnt_len = 2;
  f.x_pm1a_evt_blk = io_port(evt, 32, kGasAccessWord);
  f.x_pm1a_cnt_blk = io_port(cnt, 16, kGasAccessWord);
  if (c.pm_timer) {
    const auto tmr = static_cast<uint16_t>(c.pm_base + kPmTimerOffset);
    f.pm_tmr_blk = tmr;
    f.pm_tmr_len = 4;
    f.x_pm_tmr_blk = io_port(tmr, 32, kGasAccessDword);
  }
  // arch/x86/kernel/acpi/boot.c acpi_parse_fadt(): without the 8042 bit (revision >= 3) Linux
  // marks the i8042 absent; VGA-not-present stops VGA probing. The CMOS RTC is present.
  f.iapc_boot_arch = kBootArch8042 | kBootArchVgaNotPresent;
  f.reset_reg = io_port(c.reset_port, 8, kGasAccessByte);
  f.reset_value = c.reset_value;
  f.fadt_minor_version = kFadtMinorVersion;
  f.x_firmware_ctrl = facs;  // FIRMWARE_CTRL stays 0 when X_FIRMWARE_CTRL is used
  f.dsdt = dsdt;             // same value as X_DSDT: ACPICA accepts both
  f.x_dsdt = dsdt;
  return f;
}

uint32_t u32(size_t v) {
  return static_cast<uint32_t>(v);
}

/// Records the checksum of the table at `off` (its header gives the length).
void add_table_checksum(AcpiImage& img, size_t off) {
  TableHeader h;
  std::memcpy(&h, img.tables.data() + off, sizeof h);
  img.checksums.push_back({false, u32(off + offsetof(TableHeader, checksum)), u32(off), h.length});
}

}  // namespace

Result<AcpiImage> build_acpi_image(const AcpiConfig& c, AcpiRsdpPlacement placement) {
  if (c.num_vcpus == 0 || c.num_vcpus > kAcpiMaxVcpus)
    return fail("ACPI tables",
                fmt::format("{} vCPUs: the MADT describes 1..{}", c.num_vcpus, kAcpiMaxVcpus));
  const uint32_t num_vcpus = c.num_vcpus;

  std::vector<uint8_t> aml = aml_s5_package(kAcpiS5SleepType);
  const std::vector<uint8_t> pci_root =
      aml_pci_root(static_cast<uint32_t>(kPciMmioStart), static_cast<uint32_t>(kPciMmioEnd));
  aml.insert(aml.end(), pci_root.begin(), pci_root.end());
  const size_t madt_size = sizeof(Madt) + num_vcpus * sizeof(MadtLocalApic) + sizeof(MadtIoApic);
  constexpr size_t kXsdtEntries = 2;  // FADT, MADT

  AcpiImage img;
  Area area;
  const bool separate = placement == AcpiRsdpPlacement::kSeparate;
  const size_t rsdp_off = separate ? 0 : area.reserve(sizeof(Rsdp));
  const size_t xsdt_off = area.reserve(sizeof(TableHeader) + kXsdtEntries * sizeof(uint64_t));
  const size_t fadt_off = area.reserve(sizeof(Fadt));
  const size_t facs_off = area.reserve_aligned(sizeof(Facs), 64);
  const size_t dsdt_off = area.reserve(sizeof(TableHeader) + aml.size());
  const size_t madt_off = area.reserve(madt_size);
  img.rsdp_offset = u32(rsdp_off);
  img.xsdt = u32(xsdt_off);
  img.fadt = u32(fadt_off);
  img.facs = u32(facs_off);
  img.dsdt = u32(dsdt_off);
  img.madt = u32(madt_off);

  // DSDT: header + AML.
  area.put(dsdt_off, make_header("DSDT", sizeof(TableHeader) + aml.size(), kDsdtRevision));
  std::memcpy(area.bytes().data() + dsdt_off + sizeof(TableHeader), aml.data(), aml.size());

  Facs facs{};
  std::memcpy(facs.signature, "FACS", 4);
  facs.length = sizeof(Facs);
  facs.version = 2;
  area.put(facs_off, facs);

  area.put(fadt_off, make_fadt(c, img.dsdt, img.facs));
  img.pointers.push_back({false, u32(fadt_off + offsetof(Fadt, dsdt)), 4});
  img.pointers.push_back({false, u32(fadt_off + offsetof(Fadt, x_firmware_ctrl)), 8});
  img.pointers.push_back({false, u32(fadt_off + offsetof(Fadt, x_dsdt)), 8});

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

  // XSDT: header + 64-bit table addresses.
  area.put(xsdt_off, make_header("XSDT", sizeof(TableHeader) + kXsdtEntries * sizeof(uint64_t),
                                 kXsdtRevision));
  const size_t xsdt_entries = xsdt_off + sizeof(TableHeader);
  area.put(xsdt_entries, uint64_t{img.fadt});
  area.put(xsdt_entries + sizeof(uint64_t), uint64_t{img.madt});
  img.pointers.push_back({false, u32(xsdt_entries), 8});
  img.pointers.push_back({false, u32(xsdt_entries + sizeof(uint64_t)), 8});

  Rsdp rsdp{};
  std::memcpy(rsdp.signature, "RSD PTR ", 8);
  std::memcpy(rsdp.oem_id, kOemId, sizeof kOemId);
  rsdp.revision = 2;
  rsdp.length = sizeof(Rsdp);
  rsdp.xsdt_address = img.xsdt;
  img.tables = std::move(area.bytes());
  for (size_t t : {dsdt_off, fadt_off, madt_off, xsdt_off}) add_table_checksum(img, t);
  if (separate) {
    img.rsdp.resize(sizeof(Rsdp));
    std::memcpy(img.rsdp.data(), &rsdp, sizeof rsdp);
  } else {
    std::memcpy(img.tables.data() + rsdp_off, &rsdp, sizeof rsdp);
  }
  const size_t r = separate ? 0 : rsdp_off;
  img.pointers.push_back({separate, u32(r + offsetof(Rsdp, xsdt_address)), 8});
  img.checksums.push_back({separate, u32(r + offsetof(Rsdp, checksum)), u32(r), kRsdpV1Length});
  img.checksums.push_back(
      {separate, u32(r + offsetof(Rsdp, extended_checksum)), u32(r), sizeof(Rsdp)});
  return img;
}

void place_acpi_image(AcpiImage& img, uint64_t tables_base) {
  auto file = [&img](bool in_rsdp) -> std::vector<uint8_t>& {
    return in_rsdp ? img.rsdp : img.tables;
  };
  for (const AcpiPointerField& p : img.pointers) {
    auto& bytes = file(p.in_rsdp);
    TERN_CHECK(p.offset + p.size <= bytes.size());
    uint64_t v = 0;
    std::memcpy(&v, bytes.data() + p.offset, p.size);
    v += tables_base;
    std::memcpy(bytes.data() + p.offset, &v, p.size);
  }
  for (const AcpiChecksumField& c : img.checksums) {
    auto& bytes = file(c.in_rsdp);
    TERN_CHECK(c.start + c.length <= bytes.size() && c.offset < bytes.size());
    bytes[c.offset] = 0;
    bytes[c.offset] = checksum_for(std::span<const uint8_t>(bytes).subspan(c.start, c.length));
  }
}

}  // namespace tern::x86
