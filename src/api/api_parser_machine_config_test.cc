// Unit tests: PUT/PATCH /machine-config's huge_pages "2M" (Firecracker's spelling) and tern's
// cpu_affinity extension (also in PUT /snapshot/load), each refusal naming the field.
#include "api/api_parser.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "api/testing/parser_fault.h"

namespace tern {
namespace {

std::string fault(const tl::expected<ApiRequest, ApiResponse>& r) { return testing::parse_fault(r); }

// Firecracker's "huge_pages": "2M" is tern's hugetlbfs backend; other values refused by name.
TEST(ApiParser, HugePages2M) {
  auto put = parse_api_request("PUT", "/machine-config",
                               R"({"vcpu_count": 1, "mem_size_mib": 128, "huge_pages": "2M"})");
  ASSERT_TRUE(put) << put.error().body;
  const MachineConfig& m = std::get<api::PutMachineConfig>(*put).value;
  EXPECT_EQ(m.huge_pages, "2M");
  EXPECT_EQ(to_json(m)["huge_pages"], "2M");
  EXPECT_TRUE(parse_api_request(
      "PUT", "/machine-config",
      R"({"vcpu_count": 1, "mem_size_mib": 128, "huge_pages": "2M", "memory_backend": "hugetlbfs"})"));
  EXPECT_EQ(fault(parse_api_request("PUT", "/machine-config",
                                    R"({"vcpu_count": 1, "mem_size_mib": 129, "huge_pages": "2M"})")),
            "huge_pages: \"2M\": mem_size_mib 129 is not a multiple of 2 (2 MiB pages)");
  EXPECT_EQ(fault(parse_api_request(
                "PUT", "/machine-config",
                R"({"vcpu_count": 1, "mem_size_mib": 128, "huge_pages": "2M", "memory_backend": "memfd"})")),
            "huge_pages: \"2M\" is 2 MiB hugetlbfs RAM; memory_backend \"memfd\" contradicts it");
  EXPECT_EQ(fault(parse_api_request("PUT", "/machine-config",
                                    R"({"vcpu_count": 1, "mem_size_mib": 128, "huge_pages": "1G"})")),
            "huge_pages: \"1G\": unknown value (None, Transparent, 2M)");
  EXPECT_NE(fault(parse_api_request(
                      "PUT", "/machine-config",
                      R"({"vcpu_count": 1, "mem_size_mib": 128, "huge_pages": "Transparent"})"))
                .find("huge_pages: \"Transparent\": not supported"),
            std::string::npos);
  EXPECT_TRUE(parse_api_request("PATCH", "/machine-config", R"({"huge_pages": "2M"})"));
}

// tern extension "cpu_affinity" of machine-config and snapshot/load: an object of cpulists by
// thread class, rendered back; bad ones refused naming the field and the class.
TEST(ApiParser, CpuAffinityExtension) {
  auto put = parse_api_request(
      "PUT", "/machine-config",
      R"({"vcpu_count": 2, "mem_size_mib": 128, "cpu_affinity": {"vcpu0": "0-1", "vcpu1": "1", "io": "0"}})");
  ASSERT_TRUE(put) << put.error().body;
  const MachineConfig& m = std::get<api::PutMachineConfig>(*put).value;
  EXPECT_EQ(m.cpu_affinity.vcpu.at(0), (CpuList{0, 1}));
  EXPECT_EQ(m.cpu_affinity.io, (CpuList{0}));
  EXPECT_EQ(to_json(m)["cpu_affinity"],
            nlohmann::json({{"vcpu0", "0-1"}, {"vcpu1", "1"}, {"io", "0"}}));
  EXPECT_FALSE(to_json(MachineConfig{}).contains("cpu_affinity"));
  auto bad = [](const std::string& affinity) {
    return fault(parse_api_request(
        "PUT", "/machine-config",
        R"({"vcpu_count": 1, "mem_size_mib": 128, "cpu_affinity": )" + affinity + "}"));
  };
  EXPECT_EQ(bad(R"("0-1")"), "cpu_affinity: expected an object like {\"vcpu0\": \"0-1\", "
                             "\"io\": \"0\"}, got string");
  EXPECT_EQ(bad(R"({"vcpu0": 1})"), "cpu_affinity vcpu0: expected a CPU list string, got integer");
  EXPECT_EQ(bad(R"({"vcpu0": "1-0"})"), "cpu_affinity vcpu0: \"1-0\": a range ends below its start");
  EXPECT_EQ(bad(R"({"net": "1"})"), "cpu_affinity net: unknown thread class (vcpu, vcpuN, io)");
  auto load = parse_api_request("PUT", "/snapshot/load", R"({"snapshot_path": "/proc/self/exe",
            "mem_backend": {"backend_path": "/proc/self/exe", "backend_type": "File"},
            "cpu_affinity": {"vcpu": "0"}})");
  ASSERT_TRUE(load) << load.error().body;
  EXPECT_EQ(std::get<api::LoadSnapshot>(*load).value.cpu_affinity.vcpus, (CpuList{0}));
}

}  // namespace
}  // namespace tern
