#include "tools/perf_output.h"

#include <algorithm>
#include <cstdio>
#include <fstream>

#include "transport/verbs/perf_report.h"

namespace fathom::tools::perf {

void PrintBanner(const Session& s, const PerfFlags& f) {
  const auto& i = s.device->info();
  std::printf("%s", tv::Rule().c_str());
  std::printf("                    fathom perf %s (%s)\n", f.test.c_str(),
              s.client ? "client" : "server");
  std::printf(" Device         : %s\n Number of qps  : %d\t\tTransport type : IB\n", i.name.c_str(),
              f.qps);
  std::printf(" Connection type : RC\n Mtu            : %d[B]\n Link type      : %s\n",
              s.qps[0]->path_mtu(), i.link_layer.c_str());
  std::printf(" GID index      : %d (%s) %s\n", i.gid_index, i.gid_type.c_str(), i.gid.c_str());
  std::printf(" Completions    : %s\n", f.events ? "events (completion channel)" : "polling");
  if (IsBw(f.test) && (s.client || f.bidirectional)) {
    std::printf(" TX depth       : %d\n CQ Moderation  : %d\n", f.tx_depth, CqModeration(f));
    if (f.post_list > 1) std::printf(" Post List      : %d\n", f.post_list);
  }
  if (f.bidirectional) std::printf(" Direction      : bidirectional (figures: both sides' sum)\n");
  if (f.sl != 0 || f.tclass >= 0) {
    std::printf(" SL             : %d\t\tTraffic class : %d\n", f.sl, std::max(0, f.tclass));
  }
  if (f.inline_size >= 0) std::printf(" Max inline data : %d[B]\n", f.inline_size);
  for (int q = 0; q < f.qps; ++q) {
    const auto l = s.qps[static_cast<size_t>(q)]->LocalInfo();
    std::printf(" local address: LID %#06x QPN %#06x PSN %#08x RKey %#08x VAddr %#016llx\n", l.lid,
                l.qpn, l.psn, s.local_mr->rkey(),
                static_cast<unsigned long long>(Addr(s.local.data())));
  }
  std::printf("%s", tv::Rule().c_str());
  std::fflush(stdout);
}

StatusOr<uint64_t> ReadCounter(const std::string& path, const std::string& name) {
  std::ifstream in(path);
  uint64_t v = 0;
  if (!(in >> v)) {
    return InvalidArgument("-W " + name + ": cannot read a counter at " + path);
  }
  return v;
}

StatusOr<std::vector<Counter>> OpenCounters(const std::string& list,
                                            const transport::DeviceInfo& info) {
  std::vector<Counter> out;
  size_t pos = 0;
  while (pos <= list.size() && !list.empty()) {
    const size_t comma = list.find(',', pos);
    const std::string name =
        list.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    pos = comma == std::string::npos ? list.size() + 1 : comma + 1;
    if (name.empty()) continue;
    if (name.find("..") != std::string::npos || name.front() == '/') {
      return InvalidArgument("-W " + name + ": a counter is a path under the port's sysfs folder");
    }
    Counter c;
    c.name = name;
    c.path =
        "/sys/class/infiniband/" + info.name + "/ports/" + std::to_string(info.port) + "/" + name;
    FATHOM_ASSIGN_OR_RETURN(c.before, ReadCounter(c.path, name));
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace fathom::tools::perf
