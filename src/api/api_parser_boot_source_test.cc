// Unit tests: PUT /boot-source in the API request parser: tern's extensions boot_protocol,
// firmware_path, firmware_vars_path and on_reboot, each refusal naming the field.
#include "api/api_parser.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "api/testing/parser_fault.h"

namespace tern {
namespace {

std::string fault(const tl::expected<ApiRequest, ApiResponse>& r) { return testing::parse_fault(r); }

// tern extension "boot_protocol" in PUT /boot-source: the three values, rendered back by to_json
// only when not "auto"; anything else is a 400 naming the field.
TEST(ApiParser, BootSourceBootProtocol) {
  for (auto [text, want] : {std::pair{"auto", BootProtocol::kAuto},
                            {"pvh", BootProtocol::kPvh},
                            {"bzimage", BootProtocol::kBzImage}}) {
    auto r = parse_api_request("PUT", "/boot-source",
                               std::string(R"({"kernel_image_path": "/proc/self/exe", )") +
                                   R"("boot_protocol": ")" + text + R"("})");
    ASSERT_TRUE(r) << r.error().body;
    const auto& b = std::get<api::PutBootSource>(*r).value;
    EXPECT_EQ(b.boot_protocol, want);
    EXPECT_EQ(to_json(b).contains("boot_protocol"), want != BootProtocol::kAuto);
  }
  auto bad = parse_api_request("PUT", "/boot-source",
                               R"({"kernel_image_path": "/proc/self/exe", "boot_protocol": 1})");
  EXPECT_NE(fault(bad).find("boot_protocol"), std::string::npos);
  bad = parse_api_request("PUT", "/boot-source",
                          R"({"kernel_image_path": "/proc/self/exe", "boot_protocol": "elf"})");
  EXPECT_NE(fault(bad).find("boot_protocol: \"elf\" is not one of"), std::string::npos)
      << fault(bad);
}

// tern extension "firmware_path" / "firmware_vars_path" in PUT /boot-source: instead of
// kernel_image_path, rendered back; combinations refused naming the field.
TEST(ApiParser, BootSourceFirmware) {
  auto r = parse_api_request("PUT", "/boot-source", R"({"firmware_path": "/proc/self/exe"})");
  ASSERT_TRUE(r) << r.error().body;
  const auto& b = std::get<api::PutBootSource>(*r).value;
  EXPECT_EQ(b.firmware_path, "/proc/self/exe");
  EXPECT_TRUE(b.kernel_image_path.empty());
  auto j = to_json(b);
  EXPECT_EQ(j.at("firmware_path"), "/proc/self/exe");
  EXPECT_FALSE(j.contains("kernel_image_path"));
  auto both = parse_api_request(
      "PUT", "/boot-source",
      R"({"firmware_path": "/proc/self/exe", "kernel_image_path": "/proc/self/exe"})");
  EXPECT_NE(fault(both).find("firmware_path and kernel_image_path cannot be combined"),
            std::string::npos)
      << fault(both);
  auto vars = parse_api_request(
      "PUT", "/boot-source",
      R"({"kernel_image_path": "/proc/self/exe", "firmware_vars_path": "/proc/self/exe"})");
  EXPECT_NE(fault(vars).find("firmware_vars_path: needs firmware_path"), std::string::npos)
      << fault(vars);
  auto missing =
      parse_api_request("PUT", "/boot-source", R"({"firmware_path": "/nonexistent/bios.bin"})");
  EXPECT_NE(fault(missing).find("firmware_path: /nonexistent/bios.bin"), std::string::npos)
      << fault(missing);
  auto neither = parse_api_request("PUT", "/boot-source", R"({"boot_args": "quiet"})");
  EXPECT_NE(fault(neither).find("kernel_image_path: missing required field"), std::string::npos)
      << fault(neither);
}

// tern extension "on_reboot" in PUT /boot-source: "exit" and "restart", rendered back only when
// given (absent: the boot's default); anything else is a 400 naming the field.
TEST(ApiParser, BootSourceOnReboot) {
  for (auto [text, want] : {std::pair{"exit", OnReboot::kExit}, {"restart", OnReboot::kRestart}}) {
    auto r = parse_api_request("PUT", "/boot-source",
                               std::string(R"({"kernel_image_path": "/proc/self/exe", )") +
                                   R"("on_reboot": ")" + text + R"("})");
    ASSERT_TRUE(r) << r.error().body;
    const auto& b = std::get<api::PutBootSource>(*r).value;
    EXPECT_EQ(b.on_reboot, want);
    EXPECT_EQ(to_json(b)["on_reboot"], text);
  }
  auto none = parse_api_request("PUT", "/boot-source", R"({"kernel_image_path": "/proc/self/exe"})");
  ASSERT_TRUE(none);
  EXPECT_FALSE(std::get<api::PutBootSource>(*none).value.on_reboot);
  EXPECT_FALSE(to_json(std::get<api::PutBootSource>(*none).value).contains("on_reboot"));
  auto bad = parse_api_request("PUT", "/boot-source",
                               R"({"kernel_image_path": "/proc/self/exe", "on_reboot": "reset"})");
  EXPECT_NE(fault(bad).find(R"(on_reboot: "reset" is not one of "exit", "restart")"),
            std::string::npos)
      << fault(bad);
  bad = parse_api_request("PUT", "/boot-source",
                          R"({"kernel_image_path": "/proc/self/exe", "on_reboot": true})");
  EXPECT_NE(fault(bad).find("on_reboot"), std::string::npos);
}

// "firmware_vars_path" may name a store that does not exist yet: tern creates it from the
// template beside the code image (docs/firmware.md), as --firmware-vars does; a directory is
// still refused here.
TEST(ApiParser, BootSourceFirmwareVarsMayNotExistYet) {
  auto r = parse_api_request(
      "PUT", "/boot-source",
      R"({"firmware_path": "/proc/self/exe", "firmware_vars_path": "/tmp/tern-new-vm-vars.fd"})");
  ASSERT_TRUE(r) << r.error().body;
  EXPECT_EQ(std::get<api::PutBootSource>(*r).value.firmware_vars_path,
            "/tmp/tern-new-vm-vars.fd");
  auto dir = parse_api_request(
      "PUT", "/boot-source", R"({"firmware_path": "/proc/self/exe", "firmware_vars_path": "/tmp"})");
  EXPECT_NE(fault(dir).find("firmware_vars_path: /tmp: is a directory"), std::string::npos)
      << fault(dir);
}

// Bodies as Firecracker's getting-started guide and API docs write them.
}  // namespace
}  // namespace tern
