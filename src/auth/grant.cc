#include "auth/grant.h"

#include "model/path.h"

namespace moqd::auth {

bool Pattern::matches(std::string_view full_path) const {
  return subtree ? model::has_prefix(path, full_path) : path == full_path;
}

Pattern parse_pattern(std::string_view root, std::string_view text) {
  std::string t = model::normalize_path(text);
  if (t == "**") {
    return Pattern{model::normalize_path(root), true};
  }
  if (t.size() >= 3 && t.compare(t.size() - 3, 3, "/**") == 0) {
    return Pattern{model::join_path(model::normalize_path(root), t.substr(0, t.size() - 3)), true};
  }
  return Pattern{model::join_path(model::normalize_path(root), t), false};
}

Grant Grant::everything(std::string source) {
  Grant g;
  g.publish.push_back(Pattern{"", true});
  g.subscribe.push_back(Pattern{"", true});
  g.source = std::move(source);
  return g;
}

bool Grant::may_publish(std::string_view full_path) const {
  for (const Pattern& p : publish) {
    if (p.matches(full_path)) {
      return true;
    }
  }
  return false;
}

bool Grant::may_subscribe(std::string_view full_path) const {
  for (const Pattern& p : subscribe) {
    if (p.matches(full_path)) {
      return true;
    }
  }
  return false;
}

bool Grant::may_discover(std::string_view prefix) const {
  for (const Pattern& p : subscribe) {
    if (model::has_prefix(prefix, p.path) || (p.subtree && model::has_prefix(p.path, prefix))) {
      return true;
    }
  }
  return false;
}

bool Grant::may_connect(std::string_view root) const {
  for (const auto* list : {&publish, &subscribe}) {
    for (const Pattern& p : *list) {
      if (model::has_prefix(root, p.path) || (p.subtree && model::has_prefix(p.path, root))) {
        return true;
      }
    }
  }
  return false;
}

Result<Grant, TokenError> grant_for_claims(const Claims& claims, std::string_view root,
                                           std::string source) {
  std::string token_root = model::normalize_path(claims.root);
  if (!model::has_prefix(token_root, root)) {
    return tl::unexpected(TokenError{Refusal::kWrongRoot, "connect path /" + std::string(root) +
                                                              " is not inside token root /" +
                                                              token_root});
  }
  Grant g;
  g.root = token_root;
  g.expires = claims.exp;
  g.source = std::move(source);
  for (const auto& p : claims.put.value_or(std::vector<std::string>{})) {
    g.publish.push_back(Pattern{model::join_path(token_root, model::normalize_path(p)), true});
  }
  for (const auto& p : claims.get.value_or(std::vector<std::string>{})) {
    g.subscribe.push_back(Pattern{model::join_path(token_root, model::normalize_path(p)), true});
  }
  if (!g.may_connect(root)) {
    return tl::unexpected(TokenError{Refusal::kNoPermission, "token grants nothing at /" +
                                                                 std::string(root)});
  }
  return g;
}

Result<Grant, TokenError> authenticate(const AuthPolicy& policy, std::string_view root,
                                       std::string_view query, int64_t now) {
  if (policy.is_open()) {
    return Grant::everything("open");
  }
  auto jwt = query_param(query, "jwt");
  if (jwt && !jwt->empty() && !policy.keys.empty()) {
    auto claims = verify_token(*jwt, policy.keys, now);
    if (!claims) {
      return tl::unexpected(claims.error());
    }
    return grant_for_claims(*claims, root, "jwt");
  }
  Grant g;
  g.source = "public";
  for (const auto& prefix : policy.public_prefixes) {
    Pattern p{model::normalize_path(prefix), true};
    g.publish.push_back(p);
    g.subscribe.push_back(p);
  }
  if (!g.may_connect(root)) {
    return tl::unexpected(TokenError{
        Refusal::kNoPermission,
        jwt ? "token given but no key is configured, and no public prefix at /" + std::string(root)
            : "no token, and no public prefix at /" + std::string(root)});
  }
  return g;
}

}  // namespace moqd::auth
