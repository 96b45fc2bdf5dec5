#pragma once
// The one mapping between moqd's broadcast paths and IETF Track Namespace tuples
// (docs/ARCHITECTURE.md, "IETF namespaces and paths"). A tuple maps to a path by joining its
// fields with '/', each field escaped as @moq/net 0.3.4 escapes it ('\' -> "\\", '/' -> "\/"), so
// a broadcast has the same name over moq-lite, over IETF, in moqd and in the JS client. A path
// maps back by splitting on the unescaped '/'. Tuples whose path moqd's normalised paths cannot
// hold (an empty field, a field ending in '/', whose escaped '/' normalisation would merge with the
// next separator or drop at the path's end) have no path: the
// session refuses them with an error, never by changing the name. Pure; any thread.
#include <optional>
#include <string>
#include <string_view>

#include "wire/ietf.h"

namespace moqd::wire::ietf {

// The path of `ns` (relative to the session's root); nullopt when it has none. The empty tuple
// (a SUBSCRIBE_NAMESPACE prefix for everything) is the empty path.
std::optional<std::string> to_path(const TrackNamespace& ns);
// The tuple of a normalised path; "" gives the empty tuple. A '\' not followed by '/' or '\' is
// kept as it is (as @moq/net reads it).
TrackNamespace to_namespace(std::string_view path);

}  // namespace moqd::wire::ietf
