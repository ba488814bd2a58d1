#include "core/json_read.h"

#include <cmath>
#include <limits>
#include <type_traits>

namespace lj {
namespace {

// The value as the message shows it: short, and never throwing (dump() throws on bad UTF-8).
std::string shown(const Json& v) {
  std::string s = v.dump(-1, ' ', false, Json::error_handler_t::replace);
  if (s.size() > 48) s = s.substr(0, 45) + "...";
  return s;
}

Status wrong(const JsonWhere& at, const std::string& what) {
  return invalid_argument(at.name() + " " + what, at.hint);
}

Status missing(const JsonWhere& at) {
  return wrong(at, "is missing");
}

Status wrong_type(const Json& v, const JsonWhere& at, const char* expected) {
  if (v.is_null()) return missing(at);
  return wrong(at, std::string("must be ") + expected + ", got " + shown(v));
}

template <class T>
std::string text(T x) {
  if constexpr (std::is_floating_point_v<T>) {
    return shown(Json(x));
  } else {
    return std::to_string(x);
  }
}

// An integer value that fits T.
template <class T>
std::optional<T> integer_as(const Json& v) {
  if (const auto* u = v.get_ptr<const Json::number_unsigned_t*>()) {
    if (*u > static_cast<uint64_t>(std::numeric_limits<T>::max())) return std::nullopt;
    return static_cast<T>(*u);
  }
  if (const auto* i = v.get_ptr<const Json::number_integer_t*>()) {
    const int64_t x = *i;
    if constexpr (std::is_signed_v<T>) {
      if (x < static_cast<int64_t>(std::numeric_limits<T>::lowest()) ||
          x > static_cast<int64_t>(std::numeric_limits<T>::max()))
        return std::nullopt;
    } else {
      if (x < 0 || static_cast<uint64_t>(x) > std::numeric_limits<T>::max()) return std::nullopt;
    }
    return static_cast<T>(x);
  }
  return std::nullopt;
}

template <class T>
const char* integer_kind() {
  if constexpr (std::is_same_v<T, int>) return "a 32-bit integer";
  if constexpr (std::is_same_v<T, uint32_t>) return "a non-negative 32-bit integer";
  if constexpr (std::is_same_v<T, uint64_t>) return "a non-negative integer";
  return "a 64-bit integer";
}

}  // namespace

JsonWhere JsonWhere::operator/(std::string_view key) const {
  JsonWhere w = *this;
  w.path = path.empty() ? std::string(key) : path + "." + std::string(key);
  return w;
}

JsonWhere JsonWhere::operator[](size_t index) const {
  JsonWhere w = *this;
  w.path = path + "[" + std::to_string(index) + "]";
  return w;
}

std::string JsonWhere::name() const {
  return path.empty() ? file : file + ": " + path;
}

const Json& json_member(const Json& obj, std::string_view key) {
  static const Json null_value;
  if (!obj.is_object()) return null_value;
  const auto it = obj.find(key);
  return it == obj.end() ? null_value : *it;
}

template <class T>
StatusOr<T> json_read(const Json& v, const JsonWhere& at) {
  if constexpr (std::is_same_v<T, bool>) {
    if (!v.is_boolean()) return wrong_type(v, at, "true or false");
    return *v.get_ptr<const Json::boolean_t*>();
  } else if constexpr (std::is_same_v<T, std::string>) {
    if (!v.is_string()) return wrong_type(v, at, "a string");
    return *v.get_ptr<const Json::string_t*>();
  } else if constexpr (std::is_same_v<T, double>) {
    const std::optional<double> d = json_number_if(v);
    if (!d) return wrong_type(v, at, "a number");
    if (!std::isfinite(*d)) return wrong(at, "must be finite, got " + shown(v));
    return *d;
  } else if constexpr (std::is_same_v<T, std::vector<double>>) {
    if (!v.is_array()) return wrong_type(v, at, "a list of numbers");
    std::vector<double> out;
    out.reserve(v.size());
    for (size_t i = 0; i < v.size(); ++i) {
      LJ_ASSIGN_OR_RETURN(const double d, json_read<double>(v[i], at[i]));
      out.push_back(d);
    }
    return out;
  } else {
    static_assert(std::is_integral_v<T>);
    if (const std::optional<T> x = integer_as<T>(v)) return *x;
    if (v.is_number_integer()) return wrong(at, std::string("is out of range, got ") + shown(v));
    return wrong_type(v, at, integer_kind<T>());
  }
}

template <class T>
StatusOr<T> json_read_or(const Json& v, const T& fallback, const JsonWhere& at) {
  if (v.is_null()) return fallback;
  return json_read<T>(v, at);
}

template <class T>
StatusOr<T> json_read_in(const Json& v, const JsonWhere& at, T lo, T hi) {
  LJ_ASSIGN_OR_RETURN(const T x, json_read<T>(v, at));
  if (x < lo || x > hi)
    return wrong(at, "must be in [" + text(lo) + ", " + text(hi) + "], got " + shown(v));
  return x;
}

Status json_need_object(const Json& v, const JsonWhere& at) {
  return v.is_object() ? ok_status() : wrong_type(v, at, "an object");
}

Status json_need_array(const Json& v, const JsonWhere& at) {
  return v.is_array() ? ok_status() : wrong_type(v, at, "a list");
}

const std::string* json_string_if(const Json& v) {
  return v.get_ptr<const Json::string_t*>();
}

std::optional<bool> json_bool_if(const Json& v) {
  if (const auto* b = v.get_ptr<const Json::boolean_t*>()) return *b;
  return std::nullopt;
}

std::optional<double> json_number_if(const Json& v) {
  if (const auto* f = v.get_ptr<const Json::number_float_t*>()) return *f;
  if (const auto* u = v.get_ptr<const Json::number_unsigned_t*>()) return static_cast<double>(*u);
  if (const auto* i = v.get_ptr<const Json::number_integer_t*>()) return static_cast<double>(*i);
  return std::nullopt;
}

std::optional<int64_t> json_int_if(const Json& v) {
  return integer_as<int64_t>(v);
}

std::optional<uint64_t> json_uint_if(const Json& v) {
  return integer_as<uint64_t>(v);
}

#define LJ_JSON_READ(T)                                             \
  template StatusOr<T> json_read<T>(const Json&, const JsonWhere&); \
  template StatusOr<T> json_read_or<T>(const Json&, const T&, const JsonWhere&);
LJ_JSON_READ(bool)
LJ_JSON_READ(int)
LJ_JSON_READ(int64_t)
LJ_JSON_READ(uint32_t)
LJ_JSON_READ(uint64_t)
LJ_JSON_READ(double)
LJ_JSON_READ(std::string)
LJ_JSON_READ(std::vector<double>)
#undef LJ_JSON_READ
template StatusOr<int> json_read_in<int>(const Json&, const JsonWhere&, int, int);
template StatusOr<int64_t> json_read_in<int64_t>(const Json&, const JsonWhere&, int64_t, int64_t);
template StatusOr<uint64_t> json_read_in<uint64_t>(const Json&, const JsonWhere&, uint64_t,
                                                   uint64_t);
template StatusOr<double> json_read_in<double>(const Json&, const JsonWhere&, double, double);

}  // namespace lj
