#include "probes/expr.h"

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <limits>

#include <fmt/format.h>

#include "chip_model/spec/capture_math.h"

namespace probelab::probes {

namespace {

constexpr std::string_view kVarNames[kVarCount] = {
    "min",        "max",        "mean",           "abs_mean",    "std",
    "l2",         "max_abs",    "nan_count",      "inf_count",   "zero_count",
    "count",      "finite_min", "finite_max",     "finite_max_abs", "finite_mean",
    "finite_abs_mean", "step",  "rank",           "overflow_count", "underflow_count",
    "invalid_count", "nan_input_count", "inf_input_count", "anomaly_count"};

enum class Tok { Num, Ident, Op, LParen, RParen, End };

struct Token {
  Tok kind;
  std::string text;
  double value = 0;
  std::size_t col = 1;  // 1-based
};

}  // namespace

ExprError::ExprError(std::string message, std::size_t column)
    : std::runtime_error(fmt::format("column {}: {}", column, message)), reason_(std::move(message)), column_(column) {}

std::string_view var_name(Var v) { return kVarNames[static_cast<std::size_t>(v)]; }

std::optional<Var> parse_var(std::string_view name) {
  for (std::size_t i = 0; i < kVarCount; ++i)
    if (kVarNames[i] == name) return static_cast<Var>(i);
  return std::nullopt;
}

bool is_stat_var(Var v) { return v <= Var::FiniteAbsMean; }
bool is_counter_var(Var v) { return v >= Var::OverflowCount; }

EvalContext::EvalContext() { values.fill(std::numeric_limits<double>::quiet_NaN()); }

void EvalContext::set_stats(const spec::CaptureStats& s) {
  set(Var::Min, s.min);
  set(Var::Max, s.max);
  set(Var::Mean, s.mean);
  set(Var::AbsMean, s.abs_mean);
  set(Var::Std, s.std);
  set(Var::L2, s.l2);
  set(Var::MaxAbs, s.max_abs);
  set(Var::NanCount, static_cast<double>(s.nan_count));
  set(Var::InfCount, static_cast<double>(s.inf_count));
  set(Var::ZeroCount, static_cast<double>(s.zero_count));
  set(Var::Count, static_cast<double>(s.count));
  set(Var::FiniteMin, s.finite_min);
  set(Var::FiniteMax, s.finite_max);
  set(Var::FiniteMaxAbs, s.finite_max_abs);
  set(Var::FiniteMean, s.finite_mean);
  set(Var::FiniteAbsMean, s.finite_abs_mean);
}

// ---- AST ---------------------------------------------------------------------------------------

struct Expr::Node {
  enum Kind { Num, VarRef, Not, Neg, Bin } kind = Num;
  std::string op;  // for Bin: + - * / < <= > >= == != && ||
  double value = 0;
  Var var = Var::Min;
  std::unique_ptr<Node> a, b;

  std::unique_ptr<Node> clone() const {
    auto n = std::make_unique<Node>();
    n->kind = kind;
    n->op = op;
    n->value = value;
    n->var = var;
    if (a) n->a = a->clone();
    if (b) n->b = b->clone();
    return n;
  }
};

namespace {

using NodeP = std::unique_ptr<Expr::Node>;

std::vector<Token> lex(std::string_view s) {
  std::vector<Token> out;
  std::size_t i = 0;
  while (i < s.size()) {
    char c = s[i];
    std::size_t col = i + 1;
    if (std::isspace(static_cast<unsigned char>(c))) {
      ++i;
      continue;
    }
    if (std::isdigit(static_cast<unsigned char>(c)) || (c == '.' && i + 1 < s.size() && std::isdigit(static_cast<unsigned char>(s[i + 1])))) {
      std::size_t j = i;
      while (j < s.size() && (std::isdigit(static_cast<unsigned char>(s[j])) || s[j] == '.')) ++j;
      if (j < s.size() && (s[j] == 'e' || s[j] == 'E')) {
        std::size_t k = j + 1;
        if (k < s.size() && (s[k] == '+' || s[k] == '-')) ++k;
        if (k >= s.size() || !std::isdigit(static_cast<unsigned char>(s[k])))
          throw ExprError(fmt::format("malformed exponent in number '{}'", s.substr(i, k - i)), col);
        while (k < s.size() && std::isdigit(static_cast<unsigned char>(s[k]))) ++k;
        j = k;
      }
      std::string text(s.substr(i, j - i));
      char* end = nullptr;
      double v = std::strtod(text.c_str(), &end);
      if (end != text.c_str() + text.size()) throw ExprError(fmt::format("malformed number '{}'", text), col);
      out.push_back({Tok::Num, text, v, col});
      i = j;
      continue;
    }
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      std::size_t j = i;
      while (j < s.size() && (std::isalnum(static_cast<unsigned char>(s[j])) || s[j] == '_')) ++j;
      out.push_back({Tok::Ident, std::string(s.substr(i, j - i)), 0, col});
      i = j;
      continue;
    }
    if (c == '(') { out.push_back({Tok::LParen, "(", 0, col}); ++i; continue; }
    if (c == ')') { out.push_back({Tok::RParen, ")", 0, col}); ++i; continue; }
    std::string_view two = s.substr(i, 2);
    if (two == "<=" || two == ">=" || two == "==" || two == "!=" || two == "&&" || two == "||") {
      out.push_back({Tok::Op, std::string(two), 0, col});
      i += 2;
      continue;
    }
    if (c == '<' || c == '>' || c == '+' || c == '-' || c == '*' || c == '/' || c == '!') {
      out.push_back({Tok::Op, std::string(1, c), 0, col});
      ++i;
      continue;
    }
    if (c == '&' || c == '|') throw ExprError(fmt::format("'{}' is not an operator (use '{}{}')", c, c, c), col);
    if (c == '=') throw ExprError("'=' is not an operator (use '==')", col);
    throw ExprError(fmt::format("unexpected character '{}'", c), col);
  }
  out.push_back({Tok::End, "", 0, s.size() + 1});
  return out;
}

class Parser {
 public:
  explicit Parser(std::vector<Token> t) : t_(std::move(t)) {}
  NodeP parse() {
    if (peek().kind == Tok::End) throw ExprError("empty expression", peek().col);
    NodeP n = parse_or();
    if (peek().kind != Tok::End) throw ExprError(fmt::format("unexpected '{}'", peek().text), peek().col);
    return n;
  }

 private:
  const Token& peek() const { return t_[pos_]; }
  bool accept_op(std::string_view op) {
    if (peek().kind == Tok::Op && peek().text == op) {
      ++pos_;
      return true;
    }
    return false;
  }
  static NodeP bin(std::string op, NodeP a, NodeP b) {
    auto n = std::make_unique<Expr::Node>();
    n->kind = Expr::Node::Bin;
    n->op = std::move(op);
    n->a = std::move(a);
    n->b = std::move(b);
    return n;
  }
  NodeP parse_or() {
    NodeP n = parse_and();
    while (accept_op("||")) n = bin("||", std::move(n), parse_and());
    return n;
  }
  NodeP parse_and() {
    NodeP n = parse_cmp();
    while (accept_op("&&")) n = bin("&&", std::move(n), parse_cmp());
    return n;
  }
  NodeP parse_cmp() {
    NodeP n = parse_sum();
    for (const char* op : {"<=", ">=", "==", "!=", "<", ">"}) {
      if (accept_op(op)) {
        n = bin(op, std::move(n), parse_sum());
        if (peek().kind == Tok::Op && (peek().text == "<" || peek().text == ">" || peek().text == "<=" ||
                                       peek().text == ">=" || peek().text == "==" || peek().text == "!="))
          throw ExprError("comparisons do not chain; combine them with '&&'", peek().col);
        break;
      }
    }
    return n;
  }
  NodeP parse_sum() {
    NodeP n = parse_prod();
    for (;;) {
      if (accept_op("+")) n = bin("+", std::move(n), parse_prod());
      else if (accept_op("-")) n = bin("-", std::move(n), parse_prod());
      else return n;
    }
  }
  NodeP parse_prod() {
    NodeP n = parse_unary();
    for (;;) {
      if (accept_op("*")) n = bin("*", std::move(n), parse_unary());
      else if (accept_op("/")) n = bin("/", std::move(n), parse_unary());
      else return n;
    }
  }
  // Nesting (parentheses and prefix operators) recurses; past kMaxExprDepth levels the parser
  // stops with an error instead of exhausting the stack.
  class DepthGuard {
   public:
    DepthGuard(Parser& p, std::size_t col) : p_(p) {
      if (++p_.depth_ > kMaxExprDepth)
        throw ExprError(fmt::format("nesting deeper than {} levels (parentheses and prefix operators)", kMaxExprDepth),
                        col);
    }
    ~DepthGuard() { --p_.depth_; }
    DepthGuard(const DepthGuard&) = delete;
    DepthGuard& operator=(const DepthGuard&) = delete;

   private:
    Parser& p_;
  };
  NodeP parse_unary() {
    const std::size_t col = peek().col;
    if (accept_op("!")) {
      DepthGuard guard(*this, col);
      auto n = std::make_unique<Expr::Node>();
      n->kind = Expr::Node::Not;
      n->a = parse_unary();
      return n;
    }
    if (accept_op("-")) {
      DepthGuard guard(*this, col);
      auto n = std::make_unique<Expr::Node>();
      n->kind = Expr::Node::Neg;
      n->a = parse_unary();
      return n;
    }
    if (accept_op("+")) {
      DepthGuard guard(*this, col);
      return parse_unary();
    }
    return parse_primary();
  }
  NodeP parse_primary() {
    const Token& t = peek();
    if (t.kind == Tok::Num) {
      ++pos_;
      auto n = std::make_unique<Expr::Node>();
      n->kind = Expr::Node::Num;
      n->value = t.value;
      return n;
    }
    if (t.kind == Tok::Ident) {
      auto v = parse_var(t.text);
      if (!v) {
        std::string known;
        for (auto name : kVarNames) known += (known.empty() ? "" : ", ") + std::string(name);
        throw ExprError(fmt::format("unknown identifier '{}' (known: {})", t.text, known), t.col);
      }
      ++pos_;
      auto n = std::make_unique<Expr::Node>();
      n->kind = Expr::Node::VarRef;
      n->var = *v;
      return n;
    }
    if (t.kind == Tok::LParen) {
      std::size_t col = t.col;
      DepthGuard guard(*this, col);
      ++pos_;
      NodeP n = parse_or();
      if (peek().kind != Tok::RParen) throw ExprError(fmt::format("missing ')' for '(' at column {}", col), peek().col);
      ++pos_;
      return n;
    }
    if (t.kind == Tok::End) throw ExprError("unexpected end of expression", t.col);
    throw ExprError(fmt::format("unexpected '{}'", t.text), t.col);
  }

  std::vector<Token> t_;
  std::size_t pos_ = 0;
  std::size_t depth_ = 0;
};

bool truthy(double v) { return !std::isnan(v) && v != 0.0; }

double eval_node(const Expr::Node& n, const EvalContext& ctx) {
  switch (n.kind) {
    case Expr::Node::Num: return n.value;
    case Expr::Node::VarRef: return ctx.get(n.var);
    case Expr::Node::Not: return truthy(eval_node(*n.a, ctx)) ? 0.0 : 1.0;
    case Expr::Node::Neg: return -eval_node(*n.a, ctx);
    case Expr::Node::Bin: break;
  }
  const std::string& op = n.op;
  if (op == "&&") return truthy(eval_node(*n.a, ctx)) && truthy(eval_node(*n.b, ctx)) ? 1.0 : 0.0;
  if (op == "||") return truthy(eval_node(*n.a, ctx)) || truthy(eval_node(*n.b, ctx)) ? 1.0 : 0.0;
  double a = eval_node(*n.a, ctx), b = eval_node(*n.b, ctx);
  if (op == "+") return a + b;
  if (op == "-") return a - b;
  if (op == "*") return a * b;
  if (op == "/") return a / b;
  if (op == "<") return a < b ? 1.0 : 0.0;
  if (op == "<=") return a <= b ? 1.0 : 0.0;
  if (op == ">") return a > b ? 1.0 : 0.0;
  if (op == ">=") return a >= b ? 1.0 : 0.0;
  if (op == "==") return a == b ? 1.0 : 0.0;
  return a != b ? 1.0 : 0.0;  // "!="
}

void collect_vars(const Expr::Node& n, std::set<Var>& out) {
  if (n.kind == Expr::Node::VarRef) out.insert(n.var);
  if (n.a) collect_vars(*n.a, out);
  if (n.b) collect_vars(*n.b, out);
}

/// Value of a variable-free subtree.
std::optional<double> const_value(const Expr::Node& n) {
  std::set<Var> vs;
  collect_vars(n, vs);
  if (!vs.empty()) return std::nullopt;
  return eval_node(n, EvalContext{});
}

std::optional<spec::StatField> stat_field(Var v) {
  if (!is_stat_var(v)) return std::nullopt;
  return static_cast<spec::StatField>(static_cast<std::uint8_t>(v));  // same order by design
}

std::optional<spec::PredicateClause> clause_of(const Expr::Node& n) {
  static const std::pair<const char*, spec::CmpOp> ops[] = {{"<", spec::CmpOp::Lt},  {"<=", spec::CmpOp::Le},
                                                            {">", spec::CmpOp::Gt},  {">=", spec::CmpOp::Ge},
                                                            {"==", spec::CmpOp::Eq}, {"!=", spec::CmpOp::Ne}};
  if (n.kind != Expr::Node::Bin) return std::nullopt;
  std::optional<spec::CmpOp> cmp;
  for (auto& [s, c] : ops)
    if (n.op == s) cmp = c;
  if (!cmp) return std::nullopt;
  const Expr::Node* var = nullptr;
  std::optional<double> k;
  bool flipped = false;
  if (n.a->kind == Expr::Node::VarRef && (k = const_value(*n.b))) {
    var = n.a.get();
  } else if (n.b->kind == Expr::Node::VarRef && (k = const_value(*n.a))) {
    var = n.b.get();
    flipped = true;
  } else {
    return std::nullopt;
  }
  auto field = stat_field(var->var);
  if (!field) return std::nullopt;
  if (flipped) {  // k OP x  ==  x OP' k
    switch (*cmp) {
      case spec::CmpOp::Lt: cmp = spec::CmpOp::Gt; break;
      case spec::CmpOp::Le: cmp = spec::CmpOp::Ge; break;
      case spec::CmpOp::Gt: cmp = spec::CmpOp::Lt; break;
      case spec::CmpOp::Ge: cmp = spec::CmpOp::Le; break;
      default: break;
    }
  }
  spec::PredicateClause c;
  c.field = static_cast<std::uint8_t>(*field);
  c.cmp = static_cast<std::uint8_t>(*cmp);
  c.value = *k;
  return c;
}

void flatten(const Expr::Node& n, const std::string& op, std::vector<const Expr::Node*>& out) {
  if (n.kind == Expr::Node::Bin && n.op == op) {
    flatten(*n.a, op, out);
    flatten(*n.b, op, out);
  } else {
    out.push_back(&n);
  }
}

}  // namespace

static_assert(static_cast<int>(spec::StatField::FiniteAbsMean) == static_cast<int>(Var::FiniteAbsMean),
              "statistic variables and device StatField share their order");

double stat_field_value(const spec::CaptureStats& s, spec::StatField f) { return spec::stat_value(s, f); }

bool predicate_holds(std::span<const spec::PredicateClause> clauses, bool any, const spec::CaptureStats& s) {
  if (clauses.empty()) return false;
  for (const auto& c : clauses) {
    double x = stat_field_value(s, static_cast<spec::StatField>(c.field));
    bool r = false;
    switch (static_cast<spec::CmpOp>(c.cmp)) {
      case spec::CmpOp::Lt: r = x < c.value; break;
      case spec::CmpOp::Le: r = x <= c.value; break;
      case spec::CmpOp::Gt: r = x > c.value; break;
      case spec::CmpOp::Ge: r = x >= c.value; break;
      case spec::CmpOp::Eq: r = x == c.value; break;
      case spec::CmpOp::Ne: r = x != c.value; break;
    }
    if (any && r) return true;
    if (!any && !r) return false;
  }
  return !any;
}

Expr::Expr() = default;
Expr::~Expr() = default;
Expr::Expr(const Expr& o) : text_(o.text_), root_(o.root_ ? o.root_->clone() : nullptr) {}
Expr& Expr::operator=(const Expr& o) {
  if (this != &o) {
    text_ = o.text_;
    root_ = o.root_ ? o.root_->clone() : nullptr;
  }
  return *this;
}
Expr::Expr(Expr&&) noexcept = default;
Expr& Expr::operator=(Expr&&) noexcept = default;

Expr Expr::parse(std::string_view text) {
  Expr e;
  if (text.size() > kMaxExprLength)
    throw ExprError(fmt::format("expression of {} characters (at most {})", text.size(), kMaxExprLength),
                    kMaxExprLength + 1);
  e.text_ = std::string(text);
  e.root_ = Parser(lex(text)).parse();
  return e;
}

double Expr::eval(const EvalContext& ctx) const {
  if (!root_) return std::numeric_limits<double>::quiet_NaN();
  return eval_node(*root_, ctx);
}

bool Expr::test(const EvalContext& ctx) const { return truthy(eval(ctx)); }

std::set<Var> Expr::vars() const {
  std::set<Var> out;
  if (root_) collect_vars(*root_, out);
  return out;
}

bool Expr::uses_stats() const {
  for (Var v : vars())
    if (is_stat_var(v)) return true;
  return false;
}

std::optional<DevicePredicate> Expr::to_device_predicate() const {
  if (!root_) return std::nullopt;
  DevicePredicate p;
  std::vector<const Node*> terms;
  if (root_->kind == Node::Bin && (root_->op == "&&" || root_->op == "||")) {
    p.any = root_->op == "||";
    flatten(*root_, root_->op, terms);
  } else {
    terms.push_back(root_.get());
  }
  if (terms.size() > static_cast<std::size_t>(spec::kMaxClauses)) return std::nullopt;
  for (const Node* t : terms) {
    auto c = clause_of(*t);
    if (!c) return std::nullopt;
    p.clauses.push_back(*c);
  }
  return p;
}

}  // namespace probelab::probes
