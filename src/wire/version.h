#pragma once
// MoQ protocol versions moqd knows, with the names used by --versions (see CONVENTIONS.md).
#include <cstdint>
#include <optional>
#include <string_view>

namespace moqd::wire {

enum class Version : uint64_t {
  kLite01 = 0xff0dad01,
  kLite02 = 0xff0dad02,
  kLite03 = 0xff0dad03,
  kLite04 = 0xff0dad04,
  kTransport14 = 0xff00000e,
  kTransport15 = 0xff00000f,
  kTransport16 = 0xff000010,
  kTransport17 = 0xff000011,
};

// "moq-lite-02" etc.; null for an unknown value.
const char* version_name(Version v);
std::optional<Version> version_from_name(std::string_view name);
std::optional<Version> version_from_wire(uint64_t v);
inline bool is_lite(Version v) {
  return v == Version::kLite01 || v == Version::kLite02 || v == Version::kLite03 ||
         v == Version::kLite04;
}
// lite-03 and later: no SETUP, typed SUBSCRIBE responses, hop counts, PROBE.
inline bool is_lite03_plus(Version v) { return v == Version::kLite03 || v == Version::kLite04; }

// Set of versions, as a bitmask over the enum order above.
class VersionSet {
 public:
  static VersionSet all();
  static VersionSet none() { return VersionSet(); }
  void add(Version v) { bits_ |= bit(v); }
  bool contains(Version v) const { return (bits_ & bit(v)) != 0; }
  bool empty() const { return bits_ == 0; }

 private:
  static uint32_t bit(Version v);
  uint32_t bits_ = 0;
};

}  // namespace moqd::wire
