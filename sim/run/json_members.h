// A JSON object built a member at a time, for the report sections made once per op, step or
// rank: with the members given in key order each is placed at the end of the object. An
// initializer list builds every pair as a two-element array first and copies it into the object;
// keyed assignment searches the object for every member. A member out of order is still placed
// right (only slower).
#pragma once

#include <utility>

#include <nlohmann/json.hpp>

namespace probelab::sim {

class JsonMembers {
 public:
  JsonMembers& put(const char* key, nlohmann::json value) {
    obj_.emplace_hint(obj_.end(), key, std::move(value));
    return *this;
  }
  /// The object; the builder is left empty.
  nlohmann::json done() { return nlohmann::json(std::move(obj_)); }

 private:
  nlohmann::json::object_t obj_;
};

}  // namespace probelab::sim
