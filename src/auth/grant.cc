#include "auth/grant.h"

#include <jansson.h>

#include <memory>

#include "auth/json_ptr.h"
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
  g.cluster = true;
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
  g.cluster = claims.cluster;
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

namespace {

tl::unexpected<TokenError> service_refusal(Refusal r, std::string why) {
  return tl::unexpected(TokenError{r, std::move(why)});
}

// A list of pattern strings; false when it has another type.
bool read_patterns(const json_t* obj, const char* name, std::string_view root,
                   std::vector<Pattern>& out) {
  const json_t* v = json_object_get(obj, name);
  if (v == nullptr || json_is_null(v)) {
    return true;
  }
  if (!json_is_array(v)) {
    return false;
  }
  size_t i;
  const json_t* item;
  json_array_foreach(v, i, item) {
    if (!json_is_string(item)) {
      return false;
    }
    out.push_back(parse_pattern(root, json_string_value(item)));
  }
  return true;
}
}  // namespace

std::string service_request_json(const ServiceRequest& r) {
  JsonPtr o(json_object());
  json_object_set_new(o.get(), "id", json_string(r.id.c_str()));
  json_object_set_new(o.get(), "event", json_string("connect"));
  json_object_set_new(o.get(), "node", json_string(r.node.c_str()));
  json_object_set_new(o.get(), "transport", json_string(r.transport.c_str()));
  if (!r.remote.empty()) json_object_set_new(o.get(), "remote", json_string(r.remote.c_str()));
  if (!r.alpn.empty()) json_object_set_new(o.get(), "alpn", json_string(r.alpn.c_str()));
  json_object_set_new(o.get(), "path", json_string(r.path.c_str()));
  if (!r.query.empty()) json_object_set_new(o.get(), "query", json_string(r.query.c_str()));
  CString text(json_dumps(o.get(), JSON_COMPACT));
  return text ? std::string(text.get()) : std::string("{}");
}

Result<Grant, TokenError> grant_from_service(std::string_view json, std::string_view root,
                                             int64_t now) {
  json_error_t err;
  JsonPtr o(json_loadb(json.data(), json.size(), 0, &err));
  if (!o || !json_is_object(o.get())) {
    return service_refusal(Refusal::kServiceFailed, "auth service answer is not a JSON object");
  }
  Grant g;
  g.source = "auth-url";
  g.root = model::normalize_path(root);
  if (const json_t* r = json_object_get(o.get(), "root"); r != nullptr && !json_is_null(r)) {
    if (!json_is_string(r)) {
      return service_refusal(Refusal::kServiceFailed, "auth service root is not a string");
    }
    g.root = model::normalize_path(json_string_value(r));
  }
  if (!read_patterns(o.get(), "publish", g.root, g.publish) ||
      !read_patterns(o.get(), "subscribe", g.root, g.subscribe)) {
    return service_refusal(Refusal::kServiceFailed, "auth service patterns are not string lists");
  }
  if (const json_t* e = json_object_get(o.get(), "expires"); e != nullptr && !json_is_null(e)) {
    if (!json_is_number(e)) {
      return service_refusal(Refusal::kServiceFailed, "auth service expires is not a number");
    }
    g.expires = static_cast<int64_t>(json_number_value(e));
    if (*g.expires <= now) {
      return service_refusal(Refusal::kExpired, "auth service grant already expired");
    }
  }
  if (g.publish.empty() && g.subscribe.empty()) {
    return service_refusal(Refusal::kNoPermission, "auth service granted nothing");
  }
  return g;
}

}  // namespace moqd::auth
