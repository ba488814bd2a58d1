// The CLI's data-parallel plumbing in one process: the resolution of world size, ZeRO stage and
// buckets (cli/run_config.h), stage 3's refusal, the one-process DistSession, and the error
// output with a rank prefix (core/log.h). Several processes: tests/e2e/dist_benchmark_test.sh.
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include "cli/dist_session.h"
#include "cli/run_config.h"
#include "core/log.h"

namespace lj::cli {
namespace {

TEST(DataParallelSettings, FlagOrDefaultWithoutAFile) {
  RunSettings run;
  DataParallelSettings d = resolve_data_parallel(run, std::nullopt, 2, 1, "mpi");
  EXPECT_EQ(d.zero.stage, 0);
  EXPECT_EQ(d.zero.reduce_bucket_size, 500'000'000);  // DeepSpeed's code default
  EXPECT_EQ(d.zero.allgather_bucket_size, 500'000'000);
  EXPECT_EQ(d.stage_origin, "default");
  run.zero_stage.set_flag(2);
  d = resolve_data_parallel(run, std::nullopt, 2, 1, "mpi");
  EXPECT_EQ(d.zero.stage, 2);
  const std::string text = d.describe();
  EXPECT_NE(text.find("data parallel: 2 ranks (communicator: mpi)"), std::string::npos) << text;
  EXPECT_NE(text.find("zero_optimization.stage = 2  (flag)"), std::string::npos) << text;
  EXPECT_NE(text.find("reduce_bucket_size = 500000000  (DeepSpeed default)"), std::string::npos);
  // DeepSpeed's code default: overlap_comm only at stage 3.
  EXPECT_FALSE(d.zero.overlap_comm);
  EXPECT_NE(text.find("overlap_comm = false  (DeepSpeed default (true for stage 3 only))"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("each blocking where it fills"), std::string::npos) << text;
}

TEST(DataParallelSettings, FromTheDeepSpeedFileWithOrigins) {
  RunSettings run;
  run.world_size = 2;
  run.hidden_size = 64;
  auto ds = parse_deepspeed_config(
      R"({"zero_optimization": {"stage": 1, "reduce_bucket_size": "auto",
          "allgather_bucket_size": 3000}})",
      "ds.json", run);
  ASSERT_TRUE(ds.ok()) << ds.status().to_string();
  const DataParallelSettings d = resolve_data_parallel(run, *ds, 2, 0, "mpi");
  EXPECT_EQ(d.zero.stage, 1);
  EXPECT_EQ(d.zero.reduce_bucket_size, 4096);  // "auto": hidden^2
  EXPECT_EQ(d.zero.allgather_bucket_size, 3000);
  EXPECT_EQ(d.stage_origin, "ds.json: file");
  EXPECT_EQ(d.reduce_bucket_origin, "ds.json: auto: hidden_size^2");
  EXPECT_FALSE(d.zero.overlap_comm);  // DeepSpeed's code default below stage 3
  auto on = parse_deepspeed_config(R"({"zero_optimization": {"stage": 2, "overlap_comm": true}})",
                                   "ds.json", run);
  ASSERT_TRUE(on.ok()) << on.status().to_string();
  EXPECT_TRUE(resolve_data_parallel(run, *on, 2, 0, "mpi").zero.overlap_comm);
}

TEST(DataParallelSettings, StagesZeroToThreeAreSupported) {
  for (int stage : {0, 1, 2, 3}) EXPECT_TRUE(check_zero_supported(ZeroConfig{.stage = stage}).ok());
  const Status s = check_zero_supported(ZeroConfig{.stage = 4});
  EXPECT_EQ(s.code(), StatusCode::invalid_argument);
  EXPECT_NE(s.message().find("stage 4"), std::string::npos) << s.message();
}

// ctest starts no launcher: one process, no data parallelism, no gate, errors pass through.
TEST(DistSession, OneProcessIsSelfWithoutDataParallelism) {
  if (std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr) GTEST_SKIP() << "run under mpirun";
  auto d = DistSession::start(CommOptions{});
  ASSERT_TRUE(d.ok()) << d.status().to_string();
  EXPECT_EQ((*d)->world_size(), 1);
  EXPECT_TRUE((*d)->is_root());
  EXPECT_STREQ((*d)->backend_name(), "self");
  EXPECT_EQ((*d)->data_parallel(ZeroConfig{.stage = 2}).comm, nullptr);
  auto g = (*d)->gather(3.5);
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(*g, std::vector<double>{3.5});
  EXPECT_TRUE((*d)->agree(ok_status()).ok());
  const Status bad = invalid_argument("x");
  EXPECT_EQ((*d)->agree(bad).message(), "x");
  EXPECT_EQ((*d)->finish(bad).message(), "x");  // one process: main() prints it
}

TEST(ErrorOutput, LinesCarryTheRankPrefixToTheChosenFd) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  set_error_output(fds[1], "rank 3: ");
  print_error(invalid_argument("bad thing", "do this"));
  set_error_output(STDERR_FILENO, "");
  ::close(fds[1]);
  char buf[256] = {};
  const ssize_t n = ::read(fds[0], buf, sizeof(buf) - 1);
  ::close(fds[0]);
  ASSERT_GT(n, 0);
  EXPECT_EQ(std::string(buf, static_cast<size_t>(n)),
            "rank 3: error: bad thing\nrank 3: hint: do this\n");
}

// dist/'s lines (a collective's timeout, abort_all_ranks) name their rank exactly once: the
// prefix the output already has, or "rank R: " when a library caller set none.
TEST(ErrorOutput, RankLinesNameTheRankOnce) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  set_error_output(fds[1], "rank 1: ");
  write_rank_error_line(1, "all_reduce did not complete within 3 s");
  set_error_output(fds[1], "");
  write_rank_error_line(2, "error: x; ending every rank");
  set_error_output(STDERR_FILENO, "");
  ::close(fds[1]);
  char buf[256] = {};
  const ssize_t n = ::read(fds[0], buf, sizeof(buf) - 1);
  ::close(fds[0]);
  ASSERT_GT(n, 0);
  EXPECT_EQ(
      std::string(buf, static_cast<size_t>(n)),
      "rank 1: all_reduce did not complete within 3 s\nrank 2: error: x; ending every rank\n");
}

}  // namespace
}  // namespace lj::cli
