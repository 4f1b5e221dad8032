// run_cli: the whole `strata` command line as a function, for the binary's main and for the CLI
// fuzz test, which runs it in forked children by the thousand without an exec each.
#pragma once

namespace strata::tools {

// Parses argv, runs the subcommand and returns the exit status (0 ok, 1 invalid input, 2 usage,
// 3 internal error); every failure is one `strata:` line on stderr.
int run_cli(int argc, char** argv);

}  // namespace strata::tools
