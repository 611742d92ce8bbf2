// The TX path's guest input: a transmitq chain (virtio 1.2 §5.1.6.2) turned into the iovec
// written to the tap with one writev(2), after the header and size checks. The 12-byte header
// is sent from the copy that was checked (another vCPU may rewrite the guest's header between
// the check and the write: a double fetch would let GSO/checksum fields the driver never
// negotiated reach the tap); the frame after it is not copied: the iovec points at the chain's
// validated guest buffers.
#pragma once

#include <sys/uio.h>

#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "virtio/descriptor_chain.h"
#include "virtio/net/net_header.h"

namespace tern::net {

/// Why a TX chain is dropped (returned to the driver with used length 0, counted).
enum class TxChainError {
  kNoHeader,      ///< Fewer than kNetHdrSize device-readable bytes (e.g. a 5-byte chain).
  kRunt,          ///< Header but fewer than kEthHdrSize frame bytes (e.g. header only).
  kTooLong,       ///< More than kMaxFrameSize readable bytes (e.g. a 70 KB chain).
  kWritable,      ///< A device-writable buffer in a TX chain (§5.1.6.2: the driver MUST NOT).
  kBadHeader,     ///< check_tx_header() refused it (see `header`).
};
[[nodiscard]] std::string_view tx_chain_error_name(TxChainError e);

/// The checked header bytes, kept by the caller for writev(2) (TxFrame::iov[0] points at them).
using TxHeaderBytes = std::array<uint8_t, kNetHdrSize>;

/// A frame ready for writev(2) on the tap (whose vnet header size is kNetHdrSize).
struct TxFrame {
  VirtioNetHdr hdr;        ///< Decoded (even when split over descriptors).
  std::vector<iovec> iov;  ///< [0]: the caller's TxHeaderBytes (the checked copy); then the
                           ///< frame, pointing into guest memory (host-virtual).
  size_t bytes = 0;        ///< Sum of iov lengths (header included).
};

/// A dropped chain and why.
struct TxDrop {
  TxChainError error;
  std::optional<TxHeaderError> header;  ///< Set for kBadHeader.
};

/// Builds the frame of `chain` with the `acked` features. The header is copied into `header`
/// once, checked there, and sent from there (iov[0]): `header` must stay unchanged until the
/// iovec has been written. `iov` is reused storage (cleared and filled; the caller keeps it to
/// avoid an allocation per packet). Bounded: at most chain.segments.size() + 1 entries.
[[nodiscard]] tl::expected<TxFrame, TxDrop> parse_tx_chain(const virtio::DescriptorChain& chain,
                                                           uint64_t acked, TxHeaderBytes& header,
                                                           std::vector<iovec>&& iov = {});

}  // namespace tern::net
