// The --format option every reporting subcommand takes: a table for people, JSON for programs.
#pragma once

#include <CLI/CLI.hpp>
#include <map>
#include <string>

namespace strata::tools {

enum class OutputFormat { table, json };

inline CLI::Option* add_format_option(CLI::App* command, OutputFormat& format) {
  static const std::map<std::string, OutputFormat> kNames{{"table", OutputFormat::table},
                                                          {"json", OutputFormat::json}};
  return command->add_option("--format", format, "Output: table (default) or json")
      ->transform(CLI::CheckedTransformer(kNames, CLI::ignore_case))
      ->option_text("table|json");
}

}  // namespace strata::tools
