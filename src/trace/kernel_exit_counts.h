// Pure helpers of KernelExitTrace: ordering of a reading (no libbpf, unit-tested).
#pragma once

#include "trace/kernel_exit_trace.h"

namespace tern {

/// Sorts every vector of `c` by count, descending; ties in a stable order of their keys (isa,
/// code / msr, access / port, dir / kind, page / vector), so that two readings list equal rows
/// alike.
void sort_kernel_exit_counts(KernelExitCounts& c);

}  // namespace tern
