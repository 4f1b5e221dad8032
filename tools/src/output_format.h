// The --format option every reporting subcommand takes: a table for people, JSON for programs.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace strata::tools {

enum class OutputFormat { table, json };

inline CLI::Option* add_format_option(CLI::App* command, OutputFormat& format) {
  return command
      ->add_option_function<std::string>(
          "--format",
          [&format](const std::string& name) {
            format = name == "json" ? OutputFormat::json : OutputFormat::table;
          },
          "Output: table (default) or json")
      ->check(CLI::IsMember({"table", "json"}))
      ->option_text("table|json");
}

}  // namespace strata::tools
