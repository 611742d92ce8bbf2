#include "firmware/fw_cfg/fw_cfg_items.h"

#include <fmt/format.h>

#include <algorithm>

namespace tern::fw_cfg {

namespace {

void put_be(std::vector<uint8_t>& out, uint64_t v, size_t width) {
  for (size_t i = width; i-- > 0;) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

}  // namespace

FwCfgItems::FwCfgItems() {
  items_[kSignature] = {'Q', 'E', 'M', 'U'};
  const uint32_t id = kIdTraditional | kIdDma;
  items_[kId] = {static_cast<uint8_t>(id), 0, 0, 0};
  rebuild_directory();
}

Result<void> FwCfgItems::set_item(uint16_t key, std::vector<uint8_t> bytes) {
  const uint16_t k = key & ~kWriteChannel;
  if (k != key || k == kSignature || k == kId || k == kFileDir ||
      (k >= kFileFirst && k < kArchLocal))
    return fail("fw_cfg item", fmt::format("key {:#06x} is not a settable numbered item", key));
  if (bytes.size() > UINT32_MAX)
    return fail("fw_cfg item", fmt::format("key {:#06x}: {} bytes", key, bytes.size()));
  items_[k] = std::move(bytes);
  return {};
}

Result<void> FwCfgItems::set_item_le(uint16_t key, uint64_t value, size_t width) {
  if (width != 2 && width != 4 && width != 8)
    return fail("fw_cfg item", fmt::format("key {:#06x}: width {}", key, width));
  std::vector<uint8_t> b(width);
  for (size_t i = 0; i < width; ++i) b[i] = static_cast<uint8_t>(value >> (8 * i));
  return set_item(key, std::move(b));
}

Result<void> FwCfgItems::add_file(std::string_view name, std::vector<uint8_t> bytes) {
  auto refuse = [&](std::string_view why) {
    return fail("fw_cfg file", fmt::format("\"{}\": {}", name, why));
  };
  if (name.empty()) return refuse("empty name");
  if (name.size() >= kFileNameSize)
    return refuse(fmt::format("name of {} bytes (at most {})", name.size(), kFileNameSize - 1));
  if (name.find('\0') != std::string_view::npos) return refuse("name contains a NUL byte");
  if (bytes.size() > UINT32_MAX) return refuse(fmt::format("{} bytes", bytes.size()));
  if (files_.size() >= size_t{kFileLimit - kFileFirst}) return refuse("no file key left");
  auto it = std::lower_bound(files_.begin(), files_.end(), name,
                             [](const File& f, std::string_view n) { return f.name < n; });
  if (it != files_.end() && it->name == name) return refuse("already present");
  files_.insert(it, File{std::string(name), std::move(bytes)});
  rebuild_directory();
  return {};
}

void FwCfgItems::rebuild_directory() {
  std::vector<uint8_t> dir;
  dir.reserve(4 + files_.size() * kFileEntrySize);
  put_be(dir, files_.size(), 4);
  for (size_t i = 0; i < files_.size(); ++i) {
    put_be(dir, files_[i].bytes.size(), 4);
    put_be(dir, kFileFirst + i, 2);
    put_be(dir, 0, 2);
    const std::string& n = files_[i].name;
    dir.insert(dir.end(), n.begin(), n.end());
    dir.resize(dir.size() + kFileNameSize - n.size(), 0);
  }
  items_[kFileDir] = std::move(dir);
}

const std::vector<uint8_t>* FwCfgItems::find(uint16_t selector) const {
  const uint16_t k = selector & ~kWriteChannel;
  if (k >= kFileFirst && k < kFileLimit) {
    const size_t i = k - kFileFirst;
    return i < files_.size() ? &files_[i].bytes : nullptr;
  }
  auto it = items_.find(k);
  return it == items_.end() ? nullptr : &it->second;
}

std::optional<uint16_t> FwCfgItems::file_key(std::string_view name) const {
  for (size_t i = 0; i < files_.size(); ++i)
    if (files_[i].name == name) return static_cast<uint16_t>(kFileFirst + i);
  return std::nullopt;
}

const std::vector<uint8_t>* FwCfgItems::file(std::string_view name) const {
  auto key = file_key(name);
  return key ? find(*key) : nullptr;
}

std::vector<std::string> FwCfgItems::file_names() const {
  std::vector<std::string> names;
  for (const File& f : files_) names.push_back(f.name);
  return names;
}

}  // namespace tern::fw_cfg
