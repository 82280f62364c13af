#include "injectors/injector.h"

#include <fmt/format.h>

namespace probelab::inject {

nlohmann::json to_json(const ProofEntry& e) {
  return {{"rank", e.site.rank}, {"step", e.site.step},   {"op_id", e.site.op_id},
          {"op", e.op},          {"task_id", e.site.task_id}, {"core", e.site.core},
          {"cycle", e.site.cycle}, {"location", e.location}, {"before", e.before},
          {"after", e.after}};
}

void Injector::set_identity(std::string kind, nlohmann::json descriptor) {
  kind_ = std::move(kind);
  descriptor_ = std::move(descriptor);
}

void Injector::record(ProofEntry e) {
  ++applications_;
  ++rank_applications_[e.site.rank];
  auto& v = proof_[e.site.rank];
  if (v.size() < kMaxProof) v.push_back(std::move(e));
}

std::vector<ProofEntry> Injector::proof() const {
  std::vector<ProofEntry> out;
  for (const auto& [rank, v] : proof_) out.insert(out.end(), v.begin(), v.end());
  return out;
}

std::string Injector::op_name(std::uint32_t op_id) const {
  if (graph_ && op_id < graph_->ops().size()) return graph_->op(op_id).name;
  return fmt::format("op#{}", op_id);
}

nlohmann::json Injector::partial_report() const {
  nlohmann::json ranks = nlohmann::json::array();
  for (const auto& [rank, n] : rank_applications_) {
    nlohmann::json proof = nlohmann::json::array();
    for (const auto& p : proof_.at(rank)) proof.push_back(to_json(p));
    ranks.push_back({{"rank", rank}, {"applications", n}, {"proof", std::move(proof)}});
  }
  return {{"kind", kind_}, {"descriptor", descriptor_}, {"ranks", std::move(ranks)}};
}

nlohmann::json Injector::merge_reports(const std::vector<nlohmann::json>& partials) {
  std::map<std::uint32_t, const nlohmann::json*> by_rank;
  for (const auto& p : partials)
    for (const auto& r : p.at("ranks")) by_rank[r.at("rank").get<std::uint32_t>()] = &r;
  std::uint64_t applications = 0;
  nlohmann::json proof = nlohmann::json::array();
  for (const auto& [rank, r] : by_rank) {
    applications += r->at("applications").get<std::uint64_t>();
    for (const auto& e : r->at("proof"))
      if (proof.size() < kMaxProof) proof.push_back(e);
  }
  const std::size_t logged = proof.size();
  nlohmann::json r = {{"kind", partials.at(0).at("kind")},
                      {"descriptor", partials.at(0).at("descriptor")},
                      {"fired", applications > 0},
                      {"applications", applications},
                      {"proof", std::move(proof)}};
  if (applications == 0) r["note"] = "never fired: its site was not reached in this run";
  if (applications > logged) r["proof_truncated"] = fmt::format("{} of {} applications logged", logged, applications);
  return r;
}

nlohmann::json Injector::report() const { return merge_reports({partial_report()}); }

InjectorRegistry& InjectorRegistry::instance() {
  static InjectorRegistry* r = [] {
    auto* reg = new InjectorRegistry();  // never destroyed: used from static contexts
    register_builtin_injectors(*reg);
    return reg;
  }();
  return *r;
}

void InjectorRegistry::add(InjectorInfo info) {
  if (infos_.count(info.name)) throw std::logic_error("injector registered twice: " + info.name);
  auto name = info.name;
  infos_.emplace(std::move(name), std::move(info));
}

const InjectorInfo* InjectorRegistry::find(const std::string& name) const {
  auto it = infos_.find(name);
  return it == infos_.end() ? nullptr : &it->second;
}

std::unique_ptr<Injector> InjectorRegistry::create(const YAML::Node& desc, const std::string& where,
                                                   const InjectionEnv& env) const {
  if (!desc.IsMap() || !desc["kind"] || !desc["kind"].IsScalar())
    throw InjectorError(fmt::format("{}: an injection needs a 'kind'", where));
  const auto kind = desc["kind"].as<std::string>();
  const auto* info = find(kind);
  if (!info) {
    std::string known;
    for (const auto& [n, _] : infos_) known += (known.empty() ? "" : ", ") + n;
    throw InjectorError(fmt::format("{}: unknown injector kind '{}' (known: {})", where, kind, known));
  }
  Params p(desc, where, info->params);
  auto inj = info->create(p, env);
  // The replayable descriptor: every declared parameter, given or defaulted.
  nlohmann::json d = {{"kind", kind}};
  for (const auto& s : info->params) {
    if (desc[s.name]) {
      d[s.name] = yaml_to_json(desc[s.name]);
    } else if (!s.default_value.empty() && s.default_value != "-") {
      d[s.name] = yaml_to_json(s.default_node());
    }
  }
  d["seed"] = inj->seed();
  inj->set_identity(kind, std::move(d));
  return inj;
}

ParamSpec seed_param() {
  return {"seed", "int", "-", "seed of random draws (default: derived from the scenario seed and the descriptor)"};
}

std::uint64_t read_seed(const Params& p, const InjectionEnv& env) {
  if (p.has("seed")) return p.uinteger("seed");
  std::uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a over the descriptor text, then mixed with the scenario seed
  for (char c : YAML::Dump(p.raw())) {
    h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ull;
  }
  return h ^ (env.seed * 0x9E3779B97F4A7C15ull);
}

nlohmann::json yaml_to_json(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Sequence: {
      auto a = nlohmann::json::array();
      for (const auto& x : n) a.push_back(yaml_to_json(x));
      return a;
    }
    case YAML::NodeType::Map: {
      auto o = nlohmann::json::object();
      for (const auto& kv : n) o[kv.first.as<std::string>()] = yaml_to_json(kv.second);
      return o;
    }
    case YAML::NodeType::Scalar: {
      const auto s = n.Scalar();
      if (n.Tag() == "!") return s;  // quoted
      std::int64_t i = 0;
      if (YAML::convert<std::int64_t>::decode(n, i)) return i;
      double d = 0;
      if (YAML::convert<double>::decode(n, d) && s != "nan" && s != "inf" && s != "-inf") return d;
      bool b = false;
      if (YAML::convert<bool>::decode(n, b)) return b;
      return s;
    }
    default:
      return nullptr;
  }
}

}  // namespace probelab::inject
