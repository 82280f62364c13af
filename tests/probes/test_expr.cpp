#include <cmath>

#include <gtest/gtest.h>

#include "probes/expr.h"

using namespace probelab::probes;
namespace spec = probelab::spec;

namespace {
EvalContext ctx_with(std::initializer_list<std::pair<Var, double>> vs) {
  EvalContext c;
  for (auto [v, x] : vs) c.set(v, x);
  return c;
}
}  // namespace

TEST(Expr, ArithmeticPrecedenceAndNumbers) {
  EvalContext c;
  EXPECT_DOUBLE_EQ(Expr::parse("1 + 2 * 3").eval(c), 7.0);
  EXPECT_DOUBLE_EQ(Expr::parse("(1 + 2) * 3").eval(c), 9.0);
  EXPECT_DOUBLE_EQ(Expr::parse("10 - 4 - 3").eval(c), 3.0);  // left associative
  EXPECT_DOUBLE_EQ(Expr::parse("8 / 4 / 2").eval(c), 1.0);
  EXPECT_DOUBLE_EQ(Expr::parse("-2 * -3").eval(c), 6.0);
  EXPECT_DOUBLE_EQ(Expr::parse("1e-6").eval(c), 1e-6);
  EXPECT_DOUBLE_EQ(Expr::parse("65504").eval(c), 65504.0);
  EXPECT_DOUBLE_EQ(Expr::parse("2.5E+3").eval(c), 2500.0);
  EXPECT_DOUBLE_EQ(Expr::parse(".5").eval(c), 0.5);
}

TEST(Expr, ComparisonsAndLogic) {
  auto c = ctx_with({{Var::AbsMean, 5e-7}, {Var::NanCount, 0}, {Var::MaxAbs, 70000}, {Var::Step, 3}});
  EXPECT_TRUE(Expr::parse("abs_mean < 1e-6").test(c));
  EXPECT_FALSE(Expr::parse("nan_count > 0").test(c));
  EXPECT_TRUE(Expr::parse("max_abs > 65504 && step >= 3").test(c));
  EXPECT_FALSE(Expr::parse("max_abs > 65504 && step >= 4").test(c));
  EXPECT_TRUE(Expr::parse("nan_count > 0 || max_abs > 65504").test(c));
  EXPECT_TRUE(Expr::parse("!(nan_count > 0)").test(c));
  EXPECT_TRUE(Expr::parse("!nan_count").test(c));
  EXPECT_TRUE(Expr::parse("step == 3 && !(step != 3)").test(c));
  // && binds tighter than ||
  EXPECT_TRUE(Expr::parse("1 || 0 && 0").test(c));
  EXPECT_FALSE(Expr::parse("(1 || 0) && 0").test(c));
}

TEST(Expr, NaNComparisonsAreFalseAndMissingVariablesAreNaN) {
  EvalContext c;  // nothing set
  EXPECT_FALSE(Expr::parse("mean > 0").test(c));
  EXPECT_FALSE(Expr::parse("mean <= 0").test(c));
  EXPECT_TRUE(Expr::parse("!(mean > 0)").test(c));
  EXPECT_TRUE(std::isnan(Expr::parse("mean + 1").eval(c)));
}

TEST(Expr, CountersAndVars) {
  auto c = ctx_with({{Var::OverflowCount, 4}});
  auto e = Expr::parse("overflow_count > 3");
  EXPECT_TRUE(e.test(c));
  EXPECT_FALSE(e.uses_stats());
  EXPECT_EQ(e.vars(), (std::set<Var>{Var::OverflowCount}));
  EXPECT_TRUE(Expr::parse("l2 / count > 1").uses_stats());
  EXPECT_EQ(parse_var("nan_input_count"), Var::NanInputCount);
  EXPECT_EQ(var_name(Var::AbsMean), "abs_mean");
  EXPECT_FALSE(parse_var("bogus").has_value());
}

TEST(Expr, ErrorsCarryColumns) {
  auto col = [](const char* text) {
    try {
      Expr::parse(text);
    } catch (const ExprError& e) {
      return e.column();
    }
    return std::size_t{0};
  };
  EXPECT_EQ(col("abs_mean < "), 12u);        // unexpected end
  EXPECT_EQ(col("abs_men < 1"), 1u);         // unknown identifier
  EXPECT_EQ(col("nan_count > 0 & step"), 15u);
  EXPECT_EQ(col("(max > 1"), 9u);            // missing ')'
  EXPECT_EQ(col("max = 1"), 5u);
  EXPECT_EQ(col("1e+ > 2"), 1u);             // malformed exponent
  EXPECT_EQ(col("a < b < c"), 1u);           // 'a' is unknown first
  EXPECT_EQ(col("min < 1 < 2"), 9u);         // comparisons do not chain
  EXPECT_EQ(col(""), 1u);
  EXPECT_EQ(col("max 1"), 5u);               // trailing token
  try {
    Expr::parse("abs_men < 1");
    FAIL();
  } catch (const ExprError& e) {
    EXPECT_NE(std::string(e.what()).find("unknown identifier 'abs_men'"), std::string::npos) << e.what();
  }
}

TEST(Expr, DevicePredicateForPureAndOrChains) {
  auto p = Expr::parse("nan_count > 0").to_device_predicate();
  ASSERT_TRUE(p);
  ASSERT_EQ(p->clauses.size(), 1u);
  EXPECT_EQ(p->clauses[0].field, static_cast<std::uint8_t>(spec::StatField::NanCount));
  EXPECT_EQ(p->clauses[0].cmp, static_cast<std::uint8_t>(spec::CmpOp::Gt));
  EXPECT_EQ(p->clauses[0].value, 0.0);

  p = Expr::parse("abs_mean < 1e-6 && max_abs <= 2 * 32752").to_device_predicate();
  ASSERT_TRUE(p);
  EXPECT_FALSE(p->any);
  ASSERT_EQ(p->clauses.size(), 2u);
  EXPECT_EQ(p->clauses[1].field, static_cast<std::uint8_t>(spec::StatField::MaxAbs));
  EXPECT_EQ(p->clauses[1].value, 65504.0);  // constant folded

  p = Expr::parse("65504 < max_abs || inf_count != 0 || nan_count >= 1").to_device_predicate();
  ASSERT_TRUE(p);
  EXPECT_TRUE(p->any);
  ASSERT_EQ(p->clauses.size(), 3u);
  EXPECT_EQ(p->clauses[0].cmp, static_cast<std::uint8_t>(spec::CmpOp::Gt));  // flipped
  EXPECT_EQ(p->clauses[0].field, static_cast<std::uint8_t>(spec::StatField::MaxAbs));

  // not compilable: mixed &&/||, counters, arithmetic on statistics, negation
  EXPECT_FALSE(Expr::parse("nan_count > 0 && min < 0 || max > 1").to_device_predicate());
  EXPECT_FALSE(Expr::parse("max_abs > 65504 && step >= 3").to_device_predicate());
  EXPECT_FALSE(Expr::parse("l2 / count > 1").to_device_predicate());
  EXPECT_FALSE(Expr::parse("!(nan_count > 0)").to_device_predicate());
}

TEST(Expr, DevicePredicateAgreesWithHostEvaluation) {
  spec::CaptureStats s;
  s.abs_mean = 3e-7;
  s.max_abs = 10;
  s.nan_count = 2;
  s.count = 100;
  for (const char* text : {"abs_mean < 1e-6", "nan_count > 0 && max_abs < 5", "nan_count == 0 || max_abs >= 10",
                           "count != 100", "zero_count <= 0"}) {
    Expr e = Expr::parse(text);
    auto p = e.to_device_predicate();
    ASSERT_TRUE(p) << text;
    EvalContext c;
    c.set_stats(s);
    EXPECT_EQ(predicate_holds(p->clauses, p->any, s), e.test(c)) << text;
  }
  EXPECT_FALSE(predicate_holds({}, false, s));
}

TEST(Expr, CopiesAreIndependent) {
  Expr a = Expr::parse("max > 1");
  Expr b = a;
  a = Expr::parse("max < 1");
  auto c = ctx_with({{Var::Max, 2}});
  EXPECT_TRUE(b.test(c));
  EXPECT_FALSE(a.test(c));
  EXPECT_EQ(b.text(), "max > 1");
}
