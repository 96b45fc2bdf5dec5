#include "wire/ietf_namespace.h"

namespace moqd::wire::ietf {

std::optional<std::string> to_path(const TrackNamespace& ns) {
  std::string path;
  for (size_t i = 0; i < ns.size(); ++i) {
    if (ns[i].empty()) {
      return std::nullopt;  // "a//b" is not a normalised path
    }
    // A field ending in '/' escapes it as "\/", which the next separator or the path's end turns
    // into a run of '/' or a trailing one: normalisation would rename the broadcast ("a\//b" is
    // "a\/b", the tuple ("a/b")).
    if (ns[i].back() == '/') {
      return std::nullopt;
    }
    if (i > 0) {
      path += '/';
    }
    for (char c : ns[i]) {
      if (c == '\\' || c == '/') {
        path += '\\';
      }
      path += c;
    }
  }
  return path;
}

TrackNamespace to_namespace(std::string_view path) {
  TrackNamespace ns;
  if (path.empty()) {
    return ns;
  }
  ns.emplace_back();
  for (size_t i = 0; i < path.size(); ++i) {
    char c = path[i];
    if (c == '/') {
      ns.emplace_back();
    } else if (c == '\\' && i + 1 < path.size() && (path[i + 1] == '/' || path[i + 1] == '\\')) {
      ns.back() += path[++i];
    } else {
      ns.back() += c;
    }
  }
  return ns;
}

}  // namespace moqd::wire::ietf
