#include "trace/libbpf_log.h"

#include <bpf/libbpf.h>
#include <spdlog/spdlog.h>

#include <cstdarg>
#include <cstdio>
#include <mutex>

namespace tern {
namespace {

std::mutex g_capture_mutex;  // held by the living LibbpfLogCapture
std::mutex g_lines_mutex;    // guards g_lines
std::vector<std::string>* g_lines = nullptr;

int print(enum libbpf_print_level level, const char* format, va_list args) {
  va_list copy;
  va_copy(copy, args);
  int n = std::vsnprintf(nullptr, 0, format, copy);
  va_end(copy);
  if (n < 0) return 0;
  std::string text(static_cast<size_t>(n) + 1, '\0');
  std::vsnprintf(text.data(), text.size(), format, args);
  text.resize(static_cast<size_t>(n));
  // A verifier log arrives as one message with many lines.
  size_t pos = 0;
  std::lock_guard lock(g_lines_mutex);
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    std::string line = text.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
    pos = nl == std::string::npos ? text.size() : nl + 1;
    if (line.empty()) continue;
    if (g_lines) g_lines->push_back(line);
    spdlog::debug("libbpf{}: {}", level == LIBBPF_WARN ? " warning" : "", line);
  }
  return n;
}

void install() {
  static std::once_flag once;
  std::call_once(once, [] { libbpf_set_print(print); });
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == ' ' || s.back() == '\n' || s.back() == '\t')) s.pop_back();
  size_t i = 0;
  while (i < s.size() && s[i] == ' ') ++i;
  return s.substr(i);
}

}  // namespace

LibbpfLogCapture::LibbpfLogCapture() {
  install();
  g_capture_mutex.lock();
  std::lock_guard lock(g_lines_mutex);
  g_lines = &lines_;
}

LibbpfLogCapture::~LibbpfLogCapture() {
  {
    std::lock_guard lock(g_lines_mutex);
    g_lines = nullptr;
  }
  g_capture_mutex.unlock();
}

std::string LibbpfLogCapture::verifier_tail(size_t n) const {
  std::lock_guard lock(g_lines_mutex);
  std::vector<std::string> log;
  bool in = false;
  for (const auto& l : lines_) {
    if (l.find("-- BEGIN PROG LOAD LOG --") != std::string::npos) {
      in = true;
      log.clear();
    } else if (l.find("-- END PROG LOAD LOG --") != std::string::npos) {
      in = false;
    } else if (in) {
      log.push_back(trim(l));
    }
  }
  // The verifier's totals line ("processed N insns ...") says nothing about the cause.
  while (!log.empty() && log.back().rfind("processed ", 0) == 0) log.pop_back();
  std::string out;
  size_t start = log.size() > n ? log.size() - n : 0;
  for (size_t i = start; i < log.size(); ++i) {
    if (!out.empty()) out += "; ";
    out += log[i];
  }
  return out;
}

std::string LibbpfLogCapture::last_message() const {
  std::lock_guard lock(g_lines_mutex);
  bool in = false;
  std::string last;
  for (const auto& l : lines_) {
    if (l.find("-- BEGIN PROG LOAD LOG --") != std::string::npos) {
      in = true;
    } else if (l.find("-- END PROG LOAD LOG --") != std::string::npos) {
      in = false;
    } else if (!in) {
      last = l;
    }
  }
  std::string t = trim(last);
  if (t.rfind("libbpf: ", 0) == 0) t = t.substr(8);
  return t;
}

}  // namespace tern
