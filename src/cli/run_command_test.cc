// Unit tests: `tern run` options land in the one configuration; --rng takes an optional SPEC.
#include "cli/run_command.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "base/testing/temp_dir.h"

namespace tern {
namespace {

RunOptions parse(std::vector<std::string> args) {
  CLI::App app;
  RunOptions o;
  add_run_command(app, o);
  args.insert(args.begin(), "run");
  std::reverse(args.begin(), args.end());  // CLI11 takes a reversed vector
  app.parse(args);
  return o;
}

TEST(RunCommand, RngIsOptionalWithAnOptionalSpec) {
  EXPECT_FALSE(parse({"--kernel", "k"}).devices.contains("--rng"));
  auto alone = parse({"--kernel", "k", "--rng"});
  ASSERT_TRUE(alone.devices.contains("--rng"));
  EXPECT_EQ(alone.devices["--rng"], "");
  auto before = parse({"--rng", "--kernel", "k"});
  ASSERT_TRUE(before.devices.contains("--rng"));
  EXPECT_EQ(before.devices["--rng"], "");
  auto spec = parse({"--kernel", "k", "--rng", "bandwidth=1M,ops=5"});
  ASSERT_TRUE(spec.devices.contains("--rng"));
  EXPECT_EQ(spec.devices["--rng"], "bandwidth=1M,ops=5");
  auto eq = parse({"--kernel", "k", "--rng=ops=5"});
  ASSERT_TRUE(eq.devices.contains("--rng"));
  EXPECT_EQ(eq.devices["--rng"], "ops=5");
}

// --on-reboot exit|restart reaches the VmConfig; unset stays unset (the boot's default); a bad
// value is refused naming the option.
TEST(RunCommand, OnReboot) {
  auto unset = run_resources(parse({"--kernel", "k"}));
  ASSERT_TRUE(unset);
  EXPECT_FALSE(unset->vm_config()->on_reboot);
  auto restart = run_resources(parse({"--kernel", "k", "--on-reboot", "restart"}));
  ASSERT_TRUE(restart);
  EXPECT_EQ(restart->vm_config()->on_reboot, OnReboot::kRestart);
  EXPECT_EQ(restart->vm_config_json()["boot-source"]["on_reboot"], "restart");
  auto exit = run_resources(parse({"--kernel", "k", "--on-reboot", "exit"}));
  ASSERT_TRUE(exit);
  EXPECT_EQ(exit->vm_config()->on_reboot, OnReboot::kExit);
  auto bad = run_resources(parse({"--kernel", "k", "--on-reboot", "reset"}));
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().message(), R"(--on-reboot: "reset" is not one of exit, restart)");
}

TEST(RunCommand, ResourcesFromOptions) {
  auto o = parse({"--kernel", "k", "--cmdline", "quiet", "--memory", "256M", "--cpus", "2",
                  "--disk", "path=/a", "--rng"});
  auto r = run_resources(o);
  ASSERT_TRUE(r) << r.error().message();
  ASSERT_TRUE(r->boot);
  EXPECT_EQ(r->boot->kernel_image_path, "k");
  EXPECT_EQ(r->boot->boot_args, "quiet");
  EXPECT_EQ(r->memory_bytes, 256ull << 20);
  EXPECT_EQ(r->vcpus, 2u);
  ASSERT_EQ(r->drives.size(), 1u);
  EXPECT_EQ(r->drives[0].drive_id, "vda");
  ASSERT_TRUE(r->device<RngSpec>());
  auto c = r->vm_config();
  ASSERT_TRUE(c);
  EXPECT_EQ(c->cmdline, "quiet console=ttyS0");
  EXPECT_EQ(drive_for_disk(DiskConfig{}, 25).drive_id, "vdz");
  EXPECT_EQ(drive_for_disk(DiskConfig{}, 26).drive_id, "vdaa");
  o.devices["--rng"] = "ops=0";
  EXPECT_EQ(run_resources(o).error().message(), "--rng ops: must be greater than 0");
}

// --disk interface=nvme: drive ids per interface (vda, vdb / nvme0), the drives keep their
// order, and GET /vm/config renders what parse_drive reads back (the same disks).
TEST(RunCommand, NvmeDisks) {
  auto o = parse({"--kernel", "k", "--disk", "path=/a", "--disk", "path=/b,interface=nvme,serial=S",
                  "--disk", "path=/c"});
  auto r = run_resources(o);
  ASSERT_TRUE(r) << r.error().message();
  ASSERT_EQ(r->drives.size(), 3u);
  EXPECT_EQ(r->drives[0].drive_id, "vda");
  EXPECT_EQ(r->drives[1].drive_id, "nvme0");
  EXPECT_EQ(r->drives[2].drive_id, "vdb");
  auto c = r->vm_config();
  ASSERT_TRUE(c) << c.error().message();
  ASSERT_EQ(c->devices.size(), 3u);
  EXPECT_TRUE(std::holds_alternative<DiskSpec>(c->devices[0]));
  ASSERT_TRUE(std::holds_alternative<NvmeSpec>(c->devices[1]));
  EXPECT_EQ(std::get<NvmeSpec>(c->devices[1]).disk.serial, "S");
  EXPECT_TRUE(std::holds_alternative<DiskSpec>(c->devices[2]));
  auto drives = r->vm_config_json()["drives"];
  ASSERT_EQ(drives.size(), 3u);
  EXPECT_EQ(drives[1]["interface"], "nvme");
  EXPECT_EQ(drives[1]["path_on_host"], "/b");
  EXPECT_FALSE(drives[0].contains("interface"));

  // A restored VM's resources (from the machine section) name the NVMe drive the same way.
  snap::MachineState m;
  m.vcpus = 1;
  m.memory_bytes = 128 << 20;
  for (const DeviceSpec& d : c->devices) m.devices.push_back({d, {}});
  VmResources back = VmResources::from_machine_state(m, "stdio");
  ASSERT_EQ(back.drives.size(), 3u);
  EXPECT_EQ(back.drives[1].drive_id, "nvme0");
  EXPECT_EQ(back.drives[1].disk.interface, DiskInterface::kNvme);
  EXPECT_EQ(back.drives[2].drive_id, "vdb");

  auto bad = run_resources(parse({"--kernel", "k", "--disk", "path=/a,interface=sata"}));
  ASSERT_FALSE(bad);
  EXPECT_TRUE(bad.error().message().starts_with("--disk interface=sata: unknown disk interface"))
      << bad.error().message();
}

// `tern run --disk path=disk.raw` keeps the image's absolute path: GET /vm/config shows it and a
// snapshot's machine section (from the same VmConfig) names it, so a `tern restore` from another
// directory opens the same image instead of failing on --disk (issue 31 item 13).
TEST(RunCommand, RelativeDiskPathIsShownAbsolute) {
  testing::TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  const std::string image = std::filesystem::canonical(dir.path()).string() + "/disk.raw";
  std::optional<VmResources> r;
  {
    testing::ScopedWorkingDirectory in(dir.path());
    auto parsed = run_resources(parse({"--kernel", "k", "--disk", "path=disk.raw"}));
    ASSERT_TRUE(parsed) << parsed.error().message();
    r = std::move(*parsed);
  }
  EXPECT_EQ(r->vm_config_json()["drives"][0]["path_on_host"], image);
  auto c = r->vm_config();
  ASSERT_TRUE(c) << c.error().message();
  EXPECT_EQ(std::get<DiskSpec>(c->devices[0]).path, image);
}

TEST(RunCommand, MemoryBackend) {
  auto automatic = run_resources(parse({"--kernel", "k"}));
  ASSERT_TRUE(automatic);
  EXPECT_FALSE(automatic->memory_backend);
  auto memfd = run_resources(parse({"--kernel", "k", "--memory-backend", "memfd"}));
  ASSERT_TRUE(memfd) << memfd.error().message();
  EXPECT_EQ(memfd->memory_backend, MemoryBackend::kMemfd);
  EXPECT_EQ(memfd->vm_config_json()["machine-config"]["memory_backend"], "memfd");
  auto c = memfd->vm_config();
  ASSERT_TRUE(c);
  EXPECT_EQ(c->memory_backend, MemoryBackend::kMemfd);
  auto bad = run_resources(parse({"--kernel", "k", "--memory-backend", "huge"}));
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().message(),
            "--memory-backend: \"huge\": unknown backend (anon, memfd, hugetlbfs)");
}

// --disk vhost-user=: a drive like any --disk one (vda, ...); GET /vm/config shows its socket.
TEST(RunCommand, VhostUserDisk) {
  auto o = parse({"--kernel", "k", "--cpus", "2", "--disk", "vhost-user=/tmp/vu.sock,queues=2",
                  "--disk", "path=/b"});
  auto r = run_resources(o);
  ASSERT_TRUE(r) << r.error().message();
  ASSERT_EQ(r->drives.size(), 2u);
  EXPECT_EQ(r->drives[0].drive_id, "vda");
  EXPECT_EQ(r->drives[0].disk.vhost_user_socket, "/tmp/vu.sock");
  auto c = r->vm_config();
  ASSERT_TRUE(c) << c.error().message();
  EXPECT_EQ(std::get<DiskSpec>(c->devices[0]).queues, 2);
  auto drives = r->vm_config_json()["drives"];
  EXPECT_EQ(drives[0], (nlohmann::json{{"drive_id", "vda"}, {"is_root_device", false},
                                       {"socket", "/tmp/vu.sock"}, {"queues", 2}}));
  EXPECT_EQ(drives[1]["path_on_host"], "/b");
  o = parse({"--kernel", "k", "--disk", "vhost-user=/tmp/vu.sock,cache=none"});
  EXPECT_EQ(run_resources(o).error().message(),
            "--disk cache: not with vhost-user= (the host cache mode is the back-end's)");
}

// --net is repeatable; the i-th is iface_id "net<i>", in order; the devices follow the rng.
TEST(RunCommand, NetIsRepeatable) {
  EXPECT_FALSE(parse({"--kernel", "k"}).keyed_devices.contains("--net"));
  auto o = parse({"--kernel", "k", "--cpus", "2", "--net", "tap=tap0,mac=02:00:00:00:00:01",
                  "--rng", "--net=tap=tap1,queues=2,vhost=on"});
  ASSERT_EQ(o.keyed_devices["--net"].size(), 2u);
  auto r = run_resources(o);
  ASSERT_TRUE(r) << r.error().message();
  ASSERT_EQ(r->devices.size(), 3u);
  EXPECT_TRUE(std::holds_alternative<RngSpec>(r->devices[0]));
  const auto& net0 = std::get<NetSpec>(r->devices[1]);
  const auto& net1 = std::get<NetSpec>(r->devices[2]);
  EXPECT_EQ(net0.iface_id, "net0");
  EXPECT_EQ(net0.host_dev_name, "tap0");
  EXPECT_EQ(net0.guest_mac, (MacAddress{2, 0, 0, 0, 0, 1}));
  EXPECT_EQ(net1.iface_id, "net1");
  EXPECT_EQ(net1.queue_pairs, 2);
  EXPECT_TRUE(net1.vhost);
  auto j = r->vm_config_json()["network-interfaces"];
  ASSERT_EQ(j.size(), 2u);
  EXPECT_EQ(j[1]["host_dev_name"], "tap1");
}

TEST(RunCommand, NetErrorsNameTheField) {
  auto o = parse({"--kernel", "k", "--net", "tap=tap0,queues=2"});
  EXPECT_EQ(run_resources(o).error().message(),
            "--net queues: net0: 2 queue pairs, more than the VM's 1 vCPU");
  o = parse({"--kernel", "k", "--net", "tap=tap0", "--net", "tap=tap1,mac=nope"});
  EXPECT_EQ(run_resources(o).error().message(),
            "--net mac: 'nope' is not a MAC address (aa:bb:cc:dd:ee:ff)");
  o = parse({"--kernel", "k", "--net", "mac=02:00:00:00:00:01"});
  EXPECT_EQ(run_resources(o).error().message(), "--net tap: missing: give tap=NAME (the tap device)");
  o = parse({"--kernel", "k", "--net", "tap=tap0", "--net", "tap=tap0"});
  EXPECT_EQ(run_resources(o).error().message(),
            "--net tap: net1: tap \"tap0\" is already used by interface \"net0\"");
  o = parse({"--kernel", "k", "--net", "tap=tap0,mac=02:00:00:00:00:01", "--net",
             "tap=tap1,mac=02:00:00:00:00:01"});
  EXPECT_EQ(run_resources(o).error().message(),
            "--net mac: net1: 02:00:00:00:00:01 is already the MAC of interface \"net0\"");
}

// More devices than PCI slots (31) are refused when the options are read, naming the option of
// the first device without a slot — not when the VM is built, after the images were opened and
// the taps attached (issue 31 item 14c). The API's configuration names the field.
TEST(RunCommand, MoreDevicesThanPciSlotsAreRefusedByOption) {
  std::vector<std::string> args = {"--kernel", "k", "--cpus", "2", "--rng"};
  for (int i = 0; i < 30; ++i) args.insert(args.end(), {"--disk", "path=/d" + std::to_string(i)});
  auto fits = run_resources(parse(args));  // 30 disks + the rng: 31
  ASSERT_TRUE(fits) << fits.error().message();
  args.insert(args.end(), {"--net", "tap=tap0", "--net", "tap=tap1"});
  auto over = run_resources(parse(args));
  ASSERT_FALSE(over) << "33 PCI devices accepted";
  EXPECT_EQ(over.error().message(),
            "--net: 33 PCI devices (30 disks, 3 others): a VM has 31 PCI slots (bus 0, slots 1-31)");

  // The same devices configured as the API does: the field of the first without a slot.
  VmResources api = *fits;
  api.put_device(*device_from_cli(keyed_surfaces()[0], "tap=tap0", 0));
  auto config = api.vm_config();
  ASSERT_FALSE(config);
  EXPECT_TRUE(config.error().message().starts_with("network-interfaces[0]: 32 PCI devices"))
      << config.error().message();
  for (int i = 0; i < 2; ++i) api.drives.push_back(drive_for_disk(api.drives[0].disk, 30 + i));
  EXPECT_TRUE(api.vm_config().error().message().starts_with("drives: 34 PCI devices"))
      << api.vm_config().error().message();
}

// With several --disk options the error says which one; with one it needs not.
TEST(RunCommand, DiskErrorsSayWhichDisk) {
  auto o = parse({"--kernel", "k", "--disk", "path=a", "--disk", "path=b,poll_us=20000"});
  EXPECT_EQ(run_resources(o).error().message(),
            "--disk #2 poll_us=20000: must be a number of µs in 0..10000");
  o = parse({"--kernel", "k", "--disk", "path=b,poll_us=20000"});
  EXPECT_EQ(run_resources(o).error().message(),
            "--disk poll_us=20000: must be a number of µs in 0..10000");
}

TEST(RunCommand, KernelExits) {
  auto off = run_resources(parse({"--kernel", "k"}));
  ASSERT_TRUE(off) << off.error().message();
  EXPECT_FALSE(off->kernel_exits);
  auto on = run_resources(parse({"--kernel", "k", "--kernel-exits"}));
  ASSERT_TRUE(on) << on.error().message();
  EXPECT_TRUE(on->kernel_exits);
  EXPECT_TRUE(on->vm_config()->kernel_exits);
}

}  // namespace
}  // namespace tern

namespace tern {
namespace {

// --firmware instead of --kernel; the combinations tern refuses, by name, before anything runs.
TEST(RunCommand, FirmwareOptions) {
  auto fw = run_resources(parse({"--firmware", "/usr/share/seabios/bios-256k.bin"}));
  ASSERT_TRUE(fw) << fw.error().message();
  ASSERT_TRUE(fw->boot);
  EXPECT_EQ(fw->boot->firmware_path, "/usr/share/seabios/bios-256k.bin");
  EXPECT_TRUE(fw->boot->kernel_image_path.empty());
  auto cfg = fw->vm_config();
  ASSERT_TRUE(cfg) << cfg.error().message();
  EXPECT_EQ(cfg->firmware_path, "/usr/share/seabios/bios-256k.bin");

  auto both = run_resources(parse({"--firmware", "f", "--kernel", "k"}));
  ASSERT_FALSE(both);
  EXPECT_EQ(both.error().message().rfind("--firmware and --kernel cannot be combined: ", 0), 0u);
  auto initrd = run_resources(parse({"--firmware", "f", "--initrd", "i"}));
  ASSERT_FALSE(initrd);
  EXPECT_EQ(initrd.error().op, "--initrd");
  auto cmdline = run_resources(parse({"--firmware", "f", "--cmdline", "quiet"}));
  ASSERT_FALSE(cmdline);
  EXPECT_EQ(cmdline.error().op, "--cmdline");
  auto vars = run_resources(parse({"--kernel", "k", "--firmware-vars", "v"}));
  ASSERT_FALSE(vars);
  EXPECT_EQ(vars.error().op, "--firmware-vars");
  auto none = run_resources(parse({"--memory", "256M"}));
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error().op, "--kernel");
}

}  // namespace
}  // namespace tern
