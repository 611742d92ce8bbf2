#include "virtio/net/tx_frame.h"

#include <algorithm>
#include <array>
#include <cstring>

namespace tern::net {

std::string_view tx_chain_error_name(TxChainError e) {
  switch (e) {
    case TxChainError::kNoHeader: return "chain shorter than the virtio-net header";
    case TxChainError::kRunt: return "frame shorter than an Ethernet header";
    case TxChainError::kTooLong: return "frame longer than 65562 bytes";
    case TxChainError::kWritable: return "device-writable buffer in a TX chain";
    case TxChainError::kBadHeader: return "bad virtio-net header";
  }
  return "unknown TX chain error";
}

tl::expected<TxFrame, TxDrop> parse_tx_chain(const virtio::DescriptorChain& chain, uint64_t acked,
                                             std::vector<iovec>&& iov) {
  // §5.1.6.2: a transmitq chain is device-readable only (header, then the frame).
  if (chain.writable_bytes != 0) return tl::unexpected(TxDrop{TxChainError::kWritable, {}});
  for (const auto& s : chain.segments)
    if (s.writable) return tl::unexpected(TxDrop{TxChainError::kWritable, {}});
  const uint64_t total = chain.readable_bytes;
  if (total < kNetHdrSize) return tl::unexpected(TxDrop{TxChainError::kNoHeader, {}});
  if (total > kMaxFrameSize) return tl::unexpected(TxDrop{TxChainError::kTooLong, {}});
  if (total - kNetHdrSize < kEthHdrSize) return tl::unexpected(TxDrop{TxChainError::kRunt, {}});

  // The header may be split over several descriptors: gather its bytes first.
  std::array<uint8_t, kNetHdrSize> raw{};
  size_t got = 0;
  for (const auto& s : chain.segments) {
    if (got == kNetHdrSize) break;
    const size_t take = std::min(s.host.size(), kNetHdrSize - got);
    std::memcpy(raw.data() + got, s.host.data(), take);
    got += take;
  }
  const VirtioNetHdr hdr = *decode_net_hdr(raw);
  if (auto bad = check_tx_header(hdr, acked, static_cast<size_t>(total - kNetHdrSize)))
    return tl::unexpected(TxDrop{TxChainError::kBadHeader, bad});

  // The tap takes the header with the frame (TUNSETVNETHDRSZ kNetHdrSize): pass every buffer.
  iov.clear();
  // Buffers adjacent in host memory share one entry.
  for (const auto& s : chain.segments) {
    if (s.host.empty()) continue;
    if (!iov.empty() && static_cast<uint8_t*>(iov.back().iov_base) + iov.back().iov_len ==
                            s.host.data()) {
      iov.back().iov_len += s.host.size();
      continue;
    }
    iov.push_back(iovec{s.host.data(), s.host.size()});
  }
  return TxFrame{hdr, std::move(iov), static_cast<size_t>(total)};
}

}  // namespace tern::net
