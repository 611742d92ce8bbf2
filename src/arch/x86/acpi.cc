#include "arch/x86/acpi.h"

#include <fmt/format.h>

#include "arch/x86/layout.h"
#include "arch/x86/reset_vector.h"

namespace tern::x86 {

Result<AcpiTablesInfo> write_acpi_tables(const GuestMemory& mem, uint32_t num_vcpus) {
  return write_acpi_tables(mem, AcpiConfig{.num_vcpus = num_vcpus});
}

Result<AcpiTablesInfo> write_acpi_tables(const GuestMemory& mem, const AcpiConfig& config) {
  ASSIGN_OR_RETURN(AcpiImage img, build_acpi_image(config, AcpiRsdpPlacement::kFirstInTables));
  auto gpa = [](uint32_t off) { return kAcpiStart + off; };
  AcpiTablesInfo info{gpa(img.rsdp_offset), gpa(img.xsdt), gpa(img.fadt),
                      gpa(img.dsdt),        gpa(img.madt), kAcpiStart + img.tables.size()};
  if (info.end > kResetVectorAddr)
    return fail("ACPI tables",
                fmt::format("{} bytes at {:#x} would reach the reset vector at {:#x}",
                            img.tables.size(), kAcpiStart, kResetVectorAddr));
  place_acpi_image(img, kAcpiStart);

  if (auto s = mem.slice(kAcpiStart, kBiosEnd - kAcpiStart); !s)
    return fail("ACPI tables", s.error().message());
  TRY(mem.write(kAcpiStart, img.tables));
  // A guest that reboots through the BIOS (reboot=b, or Linux's last fallback) jumps to the reset
  // vector: a stub there writes the reset register.
  TRY(write_reset_vector_stub(mem));
  return info;
}

}  // namespace tern::x86
