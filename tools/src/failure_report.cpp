#include "failure_report.h"

#include <filesystem>
#include <new>

#include "cli_checks.h"
#include "strata/executor/cuda/cuda_device.h"
#include "strata/schemas/input_error.h"

namespace strata::tools {

FailureReport failure_report(std::exception_ptr error) {
  try {
    std::rethrow_exception(error);
  } catch (const schemas::InputError& input) {
    return {kExitInvalidInput, error_line(input.what())};
  } catch (const executor::DeviceError& device) {
    return {kExitInvalidInput, error_line(device.what())};
  } catch (const std::filesystem::filesystem_error& refused) {
    // A path the file system refuses (too long, no permission) that no reader caught first.
    return {kExitInvalidInput,
            error_line(refused.path1().string()) + ": " + refused.code().message()};
  } catch (const std::bad_alloc&) {
    return {kExitInvalidInput, "out of memory"};
  } catch (const std::exception& internal) {
    return {kExitInternal, "internal error: " + error_line(internal.what())};
  } catch (...) {
    return {kExitInternal, "internal error: an exception of unknown type"};
  }
}

}  // namespace strata::tools
