#include "firmware/pflash/pflash_device.h"

#include <linux/kvm.h>
#include <sys/mman.h>

#include <cstring>

#include "base/log.h"
#include "firmware/rom_region.h"

namespace tern {

namespace {
constexpr uint64_t kPage = 4096;
}  // namespace

Result<std::shared_ptr<PflashDevice>> PflashDevice::create(KvmVm* vm, VarsFile file, uint64_t gpa,
                                                           uint32_t slot, bool romd,
                                                           std::chrono::milliseconds quiet) {
  const uint64_t size = file.size();
  if (gpa % kPage != 0 || size % kPage != 0)
    return fail(kVarsField, file.path() + ": store at " + std::to_string(gpa) + " of " +
                                std::to_string(size) + " bytes is not in whole 4 KiB pages");
  auto dev = std::shared_ptr<PflashDevice>(new PflashDevice());
  void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return fail_errno("mmap", "pflash storage");
  dev->storage_.reset(static_cast<uint8_t*>(p));
  dev->storage_.get_deleter().len = size;
  std::memcpy(dev->storage_.get(), file.initial().data(), size);
  dev->flash_ = std::make_unique<CfiFlash>(std::span<uint8_t>(dev->storage_.get(), size),
                                           static_cast<uint32_t>(kPage));
  dev->vm_ = vm;
  dev->slot_ = slot;
  dev->romd_ = romd && vm != nullptr;
  dev->gpa_ = gpa;
  dev->size_ = size;
  dev->quiet_ = quiet;
  dev->file_ = std::make_unique<VarsFile>(std::move(file));
  if (dev->romd_) {
    TRY(require_readonly_mem(*vm));
    std::lock_guard lock(dev->mu_);
    TRY(dev->set_romd(true));
  }
  dev->persister_ = std::thread([d = dev.get()] { d->persister_loop(); });
  return dev;
}

PflashDevice::~PflashDevice() {
  stop_persister();
  if (auto r = flush(); !r) spdlog::error("{}", r.error().message());
}

void PflashDevice::stop_persister() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (persister_.joinable()) persister_.join();
}

VarsFile PflashDevice::release_file() {
  stop_persister();
  if (auto r = flush(); !r) spdlog::error("{}", r.error().message());
  std::lock_guard file_lock(file_mu_);
  TERN_CHECK(file_ != nullptr);
  VarsFile file = std::move(*file_);
  file_.reset();
  std::lock_guard lock(mu_);
  file.carry_over(std::vector<uint8_t>(storage_.get(), storage_.get() + size_));
  return file;
}

Result<void> PflashDevice::set_romd(bool mapped) {
  if (!romd_ || mapped == slot_mapped_) return {};
  // KVM ordering: see the file comment of pflash_device.h (mu_ is held by the caller).
  TRY(vm_->set_user_memory_region(slot_, gpa_, mapped ? size_ : 0, storage_.get(),
                                  mapped ? KVM_MEM_READONLY : 0));
  slot_mapped_ = mapped;
  ++romd_flips_;
  return {};
}

void PflashDevice::read(uint64_t offset, std::span<uint8_t> data) {
  std::lock_guard lock(mu_);
  flash_->read(offset, data);
  // Lazy ROMD: back in read-array mode, map the slot again only once reads (not another write
  // burst) follow.
  if (romd_ && !slot_mapped_ && flash_->read_array() && ++unmapped_array_reads_ >= kLazyRomdReads) {
    static RateLimit limit;
    if (auto r = set_romd(true); !r)
      TERN_LOG_RATELIMITED(limit, warn, "pflash: {}", r.error().message());
  }
}

void PflashDevice::write(uint64_t offset, std::span<const uint8_t> data) {
  std::lock_guard lock(mu_);
  const bool was_array = flash_->read_array();
  flash_->write(offset, data);
  after_write(was_array);
}

void PflashDevice::after_write(bool was_array) {
  static RateLimit limit;
  last_write_ = std::chrono::steady_clock::now();
  if (flash_->take_changed()) ++dirty_gen_;
  const bool now_array = flash_->read_array();
  unmapped_array_reads_ = 0;
  if (was_array && !now_array) {  // the mapping comes back lazily, in read()
    if (auto r = set_romd(false); !r) {
      // Unmapping failed: reads keep going to memory (status reads see array data); mapping
      // failed: every read exits (correct, only slower). Neither is the guest's fault.
      TERN_LOG_RATELIMITED(limit, warn, "pflash: {}", r.error().message());
    }
  }
  if (now_array) cv_.notify_all();
}

void PflashDevice::persister_loop() {
  std::unique_lock lock(mu_);
  auto backoff = quiet_;
  while (!stopping_) {
    if (dirty_gen_ == persisted_gen_ || !flash_->read_array()) {
      cv_.wait(lock);
      continue;
    }
    auto due = last_write_ + quiet_;
    if (std::chrono::steady_clock::now() < due) {
      cv_.wait_until(lock, due);
      continue;
    }
    lock.unlock();
    auto r = flush();
    lock.lock();
    if (!r) {
      static RateLimit limit;
      TERN_LOG_RATELIMITED(limit, warn, "pflash: {} (retrying)", r.error().message());
      backoff = std::min(backoff * 2, std::chrono::milliseconds(10000));
      cv_.wait_for(lock, backoff, [&] { return stopping_; });
    } else {
      backoff = quiet_;
    }
  }
}

Result<void> PflashDevice::flush() {
  std::lock_guard file_lock(file_mu_);
  if (!file_) return {};  // released for a reset in place: the next VM's device stores
  std::vector<uint8_t> copy;
  uint64_t gen = 0;
  {
    std::lock_guard lock(mu_);
    if (dirty_gen_ == persisted_gen_) return {};
    gen = dirty_gen_;
    copy.assign(storage_.get(), storage_.get() + size_);
  }
  if (auto r = file_->store(copy); !r) {
    ++store_errors_;
    return r;
  }
  ++stores_;
  std::lock_guard lock(mu_);
  persisted_gen_ = std::max(persisted_gen_, gen);
  return {};
}

Result<void> PflashDevice::reset() {
  std::lock_guard lock(mu_);
  flash_->reset();
  return set_romd(true);
}

PflashDevice::Stats PflashDevice::stats() const {
  Stats s;
  {
    std::lock_guard lock(mu_);
    s.flash = flash_->counters();
    s.romd_flips = romd_flips_;
  }
  std::lock_guard file_lock(file_mu_);
  s.stores = stores_;
  s.store_errors = store_errors_;
  return s;
}

std::vector<uint8_t> PflashDevice::contents() const {
  std::lock_guard lock(mu_);
  return {storage_.get(), storage_.get() + size_};
}

Result<std::shared_ptr<PflashDevice>> create_ovmf_vars_flash(KvmVm& vm, const OvmfVarsSpec& spec) {
  ASSIGN_OR_RETURN(VarsFile file, VarsFile::open(spec.file));
  const uint64_t size = file.size();
  if (spec.end_gpa < size || spec.end_gpa % kPage != 0)
    return fail(kVarsField, spec.file.path + ": a " + std::to_string(size) +
                                "-byte store cannot end at guest-physical " +
                                std::to_string(spec.end_gpa));
  return PflashDevice::create(&vm, std::move(file), spec.end_gpa - size, spec.slot, spec.romd,
                              spec.quiet);
}

}  // namespace tern
