#pragma once
// One field of a JSON object, read without trusting its type: the value when the field is
// there with the expected type (a string, a boolean, a number; an integer must fit), the fallback
// otherwise. Never throws, unlike nlohmann's value(), which throws on a field of another type: the
// worker's frames and replies and the clients' requests are read with it, and a wrong type must
// not take the reader down. In kernel/protocol, the lowest layer of the kernel, so every
// layer above reads JSON the same way.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

namespace belljar {

template <typename T>
T json_field(const nlohmann::json& object, std::string_view key, T fallback) {
  if (!object.is_object()) return fallback;
  auto it = object.find(key);
  if (it == object.end()) return fallback;
  if constexpr (std::is_same_v<T, std::string>) {
    return it->is_string() ? it->template get<std::string>() : fallback;
  } else if constexpr (std::is_same_v<T, bool>) {
    return it->is_boolean() ? it->template get<bool>() : fallback;
  } else if constexpr (std::is_floating_point_v<T>) {
    return it->is_number() ? it->template get<T>() : fallback;
  } else {
    static_assert(std::is_integral_v<T>, "json_field reads strings, booleans and numbers");
    if (it->is_number_unsigned()) {
      auto value = it->template get<uint64_t>();
      return std::in_range<T>(value) ? static_cast<T>(value) : fallback;
    }
    if (!it->is_number_integer()) return fallback;
    auto value = it->template get<int64_t>();
    return std::in_range<T>(value) ? static_cast<T>(value) : fallback;
  }
}

inline std::string json_field(const nlohmann::json& object, std::string_view key,
                              const char* fallback) {
  return json_field<std::string>(object, key, fallback);
}

}  // namespace belljar
