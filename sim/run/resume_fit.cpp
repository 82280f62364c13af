#include "sim/run/resume_fit.h"

#include <fmt/format.h>

#include "graph/dtype.h"
#include "sim/run/checkpoint_store.h"
#include "sim/scenario/scenario_error.h"

namespace probelab::sim {

void check_resume_fits(PreparedRun& run) {
  const auto& resume = run.scenario.resume;
  if (!resume) return;
  const graph::Graph& executed = run.workload.snapshots.fused;
  for (int r = 0; r < run.scenario.ranks; ++r) {
    const auto rank = static_cast<std::uint32_t>(r);
    const std::string where = (resume->checkpoints / fmt::format("rank{}", r) / fmt::format("step{}", resume->from_step)).string();
    const auto& values = run.resume_values[rank] = read_checkpoint(resume->checkpoints, rank, resume->from_step);
    for (const auto& [name, value] : values) {
      auto fail = [&](const std::string& got) {
        throw ScenarioError(where, 0, 0, name, "a checkpoint of the model the resumed scenario runs (was it changed with --set?)",
                            got);
      };
      if (!executed.initializers().count(name)) fail("a tensor that is not an initializer of the executed graph");
      const graph::TensorDesc& d = executed.tensor(name).desc;
      if (value.shape() != d.shape)
        fail(fmt::format("shape {} where the graph declares {}", graph::shape_str(value.shape()), graph::shape_str(d.shape)));
      if (value.dtype() != d.dtype && !(graph::is_float(value.dtype()) && graph::is_float(d.dtype)))
        fail(fmt::format("dtype {} where the graph declares {}", graph::dtype_name(value.dtype()), graph::dtype_name(d.dtype)));
    }
  }
}

}  // namespace probelab::sim
