// cli/run_guarded.h: an exception that escapes a command becomes an error Status (one "error:"
// line and exit 1 in main), never std::terminate.
#include "cli/run_guarded.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <stdexcept>

namespace lj::cli {
namespace {

TEST(RunGuarded, PassesTheCommandsStatusThrough) {
  EXPECT_TRUE(run_guarded([] { return ok_status(); }).ok());
  const Status s = run_guarded([] { return invalid_argument("bad flag", "use another"); });
  EXPECT_EQ(s.message(), "bad flag");
  EXPECT_EQ(s.hint(), "use another");
}

TEST(RunGuarded, AnEscapedExceptionIsAnInternalError) {
  const Status s = run_guarded([]() -> Status {
    // The class issue 33 found: nlohmann's value() on a key of another type.
    const nlohmann::json j = nlohmann::json::parse(R"({"id": 5})");
    return invalid_argument(j.value("id", std::string()));  // throws type_error.302
  });
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::internal);
  EXPECT_NE(s.message().find("unexpected exception: [json.exception.type_error.302]"),
            std::string::npos)
      << s.message();
  EXPECT_NE(s.hint().find("bug in ljperf"), std::string::npos);
  const Status other = run_guarded([]() -> Status { throw 42; });
  EXPECT_EQ(other.code(), StatusCode::internal);
  EXPECT_NE(other.message().find("not a std::exception"), std::string::npos);
}

}  // namespace
}  // namespace lj::cli
