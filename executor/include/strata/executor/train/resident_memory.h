// The host memory this process holds (Linux): what a CPU run's memory is measured by. The peak
// resident set minus the resident set before the model existed is the memory the model, its
// optimizer, activations and communication buffers took — the quantity the simulator's memory
// prediction is held against (the process's baseline — the binary, libraries, MPI — is not).
#pragma once

#include <cstddef>

namespace strata::executor {

// The resident set now: every page of the process in RAM (/proc/self/statm).
std::size_t current_resident_bytes();
// The largest resident set the process has had (getrusage's ru_maxrss).
std::size_t peak_resident_bytes();

// The peak of the resident set restarted from now (/proc/self/clear_refs, Linux 4.0 on), so that
// peak_resident_since_reset_bytes() sees what one operation added. False where the kernel does
// not allow it.
bool reset_peak_resident();
// The largest resident set since reset_peak_resident() (VmHWM of /proc/self/status); 0 when
// unreadable.
std::size_t peak_resident_since_reset_bytes();

}  // namespace strata::executor
