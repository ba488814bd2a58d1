// Status and StatusOr: how anything a user or the environment can get wrong travels up to the
// CLI, which prints the message on one line and the hint on a second. Invariants use LJ_CHECK.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <variant>

#include "core/check.h"

namespace lj {

enum class StatusCode {
  ok,
  invalid_argument,
  not_found,
  out_of_range,
  unimplemented,
  io,
  internal,
  resource_exhausted
};

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message, std::string hint = {})
      : code_(code), message_(std::move(message)), hint_(std::move(hint)) {}

  bool ok() const { return code_ == StatusCode::ok; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  const std::string& hint() const { return hint_; }
  // "message" or "message (hint: ...)" on one line.
  std::string to_string() const;
  // Prefixes context, e.g. "loading model.safetensors: " + message.
  Status with_context(const std::string& context) const;

 private:
  StatusCode code_ = StatusCode::ok;
  std::string message_;
  std::string hint_;
};

inline Status ok_status() {
  return Status();
}
Status invalid_argument(std::string message, std::string hint = {});
Status not_found(std::string message, std::string hint = {});
Status out_of_range(std::string message, std::string hint = {});
Status unimplemented(std::string message, std::string hint = {});
Status io_error(std::string message, std::string hint = {});
Status internal_error(std::string message, std::string hint = {});
Status resource_exhausted(std::string message, std::string hint = {});

template <class T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(T value) : v_(std::move(value)) {}        // NOLINT(google-explicit-constructor)
  StatusOr(Status status) : v_(std::move(status)) {  // NOLINT(google-explicit-constructor)
    LJ_CHECK(!std::get<Status>(v_).ok()) << "StatusOr built from an ok Status";
  }
  bool ok() const { return std::holds_alternative<T>(v_); }
  Status status() const { return ok() ? Status() : std::get<Status>(v_); }
  T& value() & {
    LJ_CHECK(ok()) << status().to_string();
    return std::get<T>(v_);
  }
  const T& value() const& {
    LJ_CHECK(ok()) << status().to_string();
    return std::get<T>(v_);
  }
  T&& value() && {
    LJ_CHECK(ok()) << status().to_string();
    return std::get<T>(std::move(v_));
  }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace lj

#define LJ_CONCAT_INNER(a, b) a##b
#define LJ_CONCAT(a, b) LJ_CONCAT_INNER(a, b)

// Returns early from a function returning Status or StatusOr when `expr` is not ok.
#define LJ_RETURN_IF_ERROR(expr)             \
  do {                                       \
    ::lj::Status lj_status_ = (expr);        \
    if (!lj_status_.ok()) return lj_status_; \
  } while (0)

// `LJ_ASSIGN_OR_RETURN(auto x, f());` binds the value or returns the error.
#define LJ_ASSIGN_OR_RETURN(lhs, expr) \
  LJ_ASSIGN_OR_RETURN_IMPL(LJ_CONCAT(lj_sor_, __LINE__), lhs, expr)
#define LJ_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                             \
  if (!tmp.ok()) return tmp.status();            \
  lhs = std::move(tmp).value()
