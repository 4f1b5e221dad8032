#include "strata/executor/checkpoint/checkpoint_directory_lock.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <map>
#include <mutex>
#include <string>

#include "strata/schemas/input_error.h"

namespace strata::executor {
namespace {

std::string holder_line() {
  char host[256] = {};
  if (::gethostname(host, sizeof(host) - 1) != 0) std::strcpy(host, "?");
  const std::time_t now = std::time(nullptr);
  std::tm parts{};
  gmtime_r(&now, &parts);
  char since[32];
  std::strftime(since, sizeof(since), "%Y-%m-%dT%H:%M:%SZ", &parts);
  return fmt::format("host {}, pid {}, since {}", host, static_cast<long>(::getpid()), since);
}

// What the holder wrote (one line), or a placeholder if it has not written it yet.
std::string read_holder(int descriptor) {
  char text[512] = {};
  const ssize_t read = ::pread(descriptor, text, sizeof(text) - 1, 0);
  std::string line = read > 0 ? std::string(text, static_cast<std::size_t>(read)) : "";
  if (const std::size_t newline = line.find('\n'); newline != std::string::npos) {
    line.resize(newline);
  }
  return line.empty() ? "holder not recorded yet" : line;
}

}  // namespace

CheckpointDirectoryLock::CheckpointDirectoryLock(const std::filesystem::path& directory) {
  const std::filesystem::path file = directory / kFileName;
  // Never through a link or into a FIFO or device someone planted under the lock's name: the
  // holder line is written into the file, which would overwrite the link's target.
  descriptor_ = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0644);
  if (descriptor_ < 0) {
    const int error = errno;
    if (error == ELOOP) {
      throw schemas::InputError(file.string(), "",
                                "is a symbolic link: the checkpoint lock is a regular file strata "
                                "creates; remove the link");
    }
    throw schemas::InputError(directory.string(), "",
                              fmt::format("cannot write: {}", std::strerror(error)));
  }
  struct stat status {};
  if (::fstat(descriptor_, &status) != 0 || !S_ISREG(status.st_mode)) {
    ::close(descriptor_);
    descriptor_ = -1;
    throw schemas::InputError(file.string(), "",
                              "is not a regular file: the checkpoint lock is a regular file "
                              "strata creates; remove it");
  }
  if (::flock(descriptor_, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    const std::string holder = read_holder(descriptor_);
    ::close(descriptor_);
    descriptor_ = -1;
    if (error == EWOULDBLOCK) {
      throw schemas::InputError(
          directory.string(), "",
          fmt::format("in use by another job ({}); two jobs in one checkpoint directory would "
                      "replace each other's checkpoints",
                      holder));
    }
    throw schemas::InputError(
        directory.string(), "",
        fmt::format("cannot lock {}: {}", file.string(), std::strerror(error)));
  }
  const std::string line = holder_line() + "\n";
  if (::ftruncate(descriptor_, 0) != 0 ||
      ::pwrite(descriptor_, line.data(), line.size(), 0) != static_cast<ssize_t>(line.size())) {
    const int error = errno;
    ::close(descriptor_);
    descriptor_ = -1;
    throw schemas::InputError(directory.string(), "",
                              fmt::format("cannot write: {}", std::strerror(error)));
  }
}

CheckpointDirectoryLock::~CheckpointDirectoryLock() {
  if (descriptor_ >= 0) ::close(descriptor_);  // closing the descriptor releases the flock
}

std::shared_ptr<CheckpointDirectoryLock> hold_checkpoint_directory(
    const std::filesystem::path& directory) {
  static std::mutex guard;
  static std::map<std::string, std::weak_ptr<CheckpointDirectoryLock>> held;
  const std::string key = std::filesystem::weakly_canonical(directory).string();
  const std::lock_guard<std::mutex> lock(guard);
  if (std::shared_ptr<CheckpointDirectoryLock> existing = held[key].lock()) return existing;
  auto taken = std::make_shared<CheckpointDirectoryLock>(directory);
  held[key] = taken;
  return taken;
}

}  // namespace strata::executor
