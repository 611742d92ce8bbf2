// The Linux x86 "zero page": struct boot_params and its embedded struct setup_header, as defined
// by Documentation/x86/boot.rst and arch/x86/include/uapi/asm/bootparam.h. Only the fields tern
// reads or writes are named; the rest is padding. Offsets are checked against the spec below.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tern::x86 {

// setup_header.loadflags (boot.rst "Details of header fields").
inline constexpr uint8_t kLoadedHigh = 1u << 0;  ///< Protected-mode code is loaded at 1 MiB.
inline constexpr uint8_t kCanUseHeap = 1u << 7;  ///< heap_end_ptr is valid.
// setup_header.xloadflags (protocol 2.12+).
inline constexpr uint16_t kXlfKernel64 = 1u << 0;  ///< 64-bit entry point at load address + 0x200.
inline constexpr uint16_t kXlfCanBeLoadedAbove4G = 1u << 1;

inline constexpr uint16_t kBootFlagMagic = 0xAA55;  ///< setup_header.boot_flag.
inline constexpr uint32_t kHdrSMagic = 0x53726448;  ///< "HdrS", setup_header.header.
inline constexpr uint8_t kTypeOfLoaderUndefined = 0xFF;
inline constexpr uint16_t kVidModeNormal = 0xFFFF;
inline constexpr size_t kSetupHeaderOffset = 0x1F1;  ///< In the bzImage file and in boot_params.
inline constexpr size_t kE820MaxEntriesZeroPage = 128;

/// struct setup_header (boot protocol 2.15 layout). Lives at 0x1F1 in both the bzImage file and
/// boot_params; field comments give that absolute offset.
struct [[gnu::packed]] SetupHeader {
  uint8_t setup_sects;             // 0x1F1
  uint16_t root_flags;             // 0x1F2
  uint32_t syssize;                // 0x1F4 (16-byte paragraphs)
  uint16_t ram_size;               // 0x1F8
  uint16_t vid_mode;               // 0x1FA
  uint16_t root_dev;               // 0x1FC
  uint16_t boot_flag;              // 0x1FE
  uint16_t jump;                   // 0x200
  uint32_t header;                 // 0x202
  uint16_t version;                // 0x206
  uint32_t realmode_swtch;         // 0x208
  uint16_t start_sys_seg;          // 0x20C
  uint16_t kernel_version;         // 0x20E
  uint8_t type_of_loader;          // 0x210
  uint8_t loadflags;               // 0x211
  uint16_t setup_move_size;        // 0x212
  uint32_t code32_start;           // 0x214
  uint32_t ramdisk_image;          // 0x218
  uint32_t ramdisk_size;           // 0x21C
  uint32_t bootsect_kludge;        // 0x220
  uint16_t heap_end_ptr;           // 0x224
  uint8_t ext_loader_ver;          // 0x226
  uint8_t ext_loader_type;         // 0x227
  uint32_t cmd_line_ptr;           // 0x228
  uint32_t initrd_addr_max;        // 0x22C
  uint32_t kernel_alignment;       // 0x230
  uint8_t relocatable_kernel;      // 0x234
  uint8_t min_alignment;           // 0x235
  uint16_t xloadflags;             // 0x236
  uint32_t cmdline_size;           // 0x238
  uint32_t hardware_subarch;       // 0x23C
  uint64_t hardware_subarch_data;  // 0x240
  uint32_t payload_offset;         // 0x248
  uint32_t payload_length;         // 0x24C
  uint64_t setup_data;             // 0x250
  uint64_t pref_address;           // 0x258
  uint32_t init_size;              // 0x260
  uint32_t handover_offset;        // 0x264
  uint32_t kernel_info_offset;     // 0x268
};
static_assert(sizeof(SetupHeader) == 0x26C - kSetupHeaderOffset);

#define TERN_HDR_AT(field, off) \
  static_assert(kSetupHeaderOffset + offsetof(SetupHeader, field) == (off), #field)
TERN_HDR_AT(setup_sects, 0x1F1);
TERN_HDR_AT(syssize, 0x1F4);
TERN_HDR_AT(vid_mode, 0x1FA);
TERN_HDR_AT(boot_flag, 0x1FE);
TERN_HDR_AT(jump, 0x200);
TERN_HDR_AT(header, 0x202);
TERN_HDR_AT(version, 0x206);
TERN_HDR_AT(kernel_version, 0x20E);
TERN_HDR_AT(type_of_loader, 0x210);
TERN_HDR_AT(loadflags, 0x211);
TERN_HDR_AT(code32_start, 0x214);
TERN_HDR_AT(ramdisk_image, 0x218);
TERN_HDR_AT(ramdisk_size, 0x21C);
TERN_HDR_AT(heap_end_ptr, 0x224);
TERN_HDR_AT(cmd_line_ptr, 0x228);
TERN_HDR_AT(initrd_addr_max, 0x22C);
TERN_HDR_AT(kernel_alignment, 0x230);
TERN_HDR_AT(relocatable_kernel, 0x234);
TERN_HDR_AT(xloadflags, 0x236);
TERN_HDR_AT(cmdline_size, 0x238);
TERN_HDR_AT(setup_data, 0x250);
TERN_HDR_AT(pref_address, 0x258);
TERN_HDR_AT(init_size, 0x260);
TERN_HDR_AT(handover_offset, 0x264);
#undef TERN_HDR_AT

/// struct boot_e820_entry: one BIOS-style memory map entry (20 bytes, packed).
struct [[gnu::packed]] BootE820Entry {
  uint64_t addr;
  uint64_t size;
  uint32_t type;
};
static_assert(sizeof(BootE820Entry) == 20);

/// struct boot_params, the 4 KiB "zero page" whose GPA the 64-bit entry point receives in RSI.
struct [[gnu::packed]] BootParams {
  uint8_t screen_info_etc[0x070];                     // 0x000 screen_info, apm, tboot, ist
  uint64_t acpi_rsdp_addr;                            // 0x070
  uint8_t pad_078[0x0C0 - 0x078];                     // 0x078
  uint32_t ext_ramdisk_image;                         // 0x0C0 high 32 bits of ramdisk_image
  uint32_t ext_ramdisk_size;                          // 0x0C4 high 32 bits of ramdisk_size
  uint32_t ext_cmd_line_ptr;                          // 0x0C8 high 32 bits of cmd_line_ptr
  uint8_t pad_0cc[0x1E8 - 0x0CC];                     // 0x0CC .. cc_blob, edid, efi_info, alt_mem_k
  uint8_t e820_entries;                               // 0x1E8
  uint8_t eddbuf_entries;                             // 0x1E9
  uint8_t edd_mbr_sig_buf_entries;                    // 0x1EA
  uint8_t kbd_status;                                 // 0x1EB
  uint8_t secure_boot;                                // 0x1EC
  uint8_t pad_1ed[2];                                 // 0x1ED
  uint8_t sentinel;                                   // 0x1EF must stay 0 (see boot.rst)
  uint8_t pad_1f0;                                    // 0x1F0
  SetupHeader hdr;                                    // 0x1F1
  uint8_t pad_26c[0x290 - 0x26C];                     // 0x26C room for header growth
  uint32_t edd_mbr_sig_buffer[16];                    // 0x290
  BootE820Entry e820_table[kE820MaxEntriesZeroPage];  // 0x2D0
  uint8_t pad_cd0[0x1000 - 0xCD0];                    // 0xCD0 eddbuf etc.
};
static_assert(sizeof(BootParams) == 4096);
static_assert(offsetof(BootParams, acpi_rsdp_addr) == 0x070);
static_assert(offsetof(BootParams, ext_ramdisk_image) == 0x0C0);
static_assert(offsetof(BootParams, ext_ramdisk_size) == 0x0C4);
static_assert(offsetof(BootParams, ext_cmd_line_ptr) == 0x0C8);
static_assert(offsetof(BootParams, e820_entries) == 0x1E8);
static_assert(offsetof(BootParams, sentinel) == 0x1EF);
static_assert(offsetof(BootParams, hdr) == kSetupHeaderOffset);
static_assert(offsetof(BootParams, edd_mbr_sig_buffer) == 0x290);
static_assert(offsetof(BootParams, e820_table) == 0x2D0);

/// Largest setup header a kernel may declare (it must not run into edd_mbr_sig_buffer).
inline constexpr size_t kMaxSetupHeaderEnd = offsetof(BootParams, edd_mbr_sig_buffer);

}  // namespace tern::x86
