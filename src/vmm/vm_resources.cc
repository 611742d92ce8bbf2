#include "vmm/vm_resources.h"

#include "api/api_parser.h"

namespace tern {

MachineConfig VmResources::machine_config() const {
  // smt and track_dirty_pages only take their defaults (check_machine_config).
  MachineConfig m;
  m.vcpu_count = vcpus;
  m.mem_size_mib = memory_bytes >> 20;
  m.huge_pages = huge_pages;
  m.memory_backend = memory_backend;
  m.cpu_affinity = cpu_affinity;
  return m;
}

void VmResources::set_machine_config(const MachineConfig& m) {
  vcpus = m.vcpu_count;
  memory_bytes = m.mem_size_mib << 20;
  huge_pages = m.huge_pages;
  memory_backend = m.memory_backend;
  cpu_affinity = m.cpu_affinity;
}

Result<void> VmResources::patch_machine_config(const MachineConfigPatch& p) {
  MachineConfig m = machine_config();
  if (p.vcpu_count) m.vcpu_count = *p.vcpu_count;
  if (p.mem_size_mib) m.mem_size_mib = *p.mem_size_mib;
  if (p.smt) m.smt = *p.smt;
  if (p.track_dirty_pages) m.track_dirty_pages = *p.track_dirty_pages;
  if (p.huge_pages) m.huge_pages = *p.huge_pages;
  if (p.memory_backend) m.memory_backend = p.memory_backend;
  if (p.cpu_affinity) m.cpu_affinity = *p.cpu_affinity;
  TRY(check_machine_config(m, ""));
  // A patch that leaves the size alone keeps a --memory size that is not a whole MiB.
  if (p.mem_size_mib) memory_bytes = m.mem_size_mib << 20;
  vcpus = m.vcpu_count;
  huge_pages = m.huge_pages;
  memory_backend = m.memory_backend;
  cpu_affinity = m.cpu_affinity;
  return {};
}

Result<void> VmResources::put_drive(const DriveSpec& d) {
  for (auto& existing : drives) {
    if (existing.drive_id == d.drive_id) {
      existing = d;
      return {};
    }
    if (existing.is_root_device && d.is_root_device)
      return fail("is_root_device",
                  "drive \"" + existing.drive_id + "\" is already the root device");
  }
  drives.push_back(d);
  return {};
}

Result<VmConfig> VmResources::vm_config() const {
  VmConfig c;
  if (boot) {
    c.kernel_path = boot->kernel_image_path;
    c.boot_protocol = boot->boot_protocol;
    c.on_reboot = boot->on_reboot;
    c.initrd_path = boot->initrd_path;
    c.firmware_path = boot->firmware_path;
    c.firmware_vars_path = boot->firmware_vars_path;
    c.cmdline = boot->boot_args ? with_default_console(*boot->boot_args) : kDefaultCmdline;
  } else {
    c.cmdline = kDefaultCmdline;
  }
  c.memory_bytes = memory_bytes;
  c.vcpus = vcpus;
  c.console = console;
  c.kernel_exits = kernel_exits;
  // The root device (if any) becomes the first disk, /dev/vda; the others follow in the order they
  // were configured. Like Firecracker, a root device adds root= to the command line unless the
  // user's boot_args already name one.
  std::vector<const DriveSpec*> order;
  for (const auto& d : drives)
    if (d.is_root_device) order.push_back(&d);
  for (const auto& d : drives)
    if (!d.is_root_device) order.push_back(&d);
  for (const DriveSpec* d : order) {
    if (auto ok = validate_disk_config(d->disk); !ok)
      return fail("drives", "drive \"" + d->drive_id + "\": " + ok.error().message());
    c.devices.push_back(disk_device_spec(d->disk));  // virtio and NVMe disks in drive order
  }
  if (!order.empty() && order.front()->is_root_device &&
      c.cmdline.find("root=") == std::string::npos) {
    const DriveSpec& root = *order.front();
    // The root device is the first disk: the first NVMe controller's namespace when it is one.
    const char* first = root.disk.interface == DiskInterface::kNvme ? "/dev/nvme0n1" : "/dev/vda";
    std::string dev = root.partuuid ? "PARTUUID=" + *root.partuuid : first;
    c.cmdline += " root=" + dev + (root.disk.read_only ? " ro" : " rw");
  }
  // Refused before anything is made (images opened, taps attached), naming the field.
  TRY(check_pci_slots(order.size(), devices, /*cli=*/false));
  TRY(check_devices_for_vm(devices, vcpus, /*cli=*/false));
  c.devices.insert(c.devices.end(), devices.begin(), devices.end());
  // Refused now, before anything is built: anon RAM a vhost-user back-end cannot map.
  TRY(choose_memory_backend(memory_backend, c.devices, "machine-config.memory_backend"));
  c.memory_backend = memory_backend;
  // The vCPU indexes and the CPUs tern may run on, before any thread exists.
  if (!cpu_affinity.empty()) {
    ASSIGN_OR_RETURN(CpuList allowed, process_allowed_cpus());
    TRY(check_cpu_affinity(cpu_affinity, vcpus, allowed, "machine-config.cpu_affinity"));
  }
  c.cpu_affinity = cpu_affinity;
  if (huge_pages == "2M") {
    // Refused now, naming the field, rather than when guest RAM is made (GuestMemory::create).
    c.memory_backend = MemoryBackend::kHugetlbfs;
    const uint64_t pages = memory_bytes / kHugePageSize;
    if (auto avail = available_huge_pages_2m(); !avail || *avail < pages)
      return fail("machine-config.huge_pages",
                  "\"2M\": " + huge_pages_missing(pages, avail));
  }
  return c;
}

nlohmann::json VmResources::vm_config_json() const {
  nlohmann::json drive_list = nlohmann::json::array();
  for (const auto& d : drives) drive_list.push_back(to_json(d));
  nlohmann::json j = {{"boot-source", boot ? to_json(*boot) : nlohmann::json(nullptr)},
          {"machine-config", to_json(machine_config())},
          {"drives", drive_list},
          {"balloon", nullptr},
          {"cpu-config", nullptr},
          {"vsock", nullptr},
          {"logger", nullptr},
          {"metrics", nullptr},
          {"mmds-config", nullptr},
          {"pmem", nlohmann::json::array()},
          {"memory-hotplug", nullptr},
          {"kernel-exits", {{"enabled", kernel_exits}}}};
  // Every single-instance kind's section: its spec, null when not configured.
  // and every keyed kind's array, in the order configured.
  for (const DeviceSurface& s : device_surfaces()) j[std::string(s.config_key)] = nullptr;
  for (const KeyedSurface& s : keyed_surfaces())
    j[std::string(s.config_key)] = nlohmann::json::array();
  for (const DeviceSpec& d : devices) {
    if (const DeviceSurface* s = device_surface_of(d))
      j[std::string(s->config_key)] = device_to_json(d);
    else if (const KeyedSurface* k = keyed_surface_of(d))
      j[std::string(k->config_key)].push_back(device_to_json(d));
  }
  return j;
}

DriveSpec drive_for_disk(const DiskConfig& disk, size_t index) {
  DriveSpec d;
  if (disk.interface == DiskInterface::kNvme) {
    d.drive_id = "nvme" + std::to_string(index);  // Linux's /dev/nvme<index>n1
  } else {
    // Linux's virtio disk names: vda..vdz, vdaa..vdzz, ...
    std::string letters;
    size_t n = index + 1;
    while (n > 0) {
      --n;
      letters.insert(letters.begin(), static_cast<char>('a' + n % 26));
      n /= 26;
    }
    d.drive_id = "vd" + letters;
  }
  d.is_root_device = false;
  if (disk.vhost_user_socket.empty()) {  // a vhost-user disk's are the back-end's
    d.cache_type = std::string(cache_mode_name(disk.cache));
    d.io_engine = std::string(io_engine_name(disk.engine));
  }
  d.disk = disk;
  return d;
}

VmResources VmResources::from_machine_state(const snap::MachineState& m, std::string console) {
  VmResources r;
  r.vcpus = m.vcpus;
  r.memory_bytes = m.memory_bytes;
  r.console = std::move(console);
  if (!m.kernel_path.empty()) {
    BootSource b;
    b.kernel_image_path = m.kernel_path;
    if (!m.initrd_path.empty()) b.initrd_path = m.initrd_path;
    b.boot_args = m.cmdline;
    r.boot = std::move(b);
  } else if (m.firmware) {
    BootSource b;
    b.firmware_path = m.firmware->path;
    if (!m.firmware->vars_path.empty()) b.firmware_vars_path = m.firmware->vars_path;
    b.on_reboot = m.on_reboot;
    r.boot = std::move(b);
  }
  size_t disks = 0;
  size_t nvme_disks = 0;
  for (const auto& saved : m.devices) {
    if (const DiskConfig* disk = disk_config_of(saved.spec))
      r.drives.push_back(drive_for_disk(
          *disk, disk->interface == DiskInterface::kNvme ? nvme_disks++ : disks++));
    else
      r.put_device(saved.spec);
  }
  return r;
}

}  // namespace tern
