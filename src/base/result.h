// Result<T> and Error: the recoverable-error type used everywhere in tern.
//
// Result<T> = tl::expected<T, Error> (Debian libexpected-dev). An Error carries the failing
// operation (e.g. "KVM_CREATE_VM", "open"), optional context (a path, a field name) and an errno
// when the error came from the OS (0 otherwise). Programming errors abort through TERN_CHECK.
#pragma once

#include <cerrno>
#include <string>
#include <utility>

#include <tl/expected.hpp>

namespace tern {

/// A recoverable error: operation + context + optional errno.
struct Error {
  std::string op;       ///< What failed: a syscall/ioctl name or a validation step.
  std::string context;  ///< Free text: the path, field or value concerned.
  int errnum = 0;       ///< errno if the error came from the OS, else 0.

  /// "op: context: strerror(errnum)" with empty parts omitted.
  [[nodiscard]] std::string message() const;
};

template <class T>
using Result = tl::expected<T, Error>;

/// An error that is not an OS error (validation, format, limits).
[[nodiscard]] inline tl::unexpected<Error> fail(std::string op, std::string context = {}) {
  return tl::unexpected<Error>(Error{std::move(op), std::move(context), 0});
}

/// An OS error built from the current errno (read immediately, before anything else can clobber it).
[[nodiscard]] inline tl::unexpected<Error> fail_errno(std::string op, std::string context = {}) {
  int e = errno;
  return tl::unexpected<Error>(Error{std::move(op), std::move(context), e});
}

/// An OS error with an explicit errno value (e.g. a negative return from liburing).
[[nodiscard]] inline tl::unexpected<Error> fail_code(int errnum, std::string op,
                                                     std::string context = {}) {
  return tl::unexpected<Error>(Error{std::move(op), std::move(context), errnum});
}

[[noreturn]] void check_failed(const char* expr, const char* file, int line);

}  // namespace tern

/// Abort on a broken internal invariant (never on guest or user input).
#define TERN_CHECK(cond) \
  ((cond) ? static_cast<void>(0) : ::tern::check_failed(#cond, __FILE__, __LINE__))

#define TERN_CONCAT_INNER(a, b) a##b
#define TERN_CONCAT(a, b) TERN_CONCAT_INNER(a, b)

/// Evaluate a Result-returning expression; on error return the error from the current function.
#define TRY(expr)                                                       \
  do {                                                                  \
    auto&& tern_try_r = (expr);                                         \
    if (!tern_try_r) return ::tl::unexpected(std::move(tern_try_r).error()); \
  } while (0)

/// `ASSIGN_OR_RETURN(auto x, f())`: declare/assign the value or return the error.
#define ASSIGN_OR_RETURN(lhs, expr) \
  ASSIGN_OR_RETURN_IMPL(TERN_CONCAT(tern_aor_, __LINE__), lhs, expr)
#define ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr)                      \
  auto tmp = (expr);                                               \
  if (!tmp) return ::tl::unexpected(std::move(tmp).error());       \
  lhs = std::move(*tmp)
