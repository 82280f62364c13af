#include "probes/loss_scaler.h"

#include <algorithm>

namespace probelab::probes {

nlohmann::json to_json(const LossScaleStep& s) {
  return {{"rank", s.rank},           {"step", s.step},         {"scale", s.scale},
          {"found_inf", s.found_inf}, {"skipped", s.skipped},   {"status", s.status},
          {"local_overflow", s.local_overflow}, {"recovered", s.recovered},
          {"foreign_resets", s.foreign_resets}, {"reduced", s.reduced}, {"next_scale", s.next_scale}};
}

LossScaler::LossScaler(LossScalerConfig cfg) : cfg_(cfg), scale_(cfg.initial) {}

bool LossScaler::update(bool found_inf) {
  if (found_inf) {
    scale_ = std::max(cfg_.min_scale, scale_ * cfg_.backoff);
    good_steps_ = 0;
    return true;
  }
  if (++good_steps_ >= cfg_.growth_interval) {
    scale_ *= cfg_.growth;
    good_steps_ = 0;
  }
  return false;
}

}  // namespace probelab::probes
