// The condition/rule expression language of the probe config.
//
//   expr    := or
//   or      := and ( "||" and )*
//   and     := cmp ( "&&" cmp )*
//   cmp     := sum ( ("<" | "<=" | ">" | ">=" | "==" | "!=") sum )?
//   sum     := prod ( ("+" | "-") prod )*
//   prod    := unary ( ("*" | "/") unary )*
//   unary   := ("!" | "-" | "+") unary | primary
//   primary := NUMBER | IDENT | "(" expr ")"
//   NUMBER  := decimal with optional fraction and exponent: 3, 0.5, 1e-6, 65504, 2.5E+3
//   (at most kMaxExprLength characters, nesting at most kMaxExprDepth levels: see below)
//
// Identifiers: the statistics of a capture (min max mean abs_mean std l2 max_abs nan_count
// inf_count zero_count count, with numpy semantics: max_abs is inf when an Inf is present, NaN
// when a NaN is; and finite_min finite_max finite_max_abs finite_mean finite_abs_mean over the
// finite elements only; see spec/capture_math.h), the context (step rank), and the runtime
// counters (overflow_count underflow_count invalid_count nan_input_count inf_input_count
// anomaly_count). Booleans are numbers: a comparison
// gives 1 or 0, `!x` is 1 when x == 0, `&&`/`||` treat non-zero as true. IEEE semantics: any
// comparison with NaN is false. A variable not available in the evaluation context is NaN.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "chip_model/spec/capture_record.h"
#include "chip_model/spec/kernel_args.h"

namespace probelab::probes {

/// Limits of the parser (it recurses on nesting, and every evaluation walks the tree): an
/// expression is at most kMaxExprLength characters and nests parentheses and prefix operators at
/// most kMaxExprDepth levels deep; longer or deeper text is an ExprError, not a stack overflow.
inline constexpr std::size_t kMaxExprLength = 4096;
inline constexpr std::size_t kMaxExprDepth = 64;

/// Parse error: `column` is 1-based in the expression text.
class ExprError : public std::runtime_error {
 public:
  ExprError(std::string message, std::size_t column);
  std::size_t column() const { return column_; }
  const std::string& reason() const { return reason_; }

 private:
  std::string reason_;
  std::size_t column_;
};

enum class Var : std::uint8_t {
  Min, Max, Mean, AbsMean, Std, L2, MaxAbs, NanCount, InfCount, ZeroCount, Count,     // statistics
  FiniteMin, FiniteMax, FiniteMaxAbs, FiniteMean, FiniteAbsMean,                       //   (finite only)
  Step, Rank,                                                                           // context
  OverflowCount, UnderflowCount, InvalidCount, NanInputCount, InfInputCount, AnomalyCount,  // counters
};
inline constexpr std::size_t kVarCount = 24;
std::string_view var_name(Var v);
std::optional<Var> parse_var(std::string_view name);
bool is_stat_var(Var v);
bool is_counter_var(Var v);

/// Values of the variables for one evaluation; unset ones are NaN.
struct EvalContext {
  std::array<double, kVarCount> values;
  EvalContext();
  void set(Var v, double x) { values[static_cast<std::size_t>(v)] = x; }
  double get(Var v) const { return values[static_cast<std::size_t>(v)]; }
  void set_stats(const spec::CaptureStats& s);
};

/// The device form of a condition (BreakpointArgs predicate).
struct DevicePredicate {
  std::vector<spec::PredicateClause> clauses;
  bool any = false;  // false: all clauses must hold; true: at least one
};

/// Evaluates a device predicate on statistics exactly as the breakpoint task does (FP64
/// comparisons; with zero clauses the predicate does not hold).
bool predicate_holds(std::span<const spec::PredicateClause> clauses, bool any, const spec::CaptureStats& s);
double stat_field_value(const spec::CaptureStats& s, spec::StatField f);

class Expr {
 public:
  Expr();
  ~Expr();
  Expr(const Expr&);
  Expr& operator=(const Expr&);
  Expr(Expr&&) noexcept;
  Expr& operator=(Expr&&) noexcept;

  /// Throws ExprError with the column of the offending token.
  static Expr parse(std::string_view text);

  double eval(const EvalContext& ctx) const;
  bool test(const EvalContext& ctx) const;  // eval() != 0 and not NaN
  const std::string& text() const { return text_; }
  /// Variables referenced, in Var order.
  std::set<Var> vars() const;
  bool uses_stats() const;
  bool empty() const { return root_ == nullptr; }

  /// The device predicate when the expression is a single comparison, or a pure && or pure ||
  /// chain of comparisons, each between one statistic and a constant (either side; constant
  /// sub-expressions are folded). nullopt otherwise (evaluated on the host).
  std::optional<DevicePredicate> to_device_predicate() const;

  struct Node;

 private:
  std::string text_;
  std::unique_ptr<Node> root_;
};

}  // namespace probelab::probes
