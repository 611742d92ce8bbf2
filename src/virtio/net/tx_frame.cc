#include "virtio/net/tx_frame.h"

#include <algorithm>
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
                                             TxHeaderBytes& header, std::vector<iovec>&& iov) {
  // §5.1.6.2: a transmitq chain is device-readable only (header, then the frame).
  if (chain.writable_bytes != 0) return tl::unexpected(TxDrop{TxChainError::kWritable, {}});
  for (const auto& s : chain.segments)
    if (s.writable) return tl::unexpected(TxDrop{TxChainError::kWritable, {}});
  const uint64_t total = chain.readable_bytes;
  if (total < kNetHdrSize) return tl::unexpected(TxDrop{TxChainError::kNoHeader, {}});
  if (total > kMaxFrameSize) return tl::unexpected(TxDrop{TxChainError::kTooLong, {}});
  if (total - kNetHdrSize < kEthHdrSize) return tl::unexpected(TxDrop{TxChainError::kRunt, {}});

  // The header is read from guest memory exactly once, into `header` (it may be split over
  // several descriptors); it is checked and sent from there. The frame's buffers follow.
  iov.clear();
  iov.push_back(iovec{header.data(), header.size()});
  size_t got = 0;
  for (const auto& s : chain.segments) {
    const size_t take = std::min(s.host.size(), kNetHdrSize - got);
    if (take != 0) std::memcpy(header.data() + got, s.host.data(), take);
    got += take;
    if (s.host.size() == take) continue;
    uint8_t* const p = s.host.data() + take;
    const size_t n = s.host.size() - take;
    // Buffers adjacent in host memory share one entry (never the header's: it is our copy).
    if (iov.size() > 1 &&
        static_cast<uint8_t*>(iov.back().iov_base) + iov.back().iov_len == p) {
      iov.back().iov_len += n;
      continue;
    }
    iov.push_back(iovec{p, n});
  }
  const VirtioNetHdr hdr = *decode_net_hdr(header);
  if (auto bad = check_tx_header(hdr, acked, static_cast<size_t>(total - kNetHdrSize)))
    return tl::unexpected(TxDrop{TxChainError::kBadHeader, bad});
  return TxFrame{hdr, std::move(iov), static_cast<size_t>(total)};
}

}  // namespace tern::net
