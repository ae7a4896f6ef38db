// `fathom faults [KIND] [--json] [--check SPEC]`: lists the fault kinds a
// scenario's timeline (or `fathom sim --fault`) accepts, with their
// parameters and defaults; --check validates one --fault string and prints
// what it parsed to. Exit 2 on an unknown kind or an invalid spec.
#include <google/protobuf/util/json_util.h>

#include <cstdio>
#include <string>

#include "base/json.h"
#include "faults/spec.h"
#include "tools/command.h"

namespace fathom::tools {
namespace {

std::string ParamsJson(const std::vector<faults::ParamInfo>& params) {
  std::string out = "[";
  for (size_t i = 0; i < params.size(); ++i) {
    const faults::ParamInfo& p = params[i];
    out += (i ? "," : "") + std::string("{\"name\":") + JsonString(p.name) +
           ",\"type\":" + JsonString(p.type) + ",\"default\":" + JsonString(p.default_value) +
           ",\"help\":" + JsonString(p.help) + "}";
  }
  return out + "]";
}

void PrintParams(const std::vector<faults::ParamInfo>& params) {
  for (const faults::ParamInfo& p : params) {
    std::printf("    %-16s %-13s default %-22s %s\n", std::string(p.name).c_str(),
                std::string(p.type).c_str(), std::string(p.default_value).c_str(),
                std::string(p.help).c_str());
  }
}

int Run(const std::string& kind, bool json, const std::string& check) {
  if (!check.empty()) {
    auto spec = faults::ParseFaultFlag(check);
    if (!spec.ok()) {
      std::fprintf(stderr, "fathom faults: %s\n", spec.status().message().c_str());
      return kExitUsage;
    }
    std::string out;
    google::protobuf::util::JsonPrintOptions options;
    options.preserve_proto_field_names = true;
    (void)google::protobuf::util::MessageToJsonString(*spec, &out, options);
    std::printf("%s\n", out.c_str());
    return kExitOk;
  }
  std::vector<const faults::KindInfo*> kinds;
  if (!kind.empty()) {
    const faults::KindInfo* k = faults::FindFaultKind(kind);
    if (k == nullptr) {
      std::fprintf(stderr, "fathom faults: unknown fault kind \"%s\" (see `fathom faults`)\n",
                   kind.c_str());
      return kExitUsage;
    }
    kinds.push_back(k);
  } else {
    for (const faults::KindInfo& k : faults::FaultKinds()) kinds.push_back(&k);
  }
  if (json) {
    std::string out = "{\"common\":" + ParamsJson(faults::CommonParams()) + ",\"kinds\":[";
    for (size_t i = 0; i < kinds.size(); ++i) {
      out += (i ? "," : "") + std::string("{\"kind\":") + JsonString(kinds[i]->name) +
             ",\"summary\":" + JsonString(kinds[i]->summary) +
             ",\"params\":" + ParamsJson(kinds[i]->params) + "}";
    }
    std::printf("%s]}\n", out.c_str());
    return kExitOk;
  }
  std::printf("Fault kinds (scenario `faults:` entries, or `fathom sim --fault k=v,...`)\n\n");
  std::printf("  common parameters:\n");
  PrintParams(faults::CommonParams());
  for (const faults::KindInfo* k : kinds) {
    std::printf("\n  %s: %s\n", std::string(k->name).c_str(), std::string(k->summary).c_str());
    PrintParams(k->params);
  }
  return kExitOk;
}

}  // namespace

FATHOM_REGISTER_COMMAND(faults,
                        Command{"faults", "list the fault kinds with their parameters and defaults",
                                [](CLI::App* sub) {
                                  auto kind = std::make_shared<std::string>();
                                  auto check = std::make_shared<std::string>();
                                  auto json = std::make_shared<bool>(false);
                                  sub->add_option("kind", *kind, "only this kind");
                                  sub->add_flag("--json", *json, "machine-readable output");
                                  sub->add_option(
                                      "--check", *check,
                                      "validate one --fault spec (k=v,... or {k: v, ...})");
                                  return [kind, check, json] { return Run(*kind, *json, *check); };
                                },
                                60});

}  // namespace fathom::tools
