#pragma once
// Producer bugs inside the model (an impossible-but-survivable state, never peer input: the session
// validates the wire first). Debug builds abort so the bug is found; release builds log and the
// caller takes its safe fallback.
#include <cstdlib>

#include "base/log.h"

#ifdef NDEBUG
#define MOQD_MODEL_BUG(what) MOQD_LOG(kError, "model bug: %s (%s:%d)", what, __FILE__, __LINE__)
#else
#define MOQD_MODEL_BUG(what)                                             \
  do {                                                                   \
    MOQD_LOG(kError, "model bug: %s (%s:%d)", what, __FILE__, __LINE__); \
    ::moqd::log::flush();                                                \
    std::abort();                                                        \
  } while (0)
#endif
