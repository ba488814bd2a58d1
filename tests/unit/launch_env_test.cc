// Tier 1: where a distributed launch's rank, world size and local rank come from
// (runtime/launch_env.h), over fake environments: precedence, each launcher family alone,
// shadowed variables, bad values.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "runtime/launch_env.h"

namespace lj {
namespace {

// An EnvLookup over a map; the map must outlive the lookup.
EnvLookup fake_env(const std::map<std::string, std::string>& vars) {
  return [&vars](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

TEST(LaunchEnv, NoneSetIsOneProcess) {
  const std::map<std::string, std::string> vars;
  auto e = resolve_launch_env(fake_env(vars));
  ASSERT_TRUE(e.ok()) << e.status().to_string();
  EXPECT_EQ(e->rank, 0);
  EXPECT_EQ(e->world_size, 1);
  EXPECT_EQ(e->local_rank, 0);
  EXPECT_FALSE(e->launched());
  EXPECT_TRUE(e->shadowed.empty());
}

TEST(LaunchEnv, FirstListedVariableWins) {
  const std::map<std::string, std::string> vars = {
      {"RANK", "1"},         {"OMPI_COMM_WORLD_RANK", "3"}, {"OMPI_COMM_WORLD_SIZE", "4"},
      {"SLURM_NTASKS", "4"}, {"SLURM_LOCALID", "2"},        {"MPI_LOCALRANKID", "1"},
  };
  auto e = resolve_launch_env(fake_env(vars));
  ASSERT_TRUE(e.ok()) << e.status().to_string();
  EXPECT_EQ(e->rank, 1);
  EXPECT_EQ(e->rank_var, "RANK");
  EXPECT_EQ(e->world_size, 4);
  EXPECT_EQ(e->world_size_var, "OMPI_COMM_WORLD_SIZE");
  EXPECT_EQ(e->local_rank, 1);
  EXPECT_EQ(e->local_rank_var, "MPI_LOCALRANKID");
  EXPECT_TRUE(e->launched());
  // Disagreeing lower-precedence values are reported; agreeing ones (SLURM_NTASKS=4) are not.
  ASSERT_EQ(e->shadowed.size(), 2u);
  EXPECT_EQ(e->shadowed[0], "OMPI_COMM_WORLD_RANK=3 (RANK=1 is used)");
  EXPECT_EQ(e->shadowed[1], "SLURM_LOCALID=2 (MPI_LOCALRANKID=1 is used)");
}

TEST(LaunchEnv, EachLauncherFamilyAlone) {
  const std::map<std::string, std::string> pmi = {{"PMI_RANK", "2"}, {"PMI_SIZE", "3"}};
  auto e = resolve_launch_env(fake_env(pmi));
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->rank, 2);
  EXPECT_EQ(e->world_size, 3);
  EXPECT_EQ(e->local_rank, 0);
  EXPECT_TRUE(e->local_rank_var.empty());
  const std::map<std::string, std::string> slurm = {
      {"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "8"}, {"SLURM_LOCALID", "1"}};
  e = resolve_launch_env(fake_env(slurm));
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->rank, 5);
  EXPECT_EQ(e->world_size, 8);
  EXPECT_EQ(e->local_rank, 1);
  // An empty variable counts as unset.
  const std::map<std::string, std::string> empty_rank = {
      {"RANK", ""}, {"PMI_RANK", "1"}, {"WORLD_SIZE", "2"}};
  e = resolve_launch_env(fake_env(empty_rank));
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->rank_var, "PMI_RANK");
}

TEST(LaunchEnv, BadValuesAreErrors) {
  for (const char* bad : {"abc", "-1", "1.5", "2x", " "}) {
    const std::map<std::string, std::string> vars = {{"RANK", bad}, {"WORLD_SIZE", "4"}};
    auto e = resolve_launch_env(fake_env(vars));
    ASSERT_FALSE(e.ok()) << bad;
    EXPECT_EQ(e.status().code(), StatusCode::invalid_argument);
    EXPECT_NE(e.status().message().find("RANK"), std::string::npos) << e.status().message();
  }
  // A bad value is an error even when a higher-precedence variable is set: it is a broken export.
  const std::map<std::string, std::string> shadowed_bad = {{"RANK", "0"}, {"PMI_RANK", "x"}};
  EXPECT_FALSE(resolve_launch_env(fake_env(shadowed_bad)).ok());
  const std::map<std::string, std::string> rank_too_big = {{"RANK", "4"}, {"WORLD_SIZE", "4"}};
  EXPECT_FALSE(resolve_launch_env(fake_env(rank_too_big)).ok());
  const std::map<std::string, std::string> no_world = {{"RANK", "1"}};
  EXPECT_FALSE(resolve_launch_env(fake_env(no_world)).ok());
  const std::map<std::string, std::string> zero_world = {{"WORLD_SIZE", "0"}};
  EXPECT_FALSE(resolve_launch_env(fake_env(zero_world)).ok());
  const std::map<std::string, std::string> local_too_big = {
      {"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "2"}};
  EXPECT_FALSE(resolve_launch_env(fake_env(local_too_big)).ok());
}

}  // namespace
}  // namespace lj
