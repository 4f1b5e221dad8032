// EmbeddedFile: a data file compiled into the binary (see cmake/EmbedFiles.cmake).
// Used by the presets in schemas/.
#pragma once

#include <cstddef>
#include <string_view>

namespace strata::schemas {

struct EmbeddedFile {
  std::string_view name;      // file name without ".json"
  std::string_view contents;  // the file's bytes
};

}  // namespace strata::schemas
