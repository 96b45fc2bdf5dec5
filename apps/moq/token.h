#pragma once
// `moq token`: mints a moq-relay JWT (the `?jwt=` of a connect URL) with a key file.
#include <CLI/CLI.hpp>

namespace moqd::cli {

// Adds the `token` subcommand to `app`; when it runs, its exit status goes to *rc.
void add_token_command(CLI::App& app, int* rc);

}  // namespace moqd::cli
