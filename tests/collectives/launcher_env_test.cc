// Rank discovery and NCCL settings from a launcher's environment
// (launcher_env.h): an environment map in, `fathom coll`'s settings out, no
// processes. Flags win; bad values name the variable.
#include "transport/collectives/launcher_env.h"

#include <gtest/gtest.h>

namespace fathom::transport::coll {
namespace {

StatusOr<LaunchSettings> Resolve(const EnvMap& env, const std::set<std::string>& given = {},
                                 LaunchSettings flags = {}) {
  return ResolveLaunch(flags, given, env, nullptr);
}

TEST(LauncherEnvTest, NothingSetKeepsTheFlagDefaults) {
  auto s = Resolve({{"HOME", "/root"}});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->rank, -1);
  EXPECT_EQ(s->nranks, 0);
  EXPECT_EQ(s->bootstrap, "127.0.0.1:18515");
  EXPECT_EQ(s->algo, "auto");
}

// `mpirun -np 4 fathom coll allreduce --backend verbs` needed --rank and
// --nranks on every process.
TEST(LauncherEnvTest, EachLauncherGivesRankAndSize) {
  struct Case {
    EnvMap env;
    int rank, size;
  } cases[] = {
      {{{"OMPI_COMM_WORLD_RANK", "3"}, {"OMPI_COMM_WORLD_SIZE", "4"}}, 3, 4},
      {{{"PMI_RANK", "1"}, {"PMI_SIZE", "2"}}, 1, 2},
      {{{"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "8"}}, 5, 8},
      {{{"RANK", "0"}, {"WORLD_SIZE", "16"}}, 0, 16},
  };
  for (const Case& c : cases) {
    std::vector<std::string> notes;
    auto s = ResolveLaunch({}, {}, c.env, &notes);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    EXPECT_EQ(s->rank, c.rank);
    EXPECT_EQ(s->nranks, c.size);
    ASSERT_EQ(notes.size(), 1u);
    EXPECT_NE(notes[0].find("rank " + std::to_string(c.rank)), std::string::npos) << notes[0];
  }
}

TEST(LauncherEnvTest, TheInnermostLauncherWins) {
  // torchrun under srun: SLURM_PROCID is the node, RANK the process.
  auto s =
      Resolve({{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "2"}, {"RANK", "5"}, {"WORLD_SIZE", "8"}});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->rank, 5);
  EXPECT_EQ(s->nranks, 8);
  // mpirun inside a Slurm allocation.
  s = Resolve({{"SLURM_PROCID", "0"},
               {"SLURM_NTASKS", "1"},
               {"OMPI_COMM_WORLD_RANK", "2"},
               {"OMPI_COMM_WORLD_SIZE", "3"}});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->rank, 2);
  EXPECT_EQ(s->nranks, 3);
  // RANK alone (no WORLD_SIZE) is not torchrun's.
  s = Resolve({{"RANK", "1"}});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->rank, -1);
}

TEST(LauncherEnvTest, FlagsWinOverTheEnvironment) {
  LaunchSettings flags;
  flags.rank = 1;
  flags.nranks = 2;
  flags.bootstrap = "10.0.0.1:9000";
  flags.ib_timeout = 22;
  flags.algo = "ring";
  const EnvMap env = {{"OMPI_COMM_WORLD_RANK", "3"}, {"OMPI_COMM_WORLD_SIZE", "4"},
                      {"MASTER_ADDR", "h0"},         {"MASTER_PORT", "29500"},
                      {"NCCL_IB_TIMEOUT", "18"},     {"NCCL_ALGO", "Tree"}};
  auto s = Resolve(env, {"--rank", "--nranks", "--bootstrap", "--ib-timeout", "--algo"}, flags);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->rank, 1);
  EXPECT_EQ(s->nranks, 2);
  EXPECT_EQ(s->bootstrap, "10.0.0.1:9000");
  EXPECT_EQ(s->ib_timeout, 22);
  EXPECT_EQ(s->algo, "ring");
  // Only --rank typed: the size still comes from the launcher.
  s = Resolve(env, {"--rank"}, flags);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->rank, 1);
  EXPECT_EQ(s->nranks, 4);
  EXPECT_EQ(s->bootstrap, "h0:29500");
  EXPECT_EQ(s->ib_timeout, 18);
  EXPECT_EQ(s->algo, "tree");
}

// torchrun's agent can hold MASTER_PORT for its own store: rank 0's
// bootstrap would fail to bind it.
TEST(LauncherEnvTest, TorchrunAgentStoreMovesTheBootstrapToTheNextPort) {
  auto s = Resolve({{"MASTER_ADDR", "10.0.0.5"},
                    {"MASTER_PORT", "29500"},
                    {"TORCHELASTIC_USE_AGENT_STORE", "True"}});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->bootstrap, "10.0.0.5:29501");
  s = Resolve({{"MASTER_ADDR", "10.0.0.5"},
               {"MASTER_PORT", "29500"},
               {"TORCHELASTIC_USE_AGENT_STORE", "False"}});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->bootstrap, "10.0.0.5:29500");
  EXPECT_FALSE(Resolve({{"MASTER_ADDR", "10.0.0.5"},
                        {"MASTER_PORT", "65535"},
                        {"TORCHELASTIC_USE_AGENT_STORE", "True"}})
                   .ok());
}

TEST(LauncherEnvTest, NcclVariablesMapToTheOptions) {
  auto s = Resolve({{"NCCL_IB_TIMEOUT", "20"},
                    {"NCCL_IB_RETRY_CNT", "5"},
                    {"NCCL_IB_QPS_PER_CONNECTION", "4"},
                    {"NCCL_IB_SPLIT_DATA_ON_QPS", "1"},
                    {"NCCL_IB_GID_INDEX", "3"},
                    {"NCCL_IB_TC", "106"},
                    {"NCCL_IB_HCA", "=mlx5_1:2,mlx5_0:1"},
                    {"NCCL_ALGO", "ring,tree"}});
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->ib_timeout, 20);
  EXPECT_EQ(s->retry_cnt, 5);
  EXPECT_EQ(s->qps_per_connection, 4);
  EXPECT_EQ(s->channels, 1);  // NCCL's QPs per connection are not its channels
  EXPECT_EQ(s->gid_index, 3);
  EXPECT_EQ(s->traffic_class, 106);
  EXPECT_EQ(s->split_data_on_qps, 1);
  EXPECT_EQ(s->algo, "auto");
  EXPECT_TRUE(s->hca.exact);
  EXPECT_EQ(s->hca.entries.size(), 2u);
  auto dev = PickDevice(s->hca, {"mlx5_0", "mlx5_1"});
  ASSERT_TRUE(dev.ok());
  EXPECT_EQ(dev->first, "mlx5_1");
  EXPECT_EQ(dev->second, 2);
  s = Resolve({{"NCCL_ALGO", "^Ring"}});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->algo, "tree");
  s = Resolve({{"NCCL_ALGO", "RING,NVLS"}});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->algo, "ring");
}

// NCCL's NCCL_IB_HCA matching: name prefixes, '=' exact names, '^' all but;
// the first match (one device per rank here).
TEST(LauncherEnvTest, IbHcaSelectsLikeNccl) {
  const std::vector<std::string> devs = {"mlx5_0", "mlx5_1", "mlx5_10", "rxe0"};
  auto pick = [&](const std::string& value) {
    auto s = Resolve({{"NCCL_IB_HCA", value}});
    EXPECT_TRUE(s.ok()) << value;
    return PickDevice(s->hca, devs);
  };
  EXPECT_EQ(pick("mlx5")->first, "mlx5_0");  // prefix
  EXPECT_EQ(pick("mlx5_1:1")->first, "mlx5_1");
  EXPECT_EQ(pick("mlx5_1:1")->second, 1);
  EXPECT_EQ(pick("=mlx5_10")->first, "mlx5_10");
  EXPECT_EQ(pick("^mlx5")->first, "rxe0");
  EXPECT_EQ(pick("^=mlx5_0")->first, "mlx5_1");
  EXPECT_EQ(pick("rxe,mlx5_0")->first, "rxe0");  // the list's order
  auto none = pick("=mlx5");
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("NCCL_IB_HCA='=mlx5': selects none of the devices here "
                                         "(mlx5_0, mlx5_1, mlx5_10, rxe0)"),
            std::string::npos)
      << none.status().message();
  EXPECT_FALSE(pick("^mlx5,rxe").ok());
  // --ib-dev typed: the variable is not read.
  auto s = Resolve({{"NCCL_IB_HCA", "mlx5_0"}}, {"--ib-dev"});
  ASSERT_TRUE(s.ok());
  EXPECT_TRUE(s->hca.entries.empty());
}

TEST(LauncherEnvTest, InvalidValuesNameTheVariable) {
  const std::pair<EnvMap, std::string> cases[] = {
      {{{"NCCL_IB_TIMEOUT", "40"}}, "NCCL_IB_TIMEOUT='40'"},
      {{{"NCCL_IB_TIMEOUT", "fast"}}, "NCCL_IB_TIMEOUT='fast'"},
      {{{"NCCL_IB_RETRY_CNT", "8"}}, "NCCL_IB_RETRY_CNT='8'"},
      {{{"NCCL_IB_QPS_PER_CONNECTION", "0"}}, "NCCL_IB_QPS_PER_CONNECTION='0'"},
      {{{"NCCL_IB_QPS_PER_CONNECTION", "129"}}, "NCCL_IB_QPS_PER_CONNECTION='129'"},
      {{{"NCCL_IB_SPLIT_DATA_ON_QPS", "2"}}, "NCCL_IB_SPLIT_DATA_ON_QPS='2'"},
      {{{"NCCL_IB_GID_INDEX", "x"}}, "NCCL_IB_GID_INDEX='x'"},
      {{{"NCCL_IB_TC", "256"}}, "NCCL_IB_TC='256'"},
      {{{"NCCL_IB_HCA", "mlx5_0:x"}}, "NCCL_IB_HCA='mlx5_0:x'"},
      {{{"NCCL_IB_HCA", "mlx5_0,,mlx5_1"}}, "NCCL_IB_HCA='mlx5_0,,mlx5_1'"},
      {{{"NCCL_ALGO", "NVLS"}}, "NCCL_ALGO='NVLS'"},
      {{{"NCCL_ALGO", "Rings"}}, "NCCL_ALGO='Rings'"},
      {{{"OMPI_COMM_WORLD_RANK", "4"}, {"OMPI_COMM_WORLD_SIZE", "4"}}, "OMPI_COMM_WORLD_RANK='4'"},
      {{{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "0"}}, "SLURM_NTASKS='0'"},
      {{{"MASTER_ADDR", "h0"}, {"MASTER_PORT", "70000"}}, "MASTER_PORT='70000'"},
  };
  for (const auto& [env, want] : cases) {
    auto s = Resolve(env);
    ASSERT_FALSE(s.ok()) << want;
    EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(s.status().message().find(want), std::string::npos) << s.status().message();
  }
  // A typed flag makes its variable irrelevant, even when it is invalid.
  EXPECT_TRUE(Resolve({{"NCCL_IB_TIMEOUT", "40"}}, {"--ib-timeout"}).ok());
}

}  // namespace
}  // namespace fathom::transport::coll
