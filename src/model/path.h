#pragma once
// Broadcast paths (protocol/README.md §1.7): '/'-separated UTF-8, normalised by collapsing runs of
// '/' and stripping leading and trailing '/'. Nothing else changes ('.' and '..' stay literal).
#include <optional>
#include <string>
#include <string_view>

namespace moqd::model {

std::string normalize_path(std::string_view path);
// True when `path` equals `prefix` or starts with `prefix + "/"`; the empty prefix matches all.
bool has_prefix(std::string_view prefix, std::string_view path);
// The rest of `path` after `prefix/` ("" on an exact match, `path` for an empty prefix), or
// nullopt when `path` is not under `prefix`.
std::optional<std::string_view> strip_prefix(std::string_view prefix, std::string_view path);
// "a" + "b" -> "a/b"; either side empty -> the other.
std::string join_path(std::string_view a, std::string_view b);

}  // namespace moqd::model
