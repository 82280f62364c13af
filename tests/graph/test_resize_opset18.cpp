// Resize's opset-18 attributes: `axes` (scales, sizes and roi of some dimensions only),
// keep_aspect_ratio_policy and antialias, each against the full-rank form it stands for.
#include <gtest/gtest.h>

#include <random>

#include "tests/graph/op_test_util.h"

namespace probelab::graph {
namespace {

using testing::error_of;
using testing::make_op;
using testing::run;
using I = std::vector<std::int64_t>;
using F = std::vector<double>;

Tensor random_input(const Shape& s, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::vector<double> v(static_cast<std::size_t>(numel(s)));
  for (double& x : v) x = u(rng);
  return Tensor::from_f64(s, v, DType::F32);
}

Tensor resize(const Tensor& x, Attrs a) { return run(make_op("Resize", 1, std::move(a)), {&x}).at(0); }

TEST(ResizeOpset18, AxesNameTheDimensionsOfScalesSizesAndRoi) {
  const Tensor x = random_input({1, 2, 3, 4}, 1);
  const std::string linear = "linear";
  EXPECT_EQ(resize(x, {{"mode", linear}, {"axes", I{2, -1}}, {"sizes", I{5, 7}}}),
            resize(x, {{"mode", linear}, {"sizes", I{1, 2, 5, 7}}}));
  EXPECT_EQ(resize(x, {{"mode", std::string("cubic")}, {"axes", I{3}}, {"scales", F{2.5}}}),
            resize(x, {{"mode", std::string("cubic")}, {"scales", F{1, 1, 1, 2.5}}}));
  const std::string crop = "tf_crop_and_resize";
  EXPECT_EQ(resize(x, {{"mode", linear}, {"coordinate_transformation_mode", crop}, {"axes", I{3, 2}},
                       {"sizes", I{6, 4}}, {"roi", F{0.25, 0.1, 0.75, 0.9}}}),
            resize(x, {{"mode", linear}, {"coordinate_transformation_mode", crop}, {"sizes", I{1, 2, 4, 6}},
                       {"roi", F{0, 0, 0.1, 0.25, 1, 1, 0.9, 0.75}}}));
  const Tensor y = resize(x, {{"axes", I{1}}, {"scales", F{2.0}}});
  EXPECT_EQ(y.shape(), (Shape{1, 4, 3, 4}));
}

TEST(ResizeOpset18, KeepAspectRatioUsesOneScaleForTheResizedDimensions) {
  const Tensor x = random_input({1, 1, 4, 6}, 2);
  const std::string linear = "linear";
  // sizes 8 x 8 of 4 x 6: scales 2 and 4/3; not_larger takes 4/3 (5 x 8), not_smaller 2 (8 x 12).
  // (The policy spans every dimension in `axes`: without axes, N and C would be scaled too.)
  const Tensor small = resize(x, {{"mode", linear}, {"keep_aspect_ratio_policy", std::string("not_larger")},
                                  {"axes", I{2, 3}}, {"sizes", I{8, 8}}});
  EXPECT_EQ(small.shape(), (Shape{1, 1, 5, 8}));
  EXPECT_EQ(small, resize(x, {{"mode", linear}, {"scales", F{1, 1, 4.0 / 3.0, 4.0 / 3.0}}}));
  const Tensor large = resize(x, {{"mode", linear}, {"keep_aspect_ratio_policy", std::string("not_smaller")},
                                  {"axes", I{-2, -1}}, {"sizes", I{8, 8}}});
  EXPECT_EQ(large.shape(), (Shape{1, 1, 8, 12}));
  EXPECT_EQ(large, resize(x, {{"mode", linear}, {"scales", F{1, 1, 2, 2}}}));
  EXPECT_NE(error_of(make_op("Resize", 1, {{"keep_aspect_ratio_policy", std::string("fit")}, {"sizes", I{1, 1, 2, 2}}}), {&x})
                .find("keep_aspect_ratio_policy must be stretch, not_larger or not_smaller"),
            std::string::npos);
}

TEST(ResizeOpset18, AntialiasChangesNothingWhenUpscalingAndIsRefusedWhenDownscaling) {
  const Tensor x = random_input({1, 1, 4, 6}, 3);
  const std::string linear = "linear";
  EXPECT_EQ(resize(x, {{"mode", linear}, {"antialias", std::int64_t{1}}, {"scales", F{1, 1, 2, 1.5}}}),
            resize(x, {{"mode", linear}, {"scales", F{1, 1, 2, 1.5}}}));
  EXPECT_EQ(resize(x, {{"antialias", std::int64_t{1}}, {"scales", F{1, 1, 0.5, 0.5}}}),  // nearest: no filter
            resize(x, {{"scales", F{1, 1, 0.5, 0.5}}}));
  const std::string e = error_of(make_op("Resize", 1, {{"mode", linear}, {"antialias", std::int64_t{1}}, {"scales", F{1, 1, 0.5, 2}}}), {&x});
  EXPECT_NE(e.find("antialias = 1 when downscaling (dimension 2, scale 0.5) is not supported"), std::string::npos) << e;
  EXPECT_NE(error_of(make_op("Resize", 1, {{"axes", I{2, -2}}, {"scales", F{2, 2}}}), {&x}).find("axes lists dimension 2 twice"),
            std::string::npos);
  EXPECT_NE(error_of(make_op("Resize", 1, {{"axes", I{3}}, {"scales", F{1, 2}}}), {&x}).find("scales has 2 entries for 1 resized dimensions"),
            std::string::npos);
}

}  // namespace
}  // namespace probelab::graph
