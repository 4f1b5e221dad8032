// The GPU admission rule on numbers (this machine may have no GPU): a rank whose predicted peak is
// above the device's free memory is refused with the parts of the peak and the fields to change;
// one at or below it is admitted. And, where a GPU is present, the rule through `strata train`.
#include "memory_admission.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "strata/executor/cuda/cuda_device.h"
#include "strata/schemas/input_error.h"
#include "strata_command.h"

namespace strata::tools {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

simulator::RankMemory rank_needing(double weights_gib, double activations_gib) {
  simulator::RankMemory rank;
  rank.weights_bytes = weights_gib * kGiB;
  rank.gradients_bytes = weights_gib * kGiB;
  rank.optimizer_bytes = 2 * weights_gib * kGiB;
  rank.activations_peak_bytes = activations_gib * kGiB;
  rank.peak_bytes = 4 * weights_gib * kGiB + activations_gib * kGiB;
  return rank;
}

std::string refusal(const simulator::RankMemory& rank, double free_gib, double total_gib) {
  try {
    check_device_memory(rank, free_gib * kGiB, total_gib * kGiB, "NVIDIA H200");
  } catch (const schemas::InputError& error) {
    return error.what();
  }
  return "";
}

TEST(DeviceMemoryAdmission, ARankAboveTheFreeMemoryIsRefusedWithItsParts) {
  // 4 × 10 + 60 = 100 GiB against 90 free of 139.8: refused although the device holds 139.8.
  const std::string message = refusal(rank_needing(10, 60), 90, 139.8);
  EXPECT_THAT(message, StartsWith("--memory-check: the GPU (NVIDIA H200) has 90.0 GiB free of "
                                  "139.8 GiB but a rank needs 100.00 GiB = weights 10.00 + "
                                  "gradients 10.00 + optimizer 20.00 + activations 60.00"));
  EXPECT_THAT(message, HasSubstr("Lower batch.micro_batch_size or seq_length"));
  EXPECT_THAT(message, HasSubstr("--memory-check off"));
  EXPECT_EQ(message.find('\n'), std::string::npos);
}

TEST(DeviceMemoryAdmission, ARankThatFitsIsAdmitted) {
  EXPECT_EQ(refusal(rank_needing(10, 60), 100, 139.8), "");  // exactly the free memory
  EXPECT_EQ(refusal(rank_needing(1, 2), 70, 79.6), "");
}

// Through the command line on this machine's GPU: GPT-2 124M at 4,096 × 1,024 tokens needs
// terabytes of activations, which no GPU has free.
TEST(DeviceMemoryAdmission, StrataTrainOnAGpuRefusesWhatItsDeviceCannotHold) {
  std::string why_not;
  if (!executor::cuda_device_info(&why_not)) GTEST_SKIP() << "no GPU: " << why_not;
  const std::string tokens =
      (std::filesystem::path(::testing::TempDir()) / "admission-tokens.bin").string();
  ASSERT_EQ(
      testing::strata("data --text /usr/share/common-licenses/GPL-3 --out " + tokens).exit_code, 0);
  const testing::CommandResult run =
      testing::strata("train --device cuda --model gpt2-124m --data " + tokens +
                      " --micro-batch 4096 --seq-len 1024 --steps 1");
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_THAT(run.err, StartsWith("strata: --memory-check: the GPU ("));
  EXPECT_EQ(run.out, "");
}

}  // namespace
}  // namespace strata::tools
