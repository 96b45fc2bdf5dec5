#pragma once
// The live status page (web/status.html), embedded into the binary at build time.
#include <string>

namespace moqd::relay {

std::string status_page_html();

}  // namespace moqd::relay
