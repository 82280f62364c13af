// Dynamic loss scaling with overflow skipping, as mixed-precision frameworks do it (PyTorch's
// GradScaler, torch_npu's on the float status): each step the loss is multiplied by `scale`
// before the backward pass; when the step's float status says an overflow happened (found_inf,
// float_status.h) the optimizer update is skipped and the scale shrinks by `backoff`; after
// `growth_interval` steps in a row without one it grows by `growth`. Plain host logic.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace probelab::probes {

struct LossScalerConfig {
  double initial = 65536.0;
  double backoff = 0.5;             // in (0, 1)
  double growth = 2.0;              // >= 1
  std::uint32_t growth_interval = 2000;  // >= 1
  double min_scale = 1.0;           // the scale never shrinks below this
};

/// One step's decision, for the report.
struct LossScaleStep {
  std::uint32_t rank = 0, step = 0;
  double scale = 0;             // the scale the step ran with
  bool found_inf = false;       // the decision's input (after the all-reduce, if any)
  bool skipped = false;         // the optimizer update was not applied
  std::uint32_t status = 0;     // FloatStatusBits this rank's status task read
  bool local_overflow = false;  // this rank's own verdict before any all-reduce
  bool recovered = false;       // the guard found an overflow the status had lost
  std::uint32_t foreign_resets = 0;  // resets by other clients between the reset and the read (guard)
  bool reduced = false;         // found_inf was all-reduced over the ranks
  double next_scale = 0;        // the scale of the next step
};
nlohmann::json to_json(const LossScaleStep& s);

class LossScaler {
 public:
  explicit LossScaler(LossScalerConfig cfg);
  double scale() const { return scale_; }
  /// Records the step's outcome; returns true when the update must be skipped.
  bool update(bool found_inf);

 private:
  LossScalerConfig cfg_;
  double scale_;
  std::uint32_t good_steps_ = 0;
};

}  // namespace probelab::probes
