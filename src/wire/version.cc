#include "wire/version.h"

namespace moqd::wire {
namespace {
struct Entry {
  Version version;
  const char* name;
};
constexpr Entry kVersions[] = {
    {Version::kLite01, "moq-lite-01"},      {Version::kLite02, "moq-lite-02"},
    {Version::kLite03, "moq-lite-03"},      {Version::kLite04, "moq-lite-04"},
    {Version::kTransport14, "moq-transport-14"}, {Version::kTransport15, "moq-transport-15"},
    {Version::kTransport16, "moq-transport-16"}, {Version::kTransport17, "moq-transport-17"},
};
}  // namespace

const char* version_name(Version v) {
  for (const auto& e : kVersions) {
    if (e.version == v) {
      return e.name;
    }
  }
  return nullptr;
}

std::optional<Version> version_from_name(std::string_view name) {
  for (const auto& e : kVersions) {
    if (name == e.name) {
      return e.version;
    }
  }
  return std::nullopt;
}

std::optional<Version> version_from_wire(uint64_t v) {
  for (const auto& e : kVersions) {
    if (static_cast<uint64_t>(e.version) == v) {
      return e.version;
    }
  }
  return std::nullopt;
}

uint32_t VersionSet::bit(Version v) {
  for (uint32_t i = 0; i < sizeof kVersions / sizeof kVersions[0]; ++i) {
    if (kVersions[i].version == v) {
      return 1u << i;
    }
  }
  return 0;
}

VersionSet VersionSet::all() {
  VersionSet s;
  for (const auto& e : kVersions) {
    s.add(e.version);
  }
  return s;
}

}  // namespace moqd::wire
