#include "transport/collectives/launcher_env.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <charconv>

extern char** environ;  // NOLINT: POSIX

namespace fathom::transport::coll {
namespace {

const std::string* Find(const EnvMap& env, const std::string& name) {
  auto it = env.find(name);
  return it == env.end() ? nullptr : &it->second;
}

// The whole value as a decimal integer in [lo, hi]; the error names the
// variable, its value and the range.
StatusOr<int> IntVar(const std::string& name, const std::string& value, int lo, int hi) {
  int v = 0;
  const char* end = value.data() + value.size();
  auto [p, ec] = std::from_chars(value.data(), end, v);
  if (ec != std::errc() || p != end || v < lo || v > hi) {
    return InvalidArgument(name + "='" + value + "': expected an integer in " + std::to_string(lo) +
                           ".." + std::to_string(hi));
  }
  return v;
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    const size_t at = s.find(sep, start);
    out.push_back(s.substr(start, at - start));
    if (at == std::string::npos) break;
    start = at + 1;
  }
  return out;
}

struct RankSource {
  const char* rank;
  const char* size;
  const char* launcher;
};
// The innermost launcher first: torchrun started by srun sees SLURM_PROCID
// (its node) and RANK (its own).
constexpr RankSource kRankSources[] = {
    {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "Open MPI"},
    {"RANK", "WORLD_SIZE", "torchrun"},
    {"PMI_RANK", "PMI_SIZE", "PMI"},
    {"SLURM_PROCID", "SLURM_NTASKS", "Slurm"},
};

// NCCL_ALGO: "Ring", "Tree", "ring,tree", "^tree" (all but), any case.
// NCCL's other algorithms exist only on GPUs; naming only those is an
// error, as is a per-collective list.
StatusOr<std::string> AlgoFromNccl(const std::string& value) {
  const std::string v = Lower(value);
  if (v.find(':') != std::string::npos || v.find(';') != std::string::npos) {
    return InvalidArgument("NCCL_ALGO='" + value +
                           "': per-collective lists are not supported here; use --algo");
  }
  const bool exclude = !v.empty() && v[0] == '^';
  bool ring = false, tree = false;
  for (const std::string& raw : Split(exclude ? v.substr(1) : v, ',')) {
    std::string a = raw;
    a.erase(std::remove_if(a.begin(), a.end(), [](unsigned char c) { return std::isspace(c); }),
            a.end());
    if (a == "ring") {
      ring = true;
    } else if (a == "tree") {
      tree = true;
    } else if (a != "collnetdirect" && a != "collnetchain" && a != "collnet" && a != "nvls" &&
               a != "nvlstree" && a != "pat") {
      return InvalidArgument("NCCL_ALGO='" + value + "': unknown algorithm '" + raw +
                             "' (NCCL's: Ring, Tree, CollnetDirect, CollnetChain, NVLS, "
                             "NVLSTree, PAT)");
    }
  }
  if (exclude) {
    ring = !ring;
    tree = !tree;
  }
  if (ring && tree) return std::string("auto");
  if (ring) return std::string("ring");
  if (tree) return std::string("tree");
  return InvalidArgument("NCCL_ALGO='" + value +
                         "': leaves neither Ring nor Tree, the only algorithms here");
}

}  // namespace

EnvMap ProcessEnvironment() {
  EnvMap env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string kv = *e;
    const size_t eq = kv.find('=');
    if (eq != std::string::npos) env.emplace(kv.substr(0, eq), kv.substr(eq + 1));
  }
  return env;
}

StatusOr<LaunchSettings> ResolveLaunch(const LaunchSettings& flags,
                                       const std::set<std::string>& given, const EnvMap& env,
                                       std::vector<std::string>* notes) {
  LaunchSettings s = flags;
  auto typed = [&](const char* flag) { return given.count(flag) > 0; };
  auto note = [&](const std::string& line) {
    if (notes != nullptr) notes->push_back(line);
  };

  if (!typed("--rank") || !typed("--nranks")) {
    for (const RankSource& src : kRankSources) {
      const std::string* r = Find(env, src.rank);
      const std::string* n = Find(env, src.size);
      if (r == nullptr || n == nullptr) continue;
      FATHOM_ASSIGN_OR_RETURN(int size, IntVar(src.size, *n, 1, 1 << 20));
      FATHOM_ASSIGN_OR_RETURN(int rank, IntVar(src.rank, *r, 0, size - 1));
      if (!typed("--rank")) s.rank = rank;
      if (!typed("--nranks")) s.nranks = size;
      note(std::string("rank ") + std::to_string(s.rank) + " of " + std::to_string(s.nranks) +
           " from " + src.launcher + " (" + src.rank + ", " + src.size + ")");
      break;
    }
  }

  if (!typed("--bootstrap")) {
    const std::string* addr = Find(env, "MASTER_ADDR");
    const std::string* port = Find(env, "MASTER_PORT");
    if (addr != nullptr && port != nullptr) {
      if (addr->empty()) return InvalidArgument("MASTER_ADDR is set but empty");
      FATHOM_ASSIGN_OR_RETURN(int p, IntVar("MASTER_PORT", *port, 1, 65535));
      // torchrun's agent may serve its own store on MASTER_PORT and hand it
      // to the workers (it says so in TORCHELASTIC_USE_AGENT_STORE): then
      // rank 0 could not bind that port; the next one is used.
      const std::string* agent = Find(env, "TORCHELASTIC_USE_AGENT_STORE");
      const bool taken = agent != nullptr && Lower(*agent) == "true";
      if (taken && p == 65535) {
        return InvalidArgument(
            "MASTER_PORT='65535': torchrun's agent holds it (TORCHELASTIC_USE_AGENT_STORE) and "
            "there is no next port for rank 0's bootstrap; use --bootstrap");
      }
      s.bootstrap = *addr + ":" + std::to_string(taken ? p + 1 : p);
      note(
          "bootstrap " + s.bootstrap + " from MASTER_ADDR, MASTER_PORT" +
          (taken ? " + 1 (torchrun's agent holds MASTER_PORT: TORCHELASTIC_USE_AGENT_STORE)" : ""));
    }
  }

  struct IntKnob {
    const char* var;
    const char* flag;
    int* field;
    int lo, hi;
  };
  const IntKnob knobs[] = {
      {"NCCL_IB_TIMEOUT", "--ib-timeout", &s.ib_timeout, 0, 31},
      {"NCCL_IB_RETRY_CNT", "--retry-cnt", &s.retry_cnt, 0, 7},
      // NCCL's QPs per connection (not its channels: multi_qp.h), 1..128
      // and 0|1 as NCCL's env.rst accepts them.
      {"NCCL_IB_QPS_PER_CONNECTION", "--qps-per-connection", &s.qps_per_connection, 1, 128},
      {"NCCL_IB_SPLIT_DATA_ON_QPS", "--split-data-on-qps", &s.split_data_on_qps, 0, 1},
      {"NCCL_IB_GID_INDEX", "--gid-index", &s.gid_index, -1, 255},
      {"NCCL_IB_TC", "--tc", &s.traffic_class, 0, 255},
  };
  for (const IntKnob& k : knobs) {
    const std::string* v = Find(env, k.var);
    if (v == nullptr || typed(k.flag)) continue;
    FATHOM_ASSIGN_OR_RETURN(*k.field, IntVar(k.var, *v, k.lo, k.hi));
    note(std::string(k.flag) + " " + std::to_string(*k.field) + " from " + k.var);
  }

  // NCCL_IB_HCA: which device is only known against the device list
  // (PickDevice); here it is parsed, and bad syntax is an error at once.
  if (const std::string* hca = Find(env, "NCCL_IB_HCA");
      hca != nullptr && !hca->empty() && !typed("--ib-dev")) {
    HcaSpec h;
    h.text = *hca;
    std::string v = *hca;
    if (v[0] == '^') {
      h.exclude = true;
      v = v.substr(1);
    }
    if (!v.empty() && v[0] == '=') {
      h.exact = true;
      v = v.substr(1);
    }
    for (const std::string& entry : Split(v, ',')) {
      const size_t colon = entry.find(':');
      const std::string dev = entry.substr(0, colon);
      if (dev.empty()) return InvalidArgument("NCCL_IB_HCA='" + *hca + "': an empty device name");
      int port = 0;
      if (colon != std::string::npos) {
        FATHOM_ASSIGN_OR_RETURN(port, IntVar("NCCL_IB_HCA='" + *hca + "': the port of " + dev,
                                             entry.substr(colon + 1), 1, 255));
      }
      h.entries.emplace_back(dev, port);
    }
    s.hca = std::move(h);
  }

  if (const std::string* algo = Find(env, "NCCL_ALGO"); algo != nullptr && !typed("--algo")) {
    FATHOM_ASSIGN_OR_RETURN(s.algo, AlgoFromNccl(*algo));
    note("--algo " + s.algo + " from NCCL_ALGO");
  }
  return s;
}

StatusOr<std::pair<std::string, int>> PickDevice(const HcaSpec& hca,
                                                 const std::vector<std::string>& devices) {
  auto matches = [&](const std::string& dev, const std::string& name) {
    return hca.exact ? dev == name : dev.rfind(name, 0) == 0;  // NCCL: prefix unless '='
  };
  if (hca.exclude) {
    for (const std::string& dev : devices) {
      bool excluded = false;
      for (const auto& e : hca.entries) excluded = excluded || matches(dev, e.first);
      if (!excluded) return std::pair<std::string, int>(dev, 0);
    }
  } else {
    for (const auto& e : hca.entries) {
      for (const std::string& dev : devices) {
        if (matches(dev, e.first)) return std::pair<std::string, int>(dev, e.second);
      }
    }
  }
  std::string names;
  for (const std::string& d : devices) names += (names.empty() ? "" : ", ") + d;
  return InvalidArgument("NCCL_IB_HCA='" + hca.text + "': selects none of the devices here (" +
                         (names.empty() ? std::string("none") : names) + ")");
}

}  // namespace fathom::transport::coll
