// prometheus_text(): the GET /tern/metrics body, rendered from a GET /tern/stats snapshot.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace tern {

/// Renders a stats_json() snapshot (docs/stats.md) in the Prometheus text exposition format 0.0.4:
/// metric names `tern_...`, labels vcpu, reason, device, kind, bus, op, queue, thread (see
/// docs/stats.md for the list). Exit handling times are a histogram type (`_bucket{le}`, `_sum`,
/// `_count`, ns).
std::string prometheus_text(const nlohmann::json& stats);

/// `s` with every character outside [a-zA-Z0-9_] replaced by '_' (a valid metric name part).
std::string prometheus_name(const std::string& s);

}  // namespace tern
