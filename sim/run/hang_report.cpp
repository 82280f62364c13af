#include "sim/run/hang_report.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include <fmt/format.h>

namespace probelab::sim {

using nlohmann::json;

json hang_part(const JobHang& h, const std::function<std::string(std::uint32_t, std::uint32_t)>& op_name) {
  json blocked = json::array();
  for (const auto& b : h.blocked) {
    json e = {{"rank", b.rank},   {"step", b.step},           {"op", op_name(b.rank, b.op_id)},
              {"collective", b.collective}, {"comm", b.comm}, {"seq", b.seq},
              {"waits_for", b.waits_for},   {"since_ps", b.since_ps}};
    if (!b.conflict.empty()) e["conflict"] = b.conflict;
    blocked.push_back(std::move(e));
  }
  json lost = json::array();
  for (const auto& l : h.lost)
    lost.push_back({{"link", l.link}, {"src", l.src}, {"dst", l.dst}, {"comm", l.comm}, {"seq", l.seq}, {"at_ps", l.at_ps}});
  return {{"time_ps", h.time_ps}, {"noticed_by", h.noticed_by}, {"waiting", h.waiting}, {"blocked", std::move(blocked)},
          {"lost", std::move(lost)}};
}

namespace {

// "r0-r10, r12-r15"
std::string ranks_text(const std::set<std::uint32_t>& ranks) {
  std::string s;
  for (auto it = ranks.begin(); it != ranks.end();) {
    auto end = it;
    while (std::next(end) != ranks.end() && *std::next(end) == *end + 1) ++end;
    s += fmt::format("{}r{}", s.empty() ? "" : ", ", *it);
    if (end != it) s += fmt::format("{}r{}", *end == *it + 1 ? ", " : "-", *end);
    it = std::next(end);
  }
  return s;
}

// Blocked ranks grouped by where they are (step, op, collective, call): the lines of a report.
struct Group {
  std::set<std::uint32_t> ranks, waits_for, comms;
  std::uint64_t since_min = ~std::uint64_t{0}, since_max = 0;
  const json* first = nullptr;
  std::map<std::string, std::set<std::uint32_t>> conflicts;  // another collective's message -> ranks it reached
};
std::vector<Group> groups(const json& blocked) {
  // (pairs of ranks have a communicator each: the same call of theirs is one place)
  std::map<std::tuple<std::uint32_t, std::uint32_t, std::string, std::string>, Group> by;
  for (const auto& b : blocked) {
    Group& g = by[{b.at("seq"), b.at("step"), b.at("op"), b.at("collective")}];
    if (!g.first) g.first = &b;
    g.comms.insert(b.at("comm").get<std::uint32_t>());
    g.ranks.insert(b.at("rank").get<std::uint32_t>());
    g.waits_for.insert(b.at("waits_for").get<std::uint32_t>());
    const std::uint64_t t = b.value("since_cycle", std::uint64_t{0});
    g.since_min = std::min(g.since_min, t);
    g.since_max = std::max(g.since_max, t);
    if (b.contains("conflict")) g.conflicts[b.at("conflict").get<std::string>()].insert(b.at("rank").get<std::uint32_t>());
  }
  std::vector<Group> out;
  for (auto& [k, g] : by) out.push_back(std::move(g));
  std::stable_sort(out.begin(), out.end(), [](const Group& a, const Group& b) { return *a.ranks.begin() < *b.ranks.begin(); });
  return out;
}

// Ranks blocked under one (communicator, call number) in different collectives.
void different_collectives(const json& blocked, json& why) {
  std::map<std::pair<std::uint32_t, std::uint32_t>, std::map<std::string, std::vector<const json*>>> calls;
  for (const auto& b : blocked) calls[{b.at("comm"), b.at("seq")}][b.at("collective")].push_back(&b);
  for (const auto& [call, views] : calls) {
    if (views.size() < 2) continue;
    std::string s = fmt::format("the ranks' programs went apart before call #{} of communicator {}:", call.second, call.first);
    for (const auto& [what, list] : views) {
      std::set<std::uint32_t> ranks;
      for (const json* b : list) ranks.insert(b->at("rank").get<std::uint32_t>());
      s += fmt::format(" {} at {} ({});", ranks_text(ranks), list.front()->at("op").get<std::string>(),
                       what.substr(0, what.find(' ')));
    }
    s.back() = '.';
    why.push_back(s + " Some rank skipped or reordered a collective before it");
  }
  for (const auto& b : blocked)
    if (b.contains("conflict") && calls[{b.at("comm"), b.at("seq")}].size() < 2)
      why.push_back(fmt::format("r{} received from r{} a message of another collective ({}) where it runs {} ({})",
                                b.at("rank").get<std::uint32_t>(), b.at("waits_for").get<std::uint32_t>(),
                                b.at("conflict").get<std::string>(), b.at("op").get<std::string>(),
                                b.at("collective").get<std::string>()));
}

// Ranks blocked waiting for a rank whose program returned: it has nothing left to send.
void returned_peers(const json& blocked, const json& waiting, const json& per_rank_cycles, json& why) {
  std::map<std::uint32_t, std::map<std::string, std::set<std::uint32_t>>> by_peer;  // returned rank -> op -> waiters
  for (const auto& b : blocked) {
    const std::uint32_t peer = b.at("waits_for");
    if (std::find(waiting.begin(), waiting.end(), json(peer)) == waiting.end())
      by_peer[peer][b.at("op").get<std::string>()].insert(b.at("rank").get<std::uint32_t>());
  }
  for (const auto& [peer, ops] : by_peer) {
    std::string s = fmt::format("r{}'s program returned", peer);
    if (per_rank_cycles.is_array() && peer < per_rank_cycles.size())
      s += fmt::format(" at cycle {}", per_rank_cycles[peer].get<std::uint64_t>());
    s += " while";
    for (const auto& [op, ranks] : ops) s += fmt::format(" {} wait(s) for it in {};", ranks_text(ranks), op);
    s.back() = ':';
    why.push_back(s + " it ran fewer collectives than they did");
  }
}

// Links that were down: the messages lost on them, the first of each link named.
void dead_links(const json& lost, json& why) {
  std::map<std::string, std::vector<const json*>> by_link;
  for (const auto& l : lost) by_link[l.at("link").get<std::string>()].push_back(&l);
  for (const auto& [link, list] : by_link) {
    const json& first = *list.front();
    why.push_back(fmt::format("link {} is down: {} message(s) sent on it were lost, the first r{} -> r{} at cycle {} "
                              "(call #{} of communicator {}); the ranks waiting for them never get them",
                              link, list.size(), first.at("src").get<std::uint32_t>(), first.at("dst").get<std::uint32_t>(),
                              first.at("cycle").get<std::uint64_t>(), first.at("seq").get<std::uint32_t>(),
                              first.at("comm").get<std::uint32_t>()));
  }
}

// The first step whose loss-scaling decisions differ between ranks.
void loss_scaling_decisions(const json& ls, json& why) {
  if (!ls.is_object()) return;
  std::map<std::uint32_t, std::map<bool, std::set<std::uint32_t>>> by_step;  // step -> skipped -> ranks
  for (const auto& s : ls.at("steps"))
    by_step[s.at("step")][s.at("skipped").get<bool>()].insert(s.at("rank").get<std::uint32_t>());
  for (const auto& [step, d] : by_step) {
    if (d.size() < 2) continue;
    why.push_back(fmt::format(
        "step {}: {} skipped the optimizer update (found_inf) and {} did not{}", step, ranks_text(d.at(true)),
        ranks_text(d.at(false)),
        ls.value("all_reduce", true) ? std::string()
                                     : "; found_inf is not all-reduced (training.loss_scaling.all_reduce: false), so "
                                       "each rank decides alone and the ranks that skip also skip the collectives of "
                                       "the update"));
    return;
  }
}

std::string summary(const json& h) {
  const json& blocked = h.at("blocked");
  std::string s = fmt::format("job hang: {} rank(s) blocked in collectives", blocked.size());
  const auto gs = groups(blocked);
  for (std::size_t i = 0; i < gs.size() && i < 4; ++i)
    s += fmt::format("{} {} at {} step {} (call #{})", i ? ";" : ":", ranks_text(gs[i].ranks),
                     gs[i].first->at("op").get<std::string>(), gs[i].first->at("step").get<std::uint32_t>(),
                     gs[i].first->at("seq").get<std::uint32_t>());
  if (gs.size() > 4) s += fmt::format("; ... ({} more places in report.json hang.blocked)", gs.size() - 4);
  return s;
}

}  // namespace

json merge_hang(const std::vector<json>& parts, const json& loss_scaling, const json& per_rank_cycles,
               const chip::ChipClock& clock) {
  json blocked = json::array(), waiting = json::array(), lost = json::array();
  std::uint64_t last = 0, first_timeout = 0;
  std::string noticed;
  for (const json& p : parts) {
    for (const auto& b : p.at("blocked")) blocked.push_back(b);
    for (const auto& r : p.at("waiting")) waiting.push_back(r);
    for (const auto& l : p.at("lost")) lost.push_back(l);
    const std::uint64_t t = p.at("time_ps");
    if (p.at("noticed_by").get<std::string>().empty()) {
      last = std::max(last, t);
    } else if (noticed.empty() || t < first_timeout) {
      first_timeout = t;
      noticed = p.at("noticed_by");
    }
  }
  std::stable_sort(blocked.begin(), blocked.end(), [](const json& a, const json& b) {
    return std::tie(a.at("rank").get_ref<const json::number_unsigned_t&>(), a.at("seq").get_ref<const json::number_unsigned_t&>()) <
           std::tie(b.at("rank").get_ref<const json::number_unsigned_t&>(), b.at("seq").get_ref<const json::number_unsigned_t&>());
  });
  std::sort(waiting.begin(), waiting.end());
  std::stable_sort(lost.begin(), lost.end(), [](const json& a, const json& b) {
    return std::make_tuple(a.at("at_ps").get<std::uint64_t>(), a.at("src").get<std::uint32_t>(), a.at("dst").get<std::uint32_t>()) <
           std::make_tuple(b.at("at_ps").get<std::uint64_t>(), b.at("src").get<std::uint32_t>(), b.at("dst").get<std::uint32_t>());
  });
  for (auto& l : lost) l["cycle"] = clock.ps_to_cycles(l.at("at_ps").get<std::uint64_t>());
  const std::uint64_t t = noticed.empty() ? last : first_timeout;
  for (auto& b : blocked) b["since_cycle"] = clock.ps_to_cycles(b.at("since_ps").get<std::uint64_t>());
  json h = {{"time_ps", t},         {"cycle", clock.ps_to_cycles(t)}, {"noticed_by", noticed},
            {"waiting", waiting},   {"blocked", blocked},                {"lost", lost}};
  json why = json::array();
  dead_links(h.at("lost"), why);
  different_collectives(h.at("blocked"), why);
  returned_peers(h.at("blocked"), h.at("waiting"), per_rank_cycles, why);
  loss_scaling_decisions(loss_scaling, why);
  h["explanation"] = std::move(why);
  h["summary"] = summary(h);
  return h;
}

std::string hang_text(const json& h) {
  if (!h.is_object()) return {};
  std::string out = fmt::format("  job hang at cycle {}{}:\n", h.value("cycle", std::uint64_t{0}),
                                h.value("noticed_by", std::string()).empty() ? " (nothing left to simulate)"
                                                                             : " (" + h.value("noticed_by", std::string()) + ")");
  const auto gs = groups(h.at("blocked"));
  for (std::size_t i = 0; i < gs.size() && i < 8; ++i) {
    const Group& g = gs[i];
    const json& b = *g.first;
    const std::string since = g.since_max == g.since_min ? fmt::format("{}", g.since_min)
                                                         : fmt::format("{}-{}", g.since_min, g.since_max);
    std::string conflict;
    for (const auto& [c, to] : g.conflicts)
      conflict += fmt::format("; a message of {} reached {}", c.substr(0, c.find(' ')), ranks_text(to));
    out += fmt::format("    {} blocked at step {} in {} ({}, call #{} of {}) since cycle {}, waiting for {}{}\n",
                       ranks_text(g.ranks), b.at("step").get<std::uint32_t>(), b.at("op").get<std::string>(),
                       b.at("collective").get<std::string>(), b.at("seq").get<std::uint32_t>(),
                       g.comms.size() == 1 ? fmt::format("communicator {}", *g.comms.begin())
                                           : fmt::format("{} communicators", g.comms.size()),
                       since,
                       ranks_text(g.waits_for), conflict);
  }
  if (gs.size() > 8) out += fmt::format("    ... {} more places in report.json hang.blocked\n", gs.size() - 8);
  for (const auto& e : h.at("explanation")) out += "    why: " + e.get<std::string>() + "\n";
  return out;
}

}  // namespace probelab::sim
