// PflashDevice: OVMF's variable store as QEMU presents it — a CFI flash (cfi_flash.h) on the
// MMIO bus, in "ROMD" mode, persisted to a file (vars_file.h).
//
// ROMD (QEMU memory_region_rom_device_set_romd): while the flash is in read-array mode its
// storage is also a KVM_MEM_READONLY memslot, so guest reads are plain memory and only writes
// exit (KVM_EXIT_MMIO → write()). The first command write removes the memslot: every read now
// exits and is answered by the state machine (status, identifier, query). Back in read-array mode
// the slot is mapped again lazily, after kLazyRomdReads reads (QEMU's pflash_cfi02 does the same
// with 42): a removal + re-addition took 0.04-5.3 ms on the (loaded, nested) development host
// (KVM waits for SRCU grace periods), a read exit microseconds, and OVMF writes in bursts (0x10 +
// data per byte, then 0xFF, per QemuFlashWrite call, several calls per variable update).
//
// KVM ordering rules this depends on (the memslot is flipped from a vCPU thread, inside an MMIO
// exit, while other vCPUs run):
//  1. KVM_SET_USER_MEMORY_REGION may be called from any thread while vCPUs run. When it returns
//     the new memslot array is published (SRCU) and the old mappings zapped: no vCPU reads the
//     flash through the removed slot any more; a read that raced with the removal completed
//     before the command write, as a read on hardware completes before the next bus write.
//  2. Mode change and memslot change happen under mu_, together (the unmap in write(), the lazy
//     re-map in read(): both inside an MMIO exit). A vCPU whose read exits on the
//     removed slot takes mu_ in read() and sees the new mode; one that exits for a write does too.
//     KVM never waits for a thread in userspace, and mu_ is only taken outside KVM_RUN, so holding
//     mu_ across the ioctl cannot deadlock.
//  3. Storage bytes change only while the slot is removed (program/erase happen in command
//     modes), or with every vCPU paused (restore_state, reset). The storage is one host mapping
//     shared by the slot and the state machine: there is no copy to keep coherent.
//  4. The slot is read-only, so it is never written by the guest and never needs dirty logging;
//     snapshots carry the contents in save_state(), not in the memory file (which is guest RAM).
//
// Persistence: a background thread stores the contents to the file once the flash has been
// back in read-array mode with no write for `quiet` (default 250 ms), and flush() stores at once
// (pause, snapshot, clean exit; the destructor flushes too). Durability window: an update is on
// disk at most `quiet` + one file write (~528 KiB + 2 fsyncs) after OVMF finished it; a tern
// killed inside that window leaves the previous complete store, never a torn one.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>

#include "base/result.h"
#include "bus/bus_device.h"
#include "firmware/pflash/cfi_flash.h"
#include "firmware/pflash/vars_file.h"
#include "kvm/kvm_vm.h"
#include "memory/guest_memory.h"
#include "snapshot/codec.h"

namespace tern {

/// Where the OVMF variable store goes and how it is backed (create_ovmf_vars_flash()).
struct OvmfVarsSpec {
  VarsFileSpec file;     ///< path, template, block size, max size (errors: "firmware-vars")
  uint64_t end_gpa = 0;  ///< the store ends here: the code image's first byte (0xFFC84000
                         ///< for Debian's 4M build), so it starts at end_gpa - size
  uint32_t slot = 0;     ///< KVM memslot number for the ROMD mapping (not a RAM slot)
  bool romd = true;      ///< false: no memslot, every read exits (slower, simpler)
  std::chrono::milliseconds quiet{250};  ///< idle time before a store is written to the file
};

class PflashDevice : public BusDevice {
 public:
  /// Read exits in read-array mode after which the ROMD slot is mapped again.
  static constexpr uint32_t kLazyRomdReads = 32;
  /// Device counters (any thread).
  struct Stats {
    CfiFlash::Counters flash;
    uint64_t romd_flips = 0;    ///< memslot removals + re-additions
    uint64_t stores = 0;        ///< vars-file stores written
    uint64_t store_errors = 0;  ///< vars-file stores that failed (retried)
  };

  /// A device over `file`'s contents at `gpa` (4 KiB-aligned). `vm` null or !romd: no memslot.
  /// The ROMD slot is mapped before this returns. Starts the persister thread.
  [[nodiscard]] static Result<std::shared_ptr<PflashDevice>> create(
      KvmVm* vm, VarsFile file, uint64_t gpa, uint32_t slot, bool romd,
      std::chrono::milliseconds quiet);
  ~PflashDevice() override;

  [[nodiscard]] std::string_view name() const override { return "pflash"; }
  void read(uint64_t offset, std::span<uint8_t> data) override;
  void write(uint64_t offset, std::span<const uint8_t> data) override;

  /// First guest-physical address and size in bytes: insert into the MMIO bus as
  /// mmio.insert(dev, dev->gpa(), dev->size()).
  [[nodiscard]] uint64_t gpa() const { return gpa_; }
  [[nodiscard]] uint64_t size() const { return size_; }

  /// Stores the contents to the file now if they changed since the last store (pause, snapshot,
  /// clean exit). Errors name "firmware-vars" and the path.
  [[nodiscard]] Result<void> flush();
  /// Reset in place, when this device's VM is torn down (vCPUs joined): stops the persister,
  /// stores the contents if they changed (a failure is logged) and hands the file back with the
  /// current contents as its initial() (VarsFile::carry_over), so the next VM's flash starts
  /// where the guest left it. Afterwards flush() does nothing and the device must not serve the
  /// guest again.
  [[nodiscard]] VarsFile release_file();
  /// Guest reset (reboot in place): read-array mode, status 0x80, the ROMD slot mapped again.
  /// Contents stay (they are flash). Call with the vCPUs stopped.
  [[nodiscard]] Result<void> reset();
  /// Snapshot: mode, status and the whole contents (the vars file may move on after the save).
  void save_state(snap::ByteWriter& w) const;
  /// Restores what save_state() wrote (size must match this store); the contents become the
  /// saved ones and are stored to the file. Call with the vCPUs stopped. Errors name "pflash".
  [[nodiscard]] Result<void> restore_state(snap::ByteReader& r);

  [[nodiscard]] Stats stats() const;
  /// A copy of the current contents (tests, diagnostics).
  [[nodiscard]] std::vector<uint8_t> contents() const;

 private:
  PflashDevice() = default;
  Result<void> set_romd(bool mapped);  // mu_ held
  void after_write(bool was_array);    // mu_ held
  void persister_loop();
  void stop_persister();

  KvmVm* vm_ = nullptr;
  uint32_t slot_ = 0;
  bool romd_ = false;
  bool slot_mapped_ = false;
  uint64_t gpa_ = 0;
  uint64_t size_ = 0;
  std::unique_ptr<uint8_t, Unmapper> storage_;
  std::unique_ptr<CfiFlash> flash_;
  std::chrono::milliseconds quiet_{250};

  mutable std::mutex mu_;  // flash_, storage bytes, slot_mapped_, romd_flips_, the generations
  uint64_t romd_flips_ = 0;
  uint32_t unmapped_array_reads_ = 0;  // read exits in read-array mode since the last write
  uint64_t dirty_gen_ = 0;             // bumped by every change of the contents
  uint64_t persisted_gen_ = 0;         // the generation the file holds
  std::chrono::steady_clock::time_point last_write_{};
  std::condition_variable cv_;
  bool stopping_ = false;

  mutable std::mutex file_mu_;  // file_, stores_, store_errors_ (taken before mu_, never inside)
  std::unique_ptr<VarsFile> file_;
  uint64_t stores_ = 0;
  uint64_t store_errors_ = 0;
  std::thread persister_;
};

/// The factory the VM builder calls: opens/creates/locks the vars file (VarsFile::open), places the
/// store so it ends at spec.end_gpa (refused naming "firmware-vars" when it would not fit or
/// wrap), maps the ROMD memslot and starts persistence. Insert the result into the MMIO bus at
/// [gpa(), gpa()+size()).
[[nodiscard]] Result<std::shared_ptr<PflashDevice>> create_ovmf_vars_flash(
    KvmVm& vm, const OvmfVarsSpec& spec);

}  // namespace tern
