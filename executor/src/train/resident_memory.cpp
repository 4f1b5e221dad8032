#include "strata/executor/train/resident_memory.h"

#include <sys/resource.h>
#include <unistd.h>

#include <fstream>

namespace strata::executor {

std::size_t current_resident_bytes() {
  // statm: total program size, then resident pages.
  std::ifstream statm("/proc/self/statm");
  std::size_t total_pages = 0, resident_pages = 0;
  if (!(statm >> total_pages >> resident_pages)) return 0;
  return resident_pages * static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
}

std::size_t peak_resident_bytes() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  return static_cast<std::size_t>(usage.ru_maxrss) * 1024;  // Linux reports KiB
}

}  // namespace strata::executor
