// FaultSet: the fault models attached to one link direction (or port, or
// host). The carrier of frames owns one FaultSet per place a fault is
// attached and calls Evaluate() only when the set is non-empty; evaluation
// walks a small vector of std::variant models (a jump table, no virtual call,
// no allocation). Models run in a fixed physical order — link state, host,
// black hole, MTU, loss, corruption, FEC, delay — so a frame dropped early is
// not counted by later models. Not thread-safe: one carrier, one thread.
#pragma once

#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "faults/models.h"

namespace fathom::faults {

using Model = std::variant<LinkFlapModel, HostCrashModel, BlackHoleModel, MtuModel, BernoulliLoss,
                           GilbertElliottLoss, CorruptionModel, FecModel, DelayModel>;

// The kind name of a model, as in scenario files ("loss", "fec", ...).
const char* ModelKindName(const Model& m);

class FaultSet {
 public:
  FaultSet() = default;

  // Adds a model; `label` names it in reports (e.g. "fec@leaf1-spine3>").
  void Add(Model model, std::string label);

  bool empty() const { return models_.empty(); }
  size_t size() const { return models_.size(); }

  // The hot path: one verdict for one frame.
  Verdict Evaluate(const Frame& f) {
    Verdict v;
    for (Model& m : models_) {
      if (!std::visit([&](auto& model) { return model.Apply(f, v); }, m)) break;
    }
    return v;
  }

  // Brings time-driven counters (link_downed) up to `now`.
  void SyncTo(Picoseconds now);

  const Model& model(size_t i) const { return models_[i]; }
  Model& model(size_t i) { return models_[i]; }
  const std::string& label(size_t i) const { return labels_[i]; }
  const Counters& counters(size_t i) const;

 private:
  std::vector<Model> models_;
  std::vector<std::string> labels_;  // cold, parallel to models_
};

}  // namespace fathom::faults
