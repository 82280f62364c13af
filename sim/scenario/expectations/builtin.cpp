// The built-in expectation kinds, registered explicitly: one line per kind, one file per kind.
#include "sim/scenario/expectation.h"

namespace probelab::sim {
namespace expect {
void register_detection_expectation(ExpectationRegistry& r);
void register_no_detection_expectation(ExpectationRegistry& r);
void register_comparison_expectation(ExpectationRegistry& r);
void register_consistency_expectation(ExpectationRegistry& r);
void register_diagnosis_expectation(ExpectationRegistry& r);
void register_capture_expectation(ExpectationRegistry& r);
void register_perf_finding_expectation(ExpectationRegistry& r);
void register_quantization_expectation(ExpectationRegistry& r);
void register_loss_expectation(ExpectationRegistry& r);
void register_loss_scaling_expectation(ExpectationRegistry& r);
void register_hang_expectation(ExpectationRegistry& r);
}  // namespace expect

void register_builtin_expectations(ExpectationRegistry& r) {
  expect::register_detection_expectation(r);
  expect::register_no_detection_expectation(r);
  expect::register_comparison_expectation(r);
  expect::register_consistency_expectation(r);
  expect::register_diagnosis_expectation(r);
  expect::register_capture_expectation(r);
  expect::register_perf_finding_expectation(r);
  expect::register_quantization_expectation(r);
  expect::register_loss_expectation(r);
  expect::register_loss_scaling_expectation(r);
  expect::register_hang_expectation(r);
}

}  // namespace probelab::sim
