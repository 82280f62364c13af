#include "sim/run/detail/partition_wire.h"

#include <cerrno>
#include <stdexcept>

#include <sys/socket.h>
#include <unistd.h>

namespace probelab::sim::detail {

using nlohmann::json;

json message_json(const chip::Message& m) {
  const auto b = m.payload.bytes();
  return json::array({m.src, m.dst, m.seq, m.key.comm, m.key.seq, m.key.step, m.key.src_pos, m.header.op,
                      m.header.algorithm, m.header.dtype, m.header.reduction, m.header.root, m.header.group_size,
                      m.header.count, m.dtype, m.partial,
                      json::binary_t(std::vector<std::uint8_t>(reinterpret_cast<const std::uint8_t*>(b.data()),
                                                               reinterpret_cast<const std::uint8_t*>(b.data()) + b.size())),
                      m.wire_bytes, m.hop, m.head_ps, m.tail_ps});
}

chip::Message message_from(const json& j) {
  chip::Message m;
  m.src = j.at(0);
  m.dst = j.at(1);
  m.seq = j.at(2);
  m.key = {j.at(3), j.at(4), j.at(5), j.at(6)};
  m.header.op = j.at(7);
  m.header.algorithm = j.at(8);
  m.header.dtype = j.at(9);
  m.header.reduction = j.at(10);
  m.header.root = j.at(11);
  m.header.group_size = j.at(12);
  m.header.count = j.at(13);
  m.dtype = j.at(14);
  m.partial = j.at(15);
  const auto& bin = j.at(16).get_binary();
  std::vector<std::byte> bytes(bin.size());
  for (std::size_t i = 0; i < bin.size(); ++i) bytes[i] = static_cast<std::byte>(bin[i]);
  m.payload = chip::Payload::own(std::move(bytes));
  m.wire_bytes = j.at(17);
  m.hop = j.at(18);
  m.head_ps = j.at(19);
  m.tail_ps = j.at(20);
  return m;
}

namespace {

json header_json(const WindowReport& r) {
  return {{"next", r.next_ps},       {"done", r.hosts_done}, {"finish", r.finish_ps},
          {"failed", r.failed},      {"running", r.running}, {"waiting", r.waiting},
          {"timed_out", r.timed_out}, {"timeout", r.timeout_ps}};
}

WindowReport header_from(const json& j) {
  WindowReport r;
  r.next_ps = j.at("next");
  r.hosts_done = j.at("done");
  r.finish_ps = j.at("finish");
  r.failed = j.at("failed");
  r.running = j.at("running");
  r.waiting = j.at("waiting");
  r.timed_out = j.at("timed_out");
  r.timeout_ps = j.at("timeout");
  return r;
}

template <class F>
auto parse(const std::vector<std::uint8_t>& b, const char* what, F&& f) {
  try {
    return f(json::from_msgpack(b));
  } catch (const json::exception& e) {
    throw std::runtime_error(std::string("distributed run: malformed ") + what + ": " + e.what());
  }
}

}  // namespace

std::vector<std::uint8_t> encode_report(const WindowReport& r) {
  json j = header_json(r);
  json out = json::array();
  for (const auto& [to, m] : r.outgoing) out.push_back({to, message_json(m)});
  j["out"] = std::move(out);
  return json::to_msgpack(j);
}

WindowReport decode_report(const std::vector<std::uint8_t>& b) {
  return parse(b, "window report", [](const json& j) {
    WindowReport r = header_from(j);
    for (const auto& o : j.at("out")) r.outgoing.emplace_back(o.at(0).get<std::uint32_t>(), message_from(o.at(1)));
    return r;
  });
}

std::vector<std::uint8_t> encode_grant(const WindowGrant& g) {
  json in = json::array();
  for (const auto& m : g.incoming) in.push_back(message_json(m));
  return json::to_msgpack(json{{"stop", g.stop}, {"until", g.until_ps}, {"end", g.end_ps}, {"error", g.error}, {"deadlock", g.deadlock}, {"in", in}});
}

WindowGrant decode_grant(const std::vector<std::uint8_t>& b) {
  return parse(b, "window grant", [](const json& j) {
    WindowGrant g;
    g.stop = j.at("stop");
    g.until_ps = j.at("until");
    g.end_ps = j.at("end");
    g.error = j.at("error");
    g.deadlock = j.at("deadlock");
    for (const auto& m : j.at("in")) g.incoming.push_back(message_from(m));
    return g;
  });
}

namespace {

bool write_all(int fd, const void* data, std::size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    // A peer that died (a child killed by --timeout) is an error here, not SIGPIPE for the process.
    const ssize_t k = ::send(fd, p, n, MSG_NOSIGNAL);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    p += k;
    n -= static_cast<std::size_t>(k);
  }
  return true;
}

bool read_all(int fd, void* data, std::size_t n) {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    const ssize_t k = ::read(fd, p, n);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    p += k;
    n -= static_cast<std::size_t>(k);
  }
  return true;
}

}  // namespace

void write_frame(int fd, char kind, const std::vector<std::uint8_t>& bytes) {
  const std::uint64_t n = bytes.size();
  if (!write_all(fd, &kind, 1) || !write_all(fd, &n, sizeof n) || !write_all(fd, bytes.data(), bytes.size()))
    throw std::runtime_error("distributed run: the other side of a partition socket went away");
}

std::optional<std::pair<char, std::vector<std::uint8_t>>> read_frame(int fd) {
  char kind = 0;
  std::uint64_t n = 0;
  if (!read_all(fd, &kind, 1) || !read_all(fd, &n, sizeof n)) return std::nullopt;
  std::vector<std::uint8_t> b(n);
  if (!read_all(fd, b.data(), b.size())) return std::nullopt;
  return std::make_pair(kind, std::move(b));
}

}  // namespace probelab::sim::detail
