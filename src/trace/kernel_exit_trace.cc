// KernelExitTrace with libbpf: opens the embedded object (kernel_exits.bpf.c), writes the
// configuration into its .rodata, loads it (CO-RE against the kernel's BTF), attaches the six
// tracepoint programs and reads the maps. Every failure becomes an Error that names what is
// missing; libbpf's own output goes to the debug log (libbpf_log.h).
#include "trace/kernel_exit_trace.h"

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <linux/types.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "trace/kernel_exit_counts.h"
#include "trace/kernel_exits_bpf.h"
#include "trace/kernel_exits_bpf_object.h"  // generated: kKernelExitsBpfObject[]
#include "trace/libbpf_log.h"

namespace tern {
namespace {

constexpr const char* kOp = "in-kernel exit accounting";
constexpr const char* kPermission = "needs CAP_BPF and CAP_PERFMON (or root)";

/// The tracepoints, in attach order, with the program attached to each.
struct Tracepoint {
  const char* event;
  const char* program;
};
constexpr Tracepoint kTracepoints[] = {
    {"kvm_exit", "kx_exit"}, {"kvm_entry", "kx_entry"},           {"kvm_msr", "kx_msr"},
    {"kvm_pio", "kx_pio"},   {"kvm_page_fault", "kx_page_fault"}, {"kvm_inj_virq", "kx_inj_virq"},
};

/// 0, or the errno of stat(path).
int stat_errno(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 ? 0 : errno;
}

/// The tracefs directory libbpf resolves tracepoint ids in (libbpf 1.1 prefers the debugfs path
/// whenever it exists).
std::string tracefs_dir() {
  if (::access("/sys/kernel/debug/tracing", F_OK) == 0) return "/sys/kernel/debug/tracing";
  return "/sys/kernel/tracing";
}

/// What the kernel lacks, checked before libbpf runs (its own errors are vaguer).
Result<void> preflight() {
  std::string tracefs = tracefs_dir();
  int e = stat_errno(tracefs + "/events");
  if (e == EACCES || e == EPERM)
    return fail_code(e, kOp,
                     tracefs +
                         ": not readable (tracefs is root-only by default: needs root, or CAP_BPF "
                         "and CAP_PERFMON with access to tracefs)");
  if (e != 0) return fail(kOp, "no tracefs (mount -t tracefs nodev /sys/kernel/tracing)");
  for (const auto& tp : kTracepoints) {
    std::string dir = tracefs + "/events/kvm/" + tp.event;
    e = stat_errno(dir);
    if (e == EACCES || e == EPERM) return fail_code(e, kOp, dir + ": not readable (needs root)");
    if (e != 0)
      return fail(kOp, std::string("kernel has no kvm:") + tp.event +
                           " tracepoint (kvm module not loaded?)");
  }
  e = stat_errno("/sys/kernel/btf/vmlinux");
  if (e != 0) return fail(kOp, "no kernel BTF (/sys/kernel/btf/vmlinux; CONFIG_DEBUG_INFO_BTF)");
  // A loadable kvm module has /sys/module/kvm/initstate; its tracepoints' records are described
  // by its own BTF.
  if (stat_errno("/sys/module/kvm/initstate") == 0 && stat_errno("/sys/kernel/btf/kvm") != 0)
    return fail(kOp,
                "no BTF for the kvm module (/sys/kernel/btf/kvm; CONFIG_DEBUG_INFO_BTF_MODULES)");
  return {};
}

/// Writes `config` over the `config` variable of the object's .rodata (before load).
Result<void> set_config(bpf_object* obj, const kx_config& config) {
  bpf_map* rodata = nullptr;
  bpf_map* m;
  bpf_object__for_each_map(m, obj) {
    const char* name = bpf_map__name(m);
    size_t len = std::strlen(name);
    if (len >= 7 && std::strcmp(name + len - 7, ".rodata") == 0) rodata = m;
  }
  const btf* btf = bpf_object__btf(obj);
  if (!rodata || !btf) return fail(kOp, "embedded BPF object has no .rodata or no BTF");
  int sec = btf__find_by_name_kind(btf, ".rodata", BTF_KIND_DATASEC);
  if (sec < 0) return fail(kOp, "embedded BPF object: no .rodata section in its BTF");
  const btf_type* t = btf__type_by_id(btf, static_cast<__u32>(sec));
  const btf_var_secinfo* vars = btf_var_secinfos(t);
  for (unsigned i = 0; i < btf_vlen(t); ++i) {
    const btf_type* var = btf__type_by_id(btf, vars[i].type);
    if (std::strcmp(btf__name_by_offset(btf, var->name_off), "config") != 0) continue;
    size_t size = 0;
    const void* init = bpf_map__initial_value(rodata, &size);
    if (!init || vars[i].offset + sizeof config > size || vars[i].size != sizeof config)
      return fail(kOp, "embedded BPF object: config variable does not match kx_config");
    std::string data(static_cast<const char*>(init), size);
    std::memcpy(data.data() + vars[i].offset, &config, sizeof config);
    if (int err = bpf_map__set_initial_value(rodata, data.data(), data.size()); err != 0)
      return fail_code(-err, kOp, "setting the BPF program's configuration");
    return {};
  }
  return fail(kOp, "embedded BPF object: no config variable");
}

/// The Error of a failed bpf_object__load (err < 0).
Error load_error(int err, const LibbpfLogCapture& log) {
  int e = -err;
  if (e == EPERM) return Error{kOp, std::string("bpf(BPF_PROG_LOAD): ") + kPermission, e};
  std::string verifier = log.verifier_tail(3);
  if (!verifier.empty()) return Error{kOp, "BPF verifier rejected the program: " + verifier, 0};
  std::string last = log.last_message();
  return Error{kOp, "loading the BPF programs" + (last.empty() ? "" : ": " + last), e};
}

}  // namespace

struct KernelExitTrace::Impl {
  bpf_object* obj = nullptr;
  std::vector<bpf_link*> links;
  int reasons = -1, msrs = -1, pio = -1, npf = -1, irqs = -1, dropped = -1;

  ~Impl() {
    for (bpf_link* l : links) bpf_link__destroy(l);
    if (obj) bpf_object__close(obj);
  }
};

Result<std::unique_ptr<KernelExitTrace>> KernelExitTrace::start(const Options& options) {
  if (options.ram.size() > KX_MAX_RAM_RANGES)
    return fail(kOp, "ram: " + std::to_string(options.ram.size()) + " ranges, at most " +
                         std::to_string(KX_MAX_RAM_RANGES));
  if (options.tgid <= 0) return fail(kOp, "tgid: must be a process id");
  kx_config config{};
  config.tgid = static_cast<__u32>(options.tgid);
  config.ram_count = static_cast<__u32>(options.ram.size());
  for (size_t i = 0; i < options.ram.size(); ++i) {
    const auto& r = options.ram[i];
    if (r.start + r.size < r.start) return fail(kOp, "ram: range overflows");
    config.ram_start[i] = r.start;
    config.ram_end[i] = r.start + r.size;
  }
  TRY(preflight());

  LibbpfLogCapture log;
  auto impl = std::make_unique<Impl>();
  LIBBPF_OPTS(bpf_object_open_opts, open_opts, .object_name = "tern_kernel_exits");
  impl->obj = bpf_object__open_mem(kKernelExitsBpfObject, sizeof kKernelExitsBpfObject, &open_opts);
  if (!impl->obj) {
    int e = errno;
    impl->obj = nullptr;
    std::string last = log.last_message();
    return fail_code(e, kOp, "opening the embedded BPF object" + (last.empty() ? "" : ": " + last));
  }
  TRY(set_config(impl->obj, config));
  if (int err = bpf_object__load(impl->obj); err != 0) return tl::unexpected(load_error(err, log));

  for (const auto& tp : kTracepoints) {
    bpf_program* prog = bpf_object__find_program_by_name(impl->obj, tp.program);
    if (!prog) return fail(kOp, std::string("embedded BPF object has no program ") + tp.program);
    bpf_link* link = bpf_program__attach_tracepoint(prog, "kvm", tp.event);
    if (!link) {
      int e = errno;
      std::string what = std::string("attaching to kvm:") + tp.event;
      if (e == EPERM || e == EACCES) return fail_code(e, kOp, what + ": " + kPermission);
      std::string last = log.last_message();
      return fail_code(e, kOp, what + (last.empty() ? "" : ": " + last));
    }
    impl->links.push_back(link);
  }
  auto fd = [&](const char* name) {
    bpf_map* m = bpf_object__find_map_by_name(impl->obj, name);
    return m ? bpf_map__fd(m) : -1;
  };
  impl->reasons = fd("reasons");
  impl->msrs = fd("msrs");
  impl->pio = fd("pio");
  impl->npf = fd("npf");
  impl->irqs = fd("irqs");
  impl->dropped = fd("dropped");
  if (impl->reasons < 0 || impl->msrs < 0 || impl->pio < 0 || impl->npf < 0 || impl->irqs < 0 ||
      impl->dropped < 0)
    return fail(kOp, "embedded BPF object lacks one of its maps");
  return std::unique_ptr<KernelExitTrace>(new KernelExitTrace(std::move(impl)));
}

namespace {

/// Calls f(key, value) for every entry of the hash map `fd`.
template <class K, class V, class F>
Result<void> walk(int fd, const char* name, F f) {
  K key{}, next{};
  const void* prev = nullptr;
  while (bpf_map_get_next_key(fd, prev, &next) == 0) {
    V value{};
    if (bpf_map_lookup_elem(fd, &next, &value) == 0) f(next, value);
    key = next;
    prev = &key;
  }
  if (errno != ENOENT) return fail_errno(kOp, std::string("reading BPF map ") + name);
  return {};
}

}  // namespace

Result<KernelExitCounts> KernelExitTrace::read() const {
  KernelExitCounts c;
  TRY((walk<kx_reason_key, kx_reason_value>(
      impl_->reasons, "reasons", [&](const kx_reason_key& k, const kx_reason_value& v) {
        c.reasons.push_back({static_cast<ExitIsa>(k.isa), k.code, v.count, v.time_ns});
      })));
  TRY((walk<kx_msr_key, __u64>(impl_->msrs, "msrs", [&](const kx_msr_key& k, __u64 v) {
    c.msrs.push_back({k.msr, k.write != 0, v});
  })));
  TRY((walk<kx_pio_key, __u64>(impl_->pio, "pio", [&](const kx_pio_key& k, __u64 v) {
    c.pio.push_back({static_cast<uint16_t>(k.port), k.in != 0, v});
  })));
  TRY((walk<kx_npf_key, __u64>(impl_->npf, "npf", [&](const kx_npf_key& k, __u64 v) {
    c.npf.push_back({static_cast<NpfKind>(k.kind), k.gpa_page, v});
  })));
  TRY((walk<__u32, __u64>(impl_->irqs, "irqs", [&](__u32 k, __u64 v) {
    c.irqs.push_back({k, v});
  })));
  __u32 zero = 0;
  __u64 dropped = 0;
  if (bpf_map_lookup_elem(impl_->dropped, &zero, &dropped) != 0)
    return fail_errno(kOp, "reading BPF map dropped");
  c.dropped = dropped;
  sort_kernel_exit_counts(c);
  return c;
}

KernelExitTrace::KernelExitTrace(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
KernelExitTrace::~KernelExitTrace() = default;

}  // namespace tern
