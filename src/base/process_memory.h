// Process-wide memory settings of the tern process itself (not guest RAM): how glibc's malloc
// keeps and returns memory, and how big thread stacks are. tern's memory outside guest RAM is a
// product figure (goal: <= 5 MiB for an idle guest; the accounting is in docs/boot.md).
#pragma once

#include <cstddef>

namespace tern {

/// Blocks of at least this many bytes are mmapped and unmapped again on free. glibc's default is
/// the same 128 KiB but *dynamic*: freeing an mmapped block raises the threshold to that block's
/// size (up to 32 MiB) and the trim threshold to twice that, so the next kernel image or initrd
/// buffer lands on the heap and stays resident after it is freed. Measured (256 MiB idle guest,
/// stock kernel + busybox initramfs): heap Rss 15 936 KiB with the default, 184 KiB fixed.
inline constexpr size_t kMallocMmapThresholdBytes = 128 * 1024;
/// The heap's free top is given back once it exceeds this many bytes (fixed: see above).
inline constexpr size_t kMallocTrimThresholdBytes = 128 * 1024;
/// At most this many malloc arenas (glibc's default: 8 per CPU, each a 64 MiB reservation whose
/// freed pages stay resident). tern's threads allocate little off the main thread.
inline constexpr int kMallocArenaMax = 2;
/// Default stack size of the threads tern starts (std::thread: vCPUs, console writer, signal
/// watcher, device workers, API server). glibc's default is RLIMIT_STACK, 8 MiB: such a stack can
/// hold a 2 MiB-aligned range, and with transparent huge pages enabled ("always", Debian's default)
/// its first touch faults in a whole 2 MiB page (measured: 0, 2 or 4 MiB of stacks resident,
/// depending on where the mappings landed). A stack of at most 1 MiB never gets a huge page.
/// tern's threads need tens of KiB (JSON bodies are depth-limited, no recursion on guest input).
inline constexpr size_t kThreadStackBytes = 1024 * 1024;

/// Applies the above (mallopt(3), pthread_setattr_default_np(3)). Call first in main(), before
/// any thread exists. Returns false if glibc refused a setting (its default stays: a bigger
/// footprint, nothing worse).
bool tune_process_memory();

}  // namespace tern
