#include "strata/executor/train/resident_memory.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>

namespace strata::executor {
namespace {

// strata profile reads the communicator's temporaries as the growth of the peak resident set
// over one operation: the peak must restart at the current set and see a buffer touched after.
TEST(ResidentMemory, PeakSinceResetSeesWhatWasTouchedAfterIt) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer's shadow memory makes the resident set move on its own";
#endif
  if (!reset_peak_resident()) GTEST_SKIP() << "this kernel cannot restart the peak resident set";
  const std::size_t before = current_resident_bytes();
  ASSERT_GT(before, 0u);
  // The peak restarted: at most what is resident now (and the little the reads allocate).
  EXPECT_LT(peak_resident_since_reset_bytes(), before + (std::size_t{8} << 20));
  constexpr std::size_t kBytes = std::size_t{64} << 20;
  {
    const std::unique_ptr<char[]> buffer(new char[kBytes]);
    std::memset(buffer.get(), 1, kBytes);  // faulted in, then freed (glibc maps it, unmaps it)
    EXPECT_GE(current_resident_bytes(), before + kBytes * 9 / 10);
  }
  const std::size_t peak = peak_resident_since_reset_bytes();
  EXPECT_GE(peak, before + kBytes * 9 / 10);
  EXPECT_LT(peak, before + kBytes + (std::size_t{16} << 20));
  // Restarting again forgets it.
  ASSERT_TRUE(reset_peak_resident());
  EXPECT_LT(peak_resident_since_reset_bytes(), before + kBytes / 2);
}

}  // namespace
}  // namespace strata::executor
