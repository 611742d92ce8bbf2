#include "nvme/prp.h"

#include <algorithm>
#include <array>
#include <cstring>

#include "base/checked.h"

namespace tern::nvme {

namespace {

/// PRP entries read from guest memory per GuestMemory::read (one 4 KiB page's worth), so a
/// larger memory page size never needs a larger buffer.
constexpr uint64_t kEntriesPerRead = 512;

/// Appends the host view of guest bytes [gpa, gpa + len), which lie in one memory page, to
/// `out`, extending the last iovec when the host bytes continue it.
tl::expected<void, Status> add_page(const GuestMemory& mem, uint64_t gpa, uint64_t len,
                                    std::vector<iovec>& out) {
  auto s = mem.slice(gpa, len);
  if (!s) return tl::unexpected(kDataTransferError);
  if (!out.empty()) {
    iovec& last = out.back();
    if (static_cast<uint8_t*>(last.iov_base) + last.iov_len == s->data()) {
      last.iov_len += s->size();
      return {};
    }
  }
  out.push_back(iovec{s->data(), s->size()});
  return {};
}

/// Walks the PRP list at `list` (guest-physical, dword aligned) for `remaining` bytes (> one
/// page) of whole pages, chaining through the last entry of each list page as needed.
tl::expected<void, Status> walk_list(const GuestMemory& mem, uint64_t list, uint64_t remaining,
                                     uint64_t page_size, std::vector<iovec>& out) {
  const uint64_t mask = page_size - 1;
  std::array<uint64_t, kEntriesPerRead> entries;
  // Data pages still to map; every list page supplies at least one (the first may supply none
  // when PRP2 points at its page's last entry), so the loop ends by length even when a list
  // chains back to itself.
  uint64_t pages = remaining / page_size + (remaining % page_size != 0 ? 1 : 0);
  while (pages > 0) {
    uint64_t avail = (page_size - (list & mask)) / sizeof(uint64_t);  // entries left in this page
    if (avail == 0) return tl::unexpected(kPrpOffsetInvalid);  // an entry would straddle pages
    // With more pages needed than this list page holds, its last entry chains to the next one.
    bool chains = pages > avail;
    uint64_t data_entries = chains ? avail - 1 : pages;
    uint64_t to_read = chains ? avail : pages;
    uint64_t next_list = 0;
    uint64_t done = 0;
    while (done < to_read) {
      uint64_t n = std::min<uint64_t>(to_read - done, kEntriesPerRead);
      auto r = mem.read(list + done * sizeof(uint64_t),
                        std::span<uint8_t>(reinterpret_cast<uint8_t*>(entries.data()),
                                           n * sizeof(uint64_t)));
      if (!r) return tl::unexpected(kDataTransferError);
      for (uint64_t i = 0; i < n; ++i) {
        uint64_t e = entries[i];
        if ((e & mask) != 0) return tl::unexpected(kPrpOffsetInvalid);
        if (done + i == data_entries) {  // the chain pointer
          next_list = e;
          continue;
        }
        uint64_t take = std::min(remaining, page_size);
        TRY(add_page(mem, e, take, out));
        remaining -= take;
      }
      done += n;
    }
    pages -= data_entries;
    if (chains) list = next_list;
  }
  return {};
}

/// Copies between `data` and the host buffers `iov` (which cover exactly data.size() bytes).
template <class Copy>
void for_each_piece(const std::vector<iovec>& iov, Copy copy) {
  size_t done = 0;
  for (const auto& v : iov) {
    copy(static_cast<uint8_t*>(v.iov_base), done, v.iov_len);
    done += v.iov_len;
  }
}

}  // namespace

tl::expected<void, Status> map_prps(const GuestMemory& mem, uint64_t prp1, uint64_t prp2,
                                    uint64_t len, const PrpLimits& limits,
                                    std::vector<iovec>& out) {
  out.clear();
  const uint64_t ps = limits.page_size;
  // A page size the controller should never hand us: refuse rather than mis-walk.
  if (ps < 4096 || (ps & (ps - 1)) != 0) return tl::unexpected(kInternalError);
  if (len == 0 || len > limits.max_transfer_bytes) return tl::unexpected(kInvalidField);
  const uint64_t mask = ps - 1;

  uint64_t off1 = prp1 & mask;
  if ((off1 & 3) != 0) return tl::unexpected(kPrpOffsetInvalid);
  uint64_t first = std::min(len, ps - off1);
  if (auto r = add_page(mem, prp1, first, out); !r) {
    out.clear();
    return r;
  }
  uint64_t remaining = len - first;
  if (remaining == 0) return {};

  tl::expected<void, Status> r;
  if (remaining <= ps) {
    if ((prp2 & mask) != 0) {
      r = tl::unexpected(kPrpOffsetInvalid);
    } else {
      r = add_page(mem, prp2, remaining, out);
    }
  } else if ((prp2 & 3) != 0) {
    r = tl::unexpected(kPrpOffsetInvalid);
  } else {
    r = walk_list(mem, prp2, remaining, ps, out);
  }
  if (!r) out.clear();
  return r;
}

tl::expected<void, Status> write_prps(const GuestMemory& mem, uint64_t prp1, uint64_t prp2,
                                      std::span<const uint8_t> data, const PrpLimits& limits) {
  std::vector<iovec> iov;
  TRY(map_prps(mem, prp1, prp2, data.size(), limits, iov));
  for_each_piece(iov, [&](uint8_t* host, size_t at, size_t n) {
    std::memcpy(host, data.data() + at, n);
  });
  return {};
}

tl::expected<void, Status> read_prps(const GuestMemory& mem, uint64_t prp1, uint64_t prp2,
                                     std::span<uint8_t> out, const PrpLimits& limits) {
  std::vector<iovec> iov;
  TRY(map_prps(mem, prp1, prp2, out.size(), limits, iov));
  for_each_piece(iov, [&](uint8_t* host, size_t at, size_t n) {
    std::memcpy(out.data() + at, host, n);
  });
  return {};
}

}  // namespace tern::nvme
