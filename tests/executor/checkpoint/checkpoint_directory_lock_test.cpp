// CheckpointDirectoryLock: one holder at a time, named to the second; released when the holder
// lets go.
#include "strata/executor/checkpoint/checkpoint_directory_lock.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <optional>

#include "input_error_message.h"

namespace strata::executor {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

TEST(CheckpointDirectoryLock, TheSecondHolderIsRefusedWithTheFirstsPid) {
  const fs::path directory =
      fs::path(::testing::TempDir()) / ("lock-test-" + std::to_string(::getpid()));
  fs::remove_all(directory);
  fs::create_directories(directory);
  std::optional<CheckpointDirectoryLock> first(std::in_place, directory);
  // flock is held per open file: a second open in this process conflicts as another job's would.
  const std::string refusal =
      strata::testing::input_error_message([&] { CheckpointDirectoryLock second(directory); });
  EXPECT_THAT(refusal, HasSubstr(directory.string() + ": in use by another job (host "));
  EXPECT_THAT(refusal, HasSubstr("pid " + std::to_string(::getpid()) + ", since "));
  first.reset();
  EXPECT_NO_THROW(CheckpointDirectoryLock again(directory));
  EXPECT_TRUE(fs::exists(directory / CheckpointDirectoryLock::kFileName));
  fs::remove_all(directory);
}

// Trainers of one process share its hold (a run and the run resuming it); another process's
// lock (here: a direct second lock) still conflicts with it.
TEST(CheckpointDirectoryLock, OneProcessSharesItsHold) {
  const fs::path directory =
      fs::path(::testing::TempDir()) / ("lock-share-test-" + std::to_string(::getpid()));
  fs::remove_all(directory);
  fs::create_directories(directory);
  const auto first = hold_checkpoint_directory(directory);
  const auto second = hold_checkpoint_directory(directory / ".");
  EXPECT_EQ(first.get(), second.get());
  EXPECT_THAT(
      strata::testing::input_error_message([&] { CheckpointDirectoryLock other(directory); }),
      HasSubstr("in use by another job"));
  fs::remove_all(directory);
}

TEST(CheckpointDirectoryLock, AMissingDirectoryCannotBeWritten) {
  const fs::path missing = fs::path(::testing::TempDir()) / "no-such-directory" / "ckpt";
  EXPECT_THAT(strata::testing::input_error_message([&] { CheckpointDirectoryLock lock(missing); }),
              HasSubstr(missing.string() + ": cannot write: No such file or directory"));
}

}  // namespace
}  // namespace strata::executor
