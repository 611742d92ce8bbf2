#include "arch/x86/mptable.h"

#include <fmt/format.h>

#include <cstring>
#include <vector>

#include "arch/x86/checksum.h"
#include "arch/x86/layout.h"

namespace tern::x86 {

namespace {

// MP spec 1.4, chapter 4: all structures are byte-packed little-endian.
struct [[gnu::packed]] MpFloatingPointer {
  char signature[4];  // "_MP_"
  uint32_t physptr;   // MP configuration table address
  uint8_t length;     // in 16-byte paragraphs: 1
  uint8_t spec_rev;   // 4 = 1.4
  uint8_t checksum;
  uint8_t feature1;  // 0: a configuration table is present
  uint8_t feature2;  // bit 7 IMCRP clear: virtual-wire mode
  uint8_t feature3_5[3];
};
static_assert(sizeof(MpFloatingPointer) == 16);

struct [[gnu::packed]] MpConfigHeader {
  char signature[4];  // "PCMP"
  uint16_t base_table_length;
  uint8_t spec_rev;
  uint8_t checksum;
  char oem_id[8];
  char product_id[12];
  uint32_t oem_table_pointer;
  uint16_t oem_table_size;
  uint16_t entry_count;
  uint32_t lapic_address;
  uint16_t extended_table_length;
  uint8_t extended_table_checksum;
  uint8_t reserved;
};
static_assert(sizeof(MpConfigHeader) == 44);

struct [[gnu::packed]] MpProcessor {
  uint8_t type;  // 0
  uint8_t lapic_id;
  uint8_t lapic_version;
  uint8_t cpu_flags;  // bit 0 EN, bit 1 BP
  uint32_t cpu_signature;
  uint32_t feature_flags;
  uint32_t reserved[2];
};
static_assert(sizeof(MpProcessor) == 20);

struct [[gnu::packed]] MpBus {
  uint8_t type;  // 1
  uint8_t bus_id;
  char bus_type[6];
};
static_assert(sizeof(MpBus) == 8);

struct [[gnu::packed]] MpIoApic {
  uint8_t type;  // 2
  uint8_t ioapic_id;
  uint8_t ioapic_version;
  uint8_t flags;  // bit 0 EN
  uint32_t address;
};
static_assert(sizeof(MpIoApic) == 8);

/// I/O interrupt (type 3) and local interrupt (type 4) assignment entries share a layout.
struct [[gnu::packed]] MpInterrupt {
  uint8_t type;
  uint8_t interrupt_type;  // 0 INT, 1 NMI, 2 SMI, 3 ExtINT
  uint16_t flags;          // polarity bits 0-1, trigger bits 2-3; 0 = conforms to the bus
  uint8_t source_bus_id;
  uint8_t source_bus_irq;
  uint8_t dest_id;   // IOAPIC ID (type 3) or local APIC ID, 0xFF = all (type 4)
  uint8_t dest_pin;  // INTIN# (type 3) or LINTIN# (type 4)
};
static_assert(sizeof(MpInterrupt) == 8);

constexpr uint8_t kEntryProcessor = 0, kEntryBus = 1, kEntryIoApic = 2, kEntryIoInterrupt = 3,
                  kEntryLocalInterrupt = 4;
constexpr uint8_t kIntTypeInt = 0, kIntTypeNmi = 1, kIntTypeExtInt = 3;
constexpr uint8_t kCpuEnabled = 1, kCpuBsp = 2;
constexpr uint8_t kLapicVersion = 0x14;    // integrated xAPIC, what KVM's LAPIC reports
constexpr uint8_t kIoapicVersion = 0x11;   // KVM's in-kernel IOAPIC
constexpr uint32_t kCpuSignature = 0x600;  // family 6, model 0, stepping 0
constexpr uint32_t kCpuFeatures = (1u << 0) | (1u << 9);  // CPUID.1:EDX FPU | APIC
constexpr uint8_t kIsaBusId = 0;
constexpr uint32_t kIsaIrqs = 16;
constexpr uint8_t kAllLapics = 0xFF;

constexpr uint64_t kFixedSize = sizeof(MpFloatingPointer) + sizeof(MpConfigHeader) + sizeof(MpBus) +
                                sizeof(MpIoApic) + (kIsaIrqs + 2) * sizeof(MpInterrupt);

template <class T>
void append(std::vector<uint8_t>& out, const T& v) {
  const auto* p = reinterpret_cast<const uint8_t*>(&v);
  out.insert(out.end(), p, p + sizeof(T));
}

}  // namespace

uint64_t mptable_size(uint32_t num_vcpus) {
  return kFixedSize + uint64_t{num_vcpus} * sizeof(MpProcessor);
}

uint32_t mptable_max_vcpus() {
  return static_cast<uint32_t>((kLowRamEnd - kEbdaStart - kFixedSize) / sizeof(MpProcessor));
}

Result<MpTableInfo> write_mptable(const GuestMemory& mem, uint32_t num_vcpus) {
  if (num_vcpus == 0) return fail("MP table", "needs at least one vCPU");
  const uint64_t size = mptable_size(num_vcpus);
  if (kEbdaStart + size > kLowRamEnd)
    return fail("MP table", fmt::format("{} vCPUs need {} bytes but only {} fit in the EBDA at "
                                        "{:#x}..{:#x}: at most {} vCPUs",
                                        num_vcpus, size, kLowRamEnd - kEbdaStart, kEbdaStart,
                                        kLowRamEnd, mptable_max_vcpus()));
  MpTableInfo info;
  info.floating_pointer_gpa = kEbdaStart;
  info.config_table_gpa = kEbdaStart + sizeof(MpFloatingPointer);
  info.end = kEbdaStart + size;
  const uint8_t ioapic_id = static_cast<uint8_t>(num_vcpus);

  // The configuration table: header first (patched below), then the entries in the order the
  // spec recommends (processors, buses, IOAPICs, I/O interrupts, local interrupts).
  std::vector<uint8_t> table(sizeof(MpConfigHeader));
  uint16_t entries = 0;
  for (uint32_t i = 0; i < num_vcpus; ++i, ++entries) {
    MpProcessor p{};
    p.type = kEntryProcessor;
    p.lapic_id = static_cast<uint8_t>(i);
    p.lapic_version = kLapicVersion;
    p.cpu_flags = static_cast<uint8_t>(kCpuEnabled | (i == 0 ? kCpuBsp : 0));
    p.cpu_signature = kCpuSignature;
    p.feature_flags = kCpuFeatures;
    append(table, p);
  }
  MpBus bus{kEntryBus, kIsaBusId, {'I', 'S', 'A', ' ', ' ', ' '}};
  append(table, bus);
  ++entries;
  append(table,
         MpIoApic{kEntryIoApic, ioapic_id, kIoapicVersion, 1, static_cast<uint32_t>(kIoapicAddr)});
  ++entries;
  // KVM's default GSI routing sends GSI n to IOAPIC pin n, and its PIT raises GSI 0: identity.
  for (uint32_t irq = 0; irq < kIsaIrqs; ++irq, ++entries) {
    append(table, MpInterrupt{kEntryIoInterrupt, kIntTypeInt, 0, kIsaBusId,
                              static_cast<uint8_t>(irq), ioapic_id, static_cast<uint8_t>(irq)});
  }
  append(table, MpInterrupt{kEntryLocalInterrupt, kIntTypeExtInt, 0, kIsaBusId, 0, kAllLapics, 0});
  append(table, MpInterrupt{kEntryLocalInterrupt, kIntTypeNmi, 0, kIsaBusId, 0, kAllLapics, 1});
  entries += 2;

  MpConfigHeader h{};
  std::memcpy(h.signature, "PCMP", 4);
  h.base_table_length = static_cast<uint16_t>(table.size());
  h.spec_rev = 4;
  std::memcpy(h.oem_id, "TERN    ", 8);
  std::memcpy(h.product_id, "TERN VMM    ", 12);
  h.entry_count = entries;
  h.lapic_address = static_cast<uint32_t>(kLapicAddr);
  std::memcpy(table.data(), &h, sizeof h);
  table[offsetof(MpConfigHeader, checksum)] = checksum_for(table);

  MpFloatingPointer fp{};
  std::memcpy(fp.signature, "_MP_", 4);
  fp.physptr = static_cast<uint32_t>(info.config_table_gpa);
  fp.length = 1;
  fp.spec_rev = 4;
  fp.checksum = checksum_for(std::span(reinterpret_cast<const uint8_t*>(&fp), sizeof fp));

  TERN_CHECK(sizeof fp + table.size() == size);
  TRY(mem.slice(info.floating_pointer_gpa, size));  // all or nothing
  TRY(mem.write_obj(info.floating_pointer_gpa, fp));
  TRY(mem.write(info.config_table_gpa, table));
  return info;
}

}  // namespace tern::x86
