// moq token --key FILE --root R --put P --get G --expires 1h: prints a JWT that moqd (and
// moq-relay, and @moq/token's verifier) accept. The key is what `moq-token generate` writes (an
// HMAC JWK, or a private RSA/EC JWK) or a private key in PEM.
#include "token.h"

#include <chrono>
#include <cstdio>

#include "auth/token.h"

namespace moqd::cli {
namespace {

struct TokenOptions {
  std::string key;
  std::string root;
  std::vector<std::string> put;
  std::vector<std::string> get;
  std::string expires = "1h";
  std::string kid;
  bool cluster = false;
};

// "90s", "15m", "1h", "2d" or bare seconds; false when malformed.
bool parse_lifetime(const std::string& text, int64_t& seconds) {
  size_t pos = 0;
  long long v = 0;
  try {
    v = std::stoll(text, &pos);
  } catch (...) {
    return false;
  }
  std::string unit = text.substr(pos);
  int64_t mult = unit.empty() || unit == "s" ? 1 : unit == "m" ? 60 : unit == "h" ? 3600
                                                  : unit == "d" ? 86400 : 0;
  if (mult == 0 || v < 0) {
    return false;
  }
  seconds = v * mult;
  return true;
}

int run(const TokenOptions& o) {
  std::string why;
  auto keys = auth::load_key_file(o.key, &why);
  if (!keys) {
    fprintf(stderr, "moq token: %s\n", why.c_str());
    return 1;
  }
  if (keys->size() != 1) {
    fprintf(stderr, "moq token: %s holds %zu keys; give a file with one\n", o.key.c_str(),
            keys->size());
    return 1;
  }
  auth::Key key = keys->front();
  if (!o.kid.empty()) {
    key.kid = o.kid;
  }
  int64_t lifetime = 0;
  if (!parse_lifetime(o.expires, lifetime)) {
    fprintf(stderr, "moq token: bad --expires '%s' (e.g. 90s, 15m, 1h, 2d; 0 for none)\n",
            o.expires.c_str());
    return 2;
  }
  if (o.put.empty() && o.get.empty()) {
    fprintf(stderr, "moq token: give --put or --get (or both)\n");
    return 2;
  }
  int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                    std::chrono::system_clock::now().time_since_epoch())
                    .count();
  auth::Claims c;
  c.root = o.root;
  if (!o.put.empty()) c.put = o.put;
  if (!o.get.empty()) c.get = o.get;
  c.iat = now;
  c.cluster = o.cluster;
  if (lifetime > 0) c.exp = now + lifetime;
  auto token = auth::sign_token(key, c, &why);
  if (!token) {
    fprintf(stderr, "moq token: %s\n", why.c_str());
    return 1;
  }
  printf("%s\n", token->c_str());
  return 0;
}

}  // namespace

void add_token_command(CLI::App& app, int* rc) {
  auto o = std::make_shared<TokenOptions>();
  auto* cmd = app.add_subcommand("token", "mint a JWT for moqd / moq-relay (?jwt= on the URL)");
  cmd->add_option("--key", o->key, "key file: a JWK (HMAC, or a private RSA/EC key), or PEM")
      ->required();
  cmd->add_option("--root", o->root, "the path the token is confined to (default: everything)");
  cmd->add_option("--put", o->put, "prefix (relative to root) it may publish under; repeatable");
  cmd->add_option("--get", o->get, "prefix (relative to root) it may subscribe to; repeatable");
  cmd->add_option("--expires", o->expires, "lifetime: 90s, 15m, 1h, 2d, or 0 for none (default 1h)");
  cmd->add_option("--kid", o->kid, "key ID for the header (default: the key's own)");
  cmd->add_flag("--cluster", o->cluster,
                "a relay's token (moqd --cluster-token): claim cluster=true marks a relay link");
  cmd->callback([o, rc] { *rc = run(*o); });
}

}  // namespace moqd::cli
