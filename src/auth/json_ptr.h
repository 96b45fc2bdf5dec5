#pragma once
// Owning pointers for jansson values and for C strings that jansson and libjwt return from
// malloc (json_dumps, jwt_encode_str). Internal to src/auth; key.cc, token.cc and grant.cc use
// them on the caller's thread.

#include <jansson.h>

#include <cstdlib>
#include <memory>

namespace moqd::auth {

struct JsonDeleter {
  void operator()(json_t* j) const { json_decref(j); }
};
using JsonPtr = std::unique_ptr<json_t, JsonDeleter>;

struct FreeDeleter {
  void operator()(char* p) const { std::free(p); }
};
using CString = std::unique_ptr<char, FreeDeleter>;

}  // namespace moqd::auth
