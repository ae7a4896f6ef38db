#include "faults/fault_set.h"

#include <utility>

namespace fathom::faults {
namespace {

struct KindName {
  const char* operator()(const LinkFlapModel&) const { return "link_flap"; }
  const char* operator()(const HostCrashModel&) const { return "host_crash"; }
  const char* operator()(const BlackHoleModel&) const { return "black_hole"; }
  const char* operator()(const MtuModel&) const { return "mtu"; }
  const char* operator()(const BernoulliLoss&) const { return "loss"; }
  const char* operator()(const GilbertElliottLoss&) const { return "gilbert_elliott"; }
  const char* operator()(const CorruptionModel&) const { return "corrupt"; }
  const char* operator()(const FecModel&) const { return "fec"; }
  const char* operator()(const DelayModel&) const { return "delay"; }
};

}  // namespace

const char* ModelKindName(const Model& m) { return std::visit(KindName{}, m); }

void FaultSet::Add(Model model, std::string label) {
  // Keep the physical order (the variant's alternative order); stable among
  // models of one stage so scenario order decides ties.
  size_t pos = models_.size();
  while (pos > 0 && models_[pos - 1].index() > model.index()) --pos;
  models_.insert(models_.begin() + static_cast<std::ptrdiff_t>(pos), std::move(model));
  labels_.insert(labels_.begin() + static_cast<std::ptrdiff_t>(pos), std::move(label));
}

void FaultSet::SyncTo(Picoseconds now) {
  for (Model& m : models_) {
    if (auto* flap = std::get_if<LinkFlapModel>(&m)) flap->SyncTo(now);
  }
}

const Counters& FaultSet::counters(size_t i) const {
  return std::visit([](const auto& model) -> const Counters& { return model.counters(); },
                    models_[i]);
}

}  // namespace fathom::faults
