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

// Expected values: ONNX's reference Resize (onnx/reference/ops/op_resize.py, the antialiased
// coefficient functions and the recursive interpolation), run in float64 and rounded to float32;
// the first two are ONNX's node cases resize_downsample_scales_{linear,cubic}_antialias.
void expect_values(const Tensor& y, const Shape& shape, const std::vector<float>& want) {
  ASSERT_EQ(y.shape(), shape);
  const std::vector<double> got = y.to_f64();
  for (std::size_t i = 0; i < want.size(); ++i) EXPECT_EQ(static_cast<float>(got[i]), want[i]) << "element " << i;
}

TEST(ResizeOpset18, AntialiasWidensTheFilterWhereADimensionIsDownscaled) {
  std::vector<double> v(16);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(i + 1);
  const Tensor x = Tensor::from_f64({1, 1, 4, 4}, v, DType::F32);
  const std::string linear = "linear", cubic = "cubic";
  const double s = static_cast<double>(0.6f);  // the scales input is float32
  const Attrs aa = {{"antialias", std::int64_t{1}}};
  auto with = [&](Attrs a) {
    a.insert(aa.begin(), aa.end());
    return a;
  };
  expect_values(resize(x, with({{"mode", linear}, {"scales", F{1, 1, s, s}}})), {1, 1, 2, 2}, {2.875f, 4.5f, 9.375f, 11.0f});
  expect_values(resize(x, with({{"mode", cubic}, {"scales", F{1, 1, s, s}}})), {1, 1, 2, 2},
                {2.5180721282958984f, 4.285886287689209f, 9.58932876586914f, 11.357142448425293f});
  expect_values(resize(x, with({{"mode", linear}, {"sizes", I{1, 1, 3, 2}}})), {1, 1, 3, 2},
                {2.715909004211426f, 4.465909004211426f, 7.625f, 9.375f, 12.534090995788574f, 14.284090995788574f});
  expect_values(resize(x, with({{"mode", cubic}, {"sizes", I{1, 1, 3, 2}}})), {1, 1, 3, 2},
                {2.110241651535034f, 4.129773139953613f, 7.490234375f, 9.509765625f, 12.870226860046387f,
                 14.889758110046387f});
  // A wider footprint (scale 0.35: 6 linear taps, 11 cubic), with exclude_outside, other
  // coordinate modes and cubic_coeff_a.
  std::vector<double> w(30);
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = static_cast<double>((i * 7) % 11) - 5;
  const Tensor z = Tensor::from_f64({1, 1, 3, 10}, w, DType::F32);
  expect_values(resize(z, with({{"mode", linear}, {"scales", F{1, 1, 0.5, 0.35}}})), {1, 1, 1, 3},
                {-1.207608699798584f, 1.0526316165924072f, 0.32236841320991516f});
  expect_values(resize(z, with({{"mode", cubic}, {"exclude_outside", std::int64_t{1}}, {"scales", F{1, 1, 0.5, 0.35}}})),
                {1, 1, 1, 3}, {-1.2594399452209473f, 1.2417594194412231f, 0.2924659848213196f});
  expect_values(resize(z, with({{"mode", linear}, {"coordinate_transformation_mode", std::string("align_corners")},
                                {"scales", F{1, 1, 1, 0.35}}})),
                {1, 1, 3, 3},
                {-3.120689630508423f, 1.1298245191574097f, -0.028070176020264626f, -1.5862069129943848f,
                 1.115789532661438f, 0.22807016968727112f, 1.2758620977401733f, 0.09824561327695847f,
                 0.6385964751243591f});
  expect_values(resize(z, with({{"mode", cubic}, {"cubic_coeff_a", -0.5},
                                {"coordinate_transformation_mode", std::string("pytorch_half_pixel")},
                                {"sizes", I{1, 1, 2, 3}}})),
                {1, 1, 2, 3},
                {-0.9587658643722534f, 1.2046468257904053f, -0.206361785531044f, -0.8517468571662903f,
                 0.9712068438529968f, 0.2680352032184601f});
}

TEST(ResizeOpset18, AntialiasChangesNothingWhenUpscalingOrForNearest) {
  const Tensor x = random_input({1, 1, 4, 6}, 3);
  const std::string linear = "linear";
  EXPECT_EQ(resize(x, {{"mode", linear}, {"antialias", std::int64_t{1}}, {"scales", F{1, 1, 2, 1.5}}}),
            resize(x, {{"mode", linear}, {"scales", F{1, 1, 2, 1.5}}}));
  EXPECT_EQ(resize(x, {{"antialias", std::int64_t{1}}, {"scales", F{1, 1, 0.5, 0.5}}}),  // nearest: no filter
            resize(x, {{"scales", F{1, 1, 0.5, 0.5}}}));
  // Only the downscaled dimension is filtered: dimension 3, upscaled, interpolates as without.
  const Tensor mixed = resize(x, {{"mode", linear}, {"antialias", std::int64_t{1}}, {"scales", F{1, 1, 0.5, 2}}});
  EXPECT_EQ(mixed.shape(), (Shape{1, 1, 2, 12}));
  EXPECT_NE(mixed, resize(x, {{"mode", linear}, {"scales", F{1, 1, 0.5, 2}}}));
  EXPECT_NE(error_of(make_op("Resize", 1, {{"axes", I{2, -2}}, {"scales", F{2, 2}}}), {&x}).find("axes lists dimension 2 twice"),
            std::string::npos);
  EXPECT_NE(error_of(make_op("Resize", 1, {{"axes", I{3}}, {"scales", F{1, 2}}}), {&x}).find("scales has 2 entries for 1 resized dimensions"),
            std::string::npos);
}

}  // namespace
}  // namespace probelab::graph
