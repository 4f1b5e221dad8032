// `strata`: plans, simulates and runs parallel LLM training (tools/src/cli.cpp has the commands).
#include "cli.h"

int main(int argc, char** argv) { return strata::tools::run_cli(argc, argv); }
