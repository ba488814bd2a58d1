#include "core/status.h"

namespace lj {

std::string Status::to_string() const {
  if (ok()) return "ok";
  if (hint_.empty()) return message_;
  return message_ + " (hint: " + hint_ + ")";
}

Status Status::with_context(const std::string& context) const {
  if (ok()) return *this;
  return Status(code_, context + ": " + message_, hint_);
}

Status invalid_argument(std::string m, std::string h) {
  return Status(StatusCode::invalid_argument, std::move(m), std::move(h));
}
Status not_found(std::string m, std::string h) {
  return Status(StatusCode::not_found, std::move(m), std::move(h));
}
Status out_of_range(std::string m, std::string h) {
  return Status(StatusCode::out_of_range, std::move(m), std::move(h));
}
Status unimplemented(std::string m, std::string h) {
  return Status(StatusCode::unimplemented, std::move(m), std::move(h));
}
Status io_error(std::string m, std::string h) {
  return Status(StatusCode::io, std::move(m), std::move(h));
}
Status internal_error(std::string m, std::string h) {
  return Status(StatusCode::internal, std::move(m), std::move(h));
}
Status resource_exhausted(std::string m, std::string h) {
  return Status(StatusCode::resource_exhausted, std::move(m), std::move(h));
}

}  // namespace lj
