// input_error_message(action): runs `action` and returns the InputError it throws as users see it,
// or "(accepted)" when it throws none. Shared by the tests of every format.
#pragma once

#include <string>

#include "strata/schemas/input_error.h"

namespace strata::testing {

template <typename Action>
std::string input_error_message(Action&& action) {
  try {
    action();
  } catch (const schemas::InputError& error) {
    return error.what();
  }
  return "(accepted)";
}

}  // namespace strata::testing
