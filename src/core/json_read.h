// The one checked way to read a value out of a JSON document that came from outside the process
// (a user's config, a tokenizer.json, a cache or record file): never throws, checks the type and
// the range, and names the file and the key in its error. nlohmann-json's own readers
// (.value(key, default), .get<T>(), .at(key)) throw on a wrong type or a missing key, and an
// escaped exception aborts ljperf; tools/json_lint.sh allows them only in json_read.cc.
//
//   JsonWhere at{"ds.json"};                        // the document's root, in file ds.json
//   const Json& zero = json_member(j, "zero_optimization");
//   LJ_ASSIGN_OR_RETURN(int64_t stage, json_read_in<int64_t>(json_member(zero, "stage"),
//                                                            at / "zero_optimization" / "stage",
//                                                            0, 3));
//   -> "ds.json: zero_optimization.stage must be in [0, 3], got 7"
//
// A null value is a missing one: json_read fails ("is missing"), json_read_or gives the fallback.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"

namespace lj {

using Json = nlohmann::json;

// Where a value is, for messages: the file, the key path in it, and the hint of the error.
struct JsonWhere {
  std::string file;
  std::string path;  // "" for the document's root; "model.vocab", "gemm[3].seconds"
  std::string hint;

  // A constructor rather than an aggregate: GCC 12's -Wmissing-field-initializers (an error with
  // CI's -Werror) flags a brace list that leaves the path or hint out.
  JsonWhere(std::string file_name,
            std::string json_path = {},  // NOLINT(google-explicit-constructor)
            std::string hint_text = {})
      : file(std::move(file_name)), path(std::move(json_path)), hint(std::move(hint_text)) {}

  JsonWhere operator/(std::string_view key) const;  // the member `key` of this value
  JsonWhere operator[](size_t index) const;         // the element `index` of this array
  // "file: path", or "file" for the root.
  std::string name() const;
};

// The member `key` of `obj`; a null value when `obj` is not an object or has no such member.
const Json& json_member(const Json& obj, std::string_view key);

// The value as a T; an error naming `at` when it is null (missing), of another type, or out of
// T's range. T: bool, int, int64_t, uint32_t, uint64_t, double, std::string,
// std::vector<double>. Integers must be JSON integers (3, not 3.0); a double accepts any number.
template <class T>
StatusOr<T> json_read(const Json& v, const JsonWhere& at);

// As json_read, but a null (missing) value gives `fallback`.
template <class T>
StatusOr<T> json_read_or(const Json& v, const T& fallback, const JsonWhere& at);

// As json_read, and the value must lie in [lo, hi]. T: int, int64_t, uint64_t, double.
template <class T>
StatusOr<T> json_read_in(const Json& v, const JsonWhere& at, T lo, T hi);

// An error naming `at` unless `v` is an object (an array).
Status json_need_object(const Json& v, const JsonWhere& at);
Status json_need_array(const Json& v, const JsonWhere& at);

// Peeks, for code that branches on what a value holds (no error to report): the value when it
// has that type (and, for integers, fits), else nothing.
const std::string* json_string_if(const Json& v);
std::optional<bool> json_bool_if(const Json& v);
std::optional<double> json_number_if(const Json& v);
std::optional<int64_t> json_int_if(const Json& v);
std::optional<uint64_t> json_uint_if(const Json& v);

}  // namespace lj
