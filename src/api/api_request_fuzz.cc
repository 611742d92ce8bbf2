// libFuzzer target: what the API server does with a client's bytes. Mode 0 (first byte even): the
// bytes are an HTTP/1.1 stream read with Beast's request parser under the server's limits
// (ApiServerOptions), each complete request going to parse_api_request() as the server hands it
// over. Mode 1 (odd): the second byte picks an endpoint and the rest is its body, to reach the JSON
// section parsers (JsonReader) directly. Nothing may crash; every answer must serialise to valid
// JSON (json_text); an accepted request's values serialise too.
#include <array>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

#include "api/api_parser.h"
#include "api/api_server.h"
#include "base/testing/fuzz_input.h"

namespace {

namespace http = boost::beast::http;

void parse_and_check(std::string_view method, std::string_view target, std::string_view body) {
  using namespace tern;
  auto parsed = parse_api_request(method, target, body);
  if (!parsed) {
    FUZZ_CHECK(parsed.error().status >= 400 && parsed.error().status < 500);
    auto j = nlohmann::json::parse(parsed.error().body, nullptr, false);
    FUZZ_CHECK(j.is_object() && j.contains("fault_message"));
    return;
  }
  if (auto* b = std::get_if<api::PutBootSource>(&*parsed)) (void)json_text(to_json(b->value));
  if (auto* m = std::get_if<api::PutMachineConfig>(&*parsed)) (void)json_text(to_json(m->value));
  if (auto* d = std::get_if<api::PutDrive>(&*parsed)) (void)json_text(to_json(d->value));
  if (auto* e = std::get_if<api::PutDevice>(&*parsed)) FUZZ_CHECK(e->spec.has_value());
  if (auto* k = std::get_if<api::PutKeyedDevice>(&*parsed))
    FUZZ_CHECK(k->spec.has_value() && !k->id.empty());
  if (auto* k = std::get_if<api::PatchKeyedDevice>(&*parsed)) FUZZ_CHECK(!k->id.empty());
}

void http_stream(std::string_view bytes) {
  const tern::ApiServerOptions opts;
  for (int requests = 0; requests < 8 && !bytes.empty(); ++requests) {
    http::request_parser<http::string_body> p;
    p.header_limit(static_cast<uint32_t>(opts.max_header_bytes));
    p.body_limit(opts.max_body_bytes);
    p.eager(true);
    boost::beast::error_code ec;
    // As http::async_read does: feed what is buffered until the message is done.
    while (!p.is_done()) {
      size_t used = p.put(boost::asio::buffer(bytes.data(), bytes.size()), ec);
      FUZZ_CHECK(used <= bytes.size());
      bytes.remove_prefix(used);
      if (ec == http::error::need_more && used > 0 && !bytes.empty()) {
        ec = {};
        continue;
      }
      if (ec || used == 0) return;  // the server answers 4xx, or waits for more bytes
    }
    auto& req = p.get();
    // As the server does (api_server.cc, on_read).
    std::string method(req.method_string());
    std::string target(req.target());
    parse_and_check(method, target, req.body());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  std::string_view rest(reinterpret_cast<const char*>(data) + 2, size - 2);
  if ((data[0] & 1) == 0) {
    http_stream(std::string_view(reinterpret_cast<const char*>(data) + 1, size - 1));
    return 0;
  }
  static constexpr std::array<std::pair<std::string_view, std::string_view>, 12> kEndpoints = {{
      {"PUT", "/boot-source"},
      {"PUT", "/machine-config"},
      {"PATCH", "/machine-config"},
      {"PUT", "/drives/rootfs"},
      {"PUT", "/actions"},
      {"PATCH", "/vm"},
      {"PUT", "/snapshot/create"},
      {"PUT", "/snapshot/load"},
      {"GET", "/"},
      {"PUT", "/network-interfaces/eth0"},
      {"PUT", "/entropy"},  // appended: the seeds' endpoint bytes 0..9 keep their meaning
      {"PATCH", "/network-interfaces/eth0"},
  }};
  auto [method, target] = kEndpoints[data[1] % kEndpoints.size()];
  parse_and_check(method, target, rest);
  return 0;
}
