// The fault timeline of a scenario (proto/faults.proto) on the faults side:
// the catalogue of fault kinds with their parameters and defaults (`fathom
// faults`), validation of each FaultSpec with errors that name the scenario
// line (through the YAML loader's SourceMap), the `--fault` flag syntax, and
// BuildModel, which turns a spec into the model for one attachment point.
// Resolving targets (link names, tiers, hosts) needs the topology, so the
// caller (fabric/sim) does that and passes what it found in a Placement.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "base/units.h"
#include "faults/fault_set.h"
#include "proto/faults.pb.h"
#include "proto/yaml_loader.h"

namespace fathom::faults {

struct ParamInfo {
  std::string_view name;
  std::string_view type;           // "probability", "us", "bytes", ...
  std::string_view default_value;  // "required" when there is none
  std::string_view help;
};

struct KindInfo {
  std::string_view name;
  std::string_view summary;
  std::vector<ParamInfo> params;  // kind-specific; the common ones are in CommonParams()
};

// Every fault kind, in the order `fathom faults` lists them.
const std::vector<KindInfo>& FaultKinds();
const KindInfo* FindFaultKind(std::string_view name);
// Parameters every kind takes: name, link, from, host, start_us, duration_us, filter.
const std::vector<ParamInfo>& CommonParams();

// Checks one fault on its own: a known kind, only that kind's parameters,
// values in range (probabilities in [0, 1], BERs in [0, 0.5), times >= 0 and
// finite, a flap's outage shorter than its period), a target. `path` is the
// spec's field path in the scenario ("faults[3]"); errors come from
// map.Error(), i.e. "file:line:col: faults[3].pre_fec_ber: ...".
Status ValidateFaultSpec(const proto::FaultSpec& spec, std::string_view path,
                         const config::SourceMap& map);
// Each fault, then no two faults of one kind on one target whose active
// times overlap. `path` is the repeated field's path ("faults").
Status ValidateFaults(const google::protobuf::RepeatedPtrField<proto::FaultSpec>& faults,
                      std::string_view path, const config::SourceMap& map);

// "<name>" or "<kind>#<index>": how reports name a fault.
std::string FaultName(const proto::FaultSpec& spec, int index);
// When the spec is active (link faults: see FlapScheduleOf). A fault placed
// at an iteration (at_iteration) counts from `origin`, the time its
// iteration posted its first collective; others ignore it.
Window WindowOf(const proto::FaultSpec& spec, Picoseconds origin = Picoseconds());
// link_down / link_flap outages.
FlapSchedule FlapScheduleOf(const proto::FaultSpec& spec, Picoseconds origin = Picoseconds());
Picoseconds MicrosecondsToPs(double us);

// pfc_storm (CASES.md 16): not a frame model but a behaviour of the host's
// NIC, which the caller drives (it sends PAUSE for the priority, refreshed,
// over the window). The priority defaults to 3: RoCE's lossless class as
// the mlx5 deployment guides set it (DSCP 26 -> priority 3).
struct PfcStorm {
  int priority = 3;
  Window window;
};
PfcStorm PfcStormOf(const proto::FaultSpec& spec);

// Where one model of a spec is attached, resolved by the caller.
struct Placement {
  uint64_t scenario_seed = 0;
  // Names the model in reports and seeds its stream: StreamSeed(seed,
  // HashId(label)). Unique per attachment, e.g. "loss#0@leaf1-spine3>spine3".
  std::string label;
  BitsPerSecond link_rate;    // checked against the FEC mode; 0 = not checked
  int32_t crashed_host = -1;  // host_crash: the host's node id
  // Host name -> node id, for filters on src_host / dst_host.
  std::function<StatusOr<int32_t>(std::string_view)> find_host;
  // A fault placed at an iteration: when that iteration posted its first
  // collective (WindowOf's origin).
  Picoseconds origin;
};

// The model for one attachment of a validated spec. Errors: an FEC mode the
// link rate does not use, a filter host that does not exist, a link budget
// that makes no sense.
StatusOr<Model> BuildModel(const proto::FaultSpec& spec, const Placement& placement);

// Parses a `--fault` flag: the scenario's syntax as a YAML flow map,
// "{kind: loss, link: leaf1-spine3, rate: 0.01}", or the same as
// "kind=loss,link=leaf1-spine3,rate=0.01" (dotted keys reach nested fields:
// "filter.qpn=17"). Validated like a scenario entry; errors name "--fault".
StatusOr<proto::FaultSpec> ParseFaultFlag(std::string_view text);
// Parses every `--fault` flag and appends them to a scenario's timeline
// (`fathom sim --fault ...`); the first bad one is the error.
Status AppendFaultFlags(const std::vector<std::string>& flags,
                        google::protobuf::RepeatedPtrField<proto::FaultSpec>* faults);

}  // namespace fathom::faults
