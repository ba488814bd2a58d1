// dist_tests' main: runs under mpirun (CTest: dist.np2, dist.np3). Every rank runs every test;
// the first failed check on any rank prints itself and aborts all ranks (MPI_Abort), so a rank
// that leaves a test early can never leave the others waiting in a collective. At the end the
// ranks agree on the verdict, so each exits with the same code.
//
// --comm-timeout=S (before the gtest flags or among them): the collective timeout
// (CommOptions::timeout_seconds); dist.collective_timeout runs a deliberate hang with 2 s.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "dist/communicator.h"
#include "dist_test_util.h"

namespace lj {
namespace {

std::unique_ptr<Communicator> g_comm;

class AbortAllOnFailure : public ::testing::EmptyTestEventListener {
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (!r.failed()) return;
    std::fprintf(stderr, "[rank %d] %s:%d: failure:\n%s\n[rank %d] aborting every rank\n",
                 g_comm->rank(), r.file_name() ? r.file_name() : "?", r.line_number(), r.message(),
                 g_comm->rank());
    std::fflush(stdout);
    std::fflush(stderr);
    g_comm->abort(1);
  }
};

}  // namespace

Communicator& dist_comm() {
  return *g_comm;
}

}  // namespace lj

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  lj::CommOptions options;
  for (int i = 1; i < argc; ++i) {
    constexpr const char* kFlag = "--comm-timeout=";
    if (std::strncmp(argv[i], kFlag, std::strlen(kFlag)) == 0) {
      options.timeout_seconds = std::atof(argv[i] + std::strlen(kFlag));
    }
  }
  auto comm = lj::make_communicator(options);
  if (!comm.ok()) {
    std::fprintf(stderr, "dist_tests: %s\n", comm.status().to_string().c_str());
    return 1;
  }
  lj::g_comm = std::move(*comm);
  const int rank = lj::g_comm->rank();
  std::printf("dist_tests: rank %d of %d (local %d, %s)\n", rank, lj::g_comm->world_size(),
              lj::g_comm->local_rank(), lj::g_comm->backend_name());
  auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
  // Rank 0 prints the usual report; the others print only failures (AbortAllOnFailure).
  if (rank != 0) delete listeners.Release(listeners.default_result_printer());
  listeners.Append(new lj::AbortAllOnFailure);
  const int rc = RUN_ALL_TESTS();
  auto failed = lj::g_comm->all_reduce_sum(rc != 0 ? 1.0 : 0.0);
  if (!failed.ok()) {
    std::fprintf(stderr, "dist_tests: %s\n", failed.status().to_string().c_str());
    return 1;
  }
  const int exit_code = *failed > 0 ? 1 : 0;
  lj::g_comm.reset();
  return exit_code;
}
