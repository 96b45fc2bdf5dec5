#include "model/path.h"

namespace moqd::model {

std::string normalize_path(std::string_view path) {
  std::string out;
  out.reserve(path.size());
  for (char c : path) {
    if (c == '/' && (out.empty() || out.back() == '/')) {
      continue;
    }
    out.push_back(c);
  }
  if (!out.empty() && out.back() == '/') {
    out.pop_back();
  }
  return out;
}

bool has_prefix(std::string_view prefix, std::string_view path) {
  return strip_prefix(prefix, path).has_value();
}

std::optional<std::string_view> strip_prefix(std::string_view prefix, std::string_view path) {
  if (prefix.empty()) {
    return path;
  }
  if (!path.starts_with(prefix)) {
    return std::nullopt;
  }
  if (path.size() == prefix.size()) {
    return std::string_view();
  }
  if (path[prefix.size()] != '/') {
    return std::nullopt;
  }
  return path.substr(prefix.size() + 1);
}

std::string join_path(std::string_view a, std::string_view b) {
  if (a.empty()) {
    return std::string(b);
  }
  if (b.empty()) {
    return std::string(a);
  }
  std::string out;
  out.reserve(a.size() + 1 + b.size());
  out.append(a).append("/").append(b);
  return out;
}

}  // namespace moqd::model
