#include "strata/schemas/json_file.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

#include "input_error_message.h"
#include "strata/schemas/input_error.h"

namespace strata::schemas {
namespace {

using ::testing::HasSubstr;

std::string error_of(std::string_view text) {
  return strata::testing::input_error_message([&] { parse_json_text(text, "f.json"); });
}

TEST(ParseJsonText, ReportsLineAndColumnOfSyntaxErrors) {
  EXPECT_EQ(error_of("{\n  \"a\": 1,\n  \"b\": ]\n}"),
            "f.json: line 3, column 8: invalid JSON: syntax error while parsing value - unexpected "
            "']'; expected '[', '{', or a literal");
  EXPECT_THAT(error_of(""), HasSubstr("f.json: line 1, column 1: invalid JSON"));
}

TEST(ParseJsonText, RefusesDuplicateKeysWithTheirPath) {
  EXPECT_EQ(error_of(R"({"a": {"b": [1, {"c": 1, "c": 2}]}})"),
            "f.json: /a/b/1/c: duplicate key; each key may appear once in an object");
  EXPECT_EQ(error_of(R"([{"x": 1}, {"x": 1}, {"y": [], "y": 0}])"),
            "f.json: /2/y: duplicate key; each key may appear once in an object");
  EXPECT_EQ(error_of(R"({"a/b": {"~": 1, "~": 2}})"),
            "f.json: /a~1b/~0: duplicate key; each key may appear once in an object");
}

TEST(ParseJsonText, SameKeyInSiblingObjectsIsFine) {
  EXPECT_EQ(parse_json_text(R"([{"x": 1}, {"x": 2}])", "f.json")[1]["x"], 2);
}

TEST(ReadJsonFile, NamesAMissingFile) {
  try {
    read_json_file("/nonexistent/plan.json");
    FAIL() << "expected an InputError";
  } catch (const InputError& error) {
    EXPECT_EQ(std::string(error.what()),
              "/nonexistent/plan.json: cannot open: No such file or directory");
  }
}

TEST(WriteFileAtomically, ReplacesTheFileAndLeavesNoTemporary) {
  const std::filesystem::path directory =
      std::filesystem::path(::testing::TempDir()) / ("atomic_write-" + std::to_string(::getpid()));
  std::filesystem::remove_all(directory);
  std::filesystem::create_directories(directory);
  const std::filesystem::path path = directory / "plan.json";
  write_file_atomically(path, "first");
  write_file_atomically(path, "second\n");
  std::ifstream file(path);
  std::string contents((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  EXPECT_EQ(contents, "second\n");
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(directory), {}), 1);
}

TEST(WriteFileAtomically, FailsWithTheReasonAndWritesNothing) {
  try {
    write_file_atomically("/nonexistent-dir/plan.json", "x");
    FAIL() << "expected an InputError";
  } catch (const InputError& error) {
    EXPECT_EQ(std::string(error.what()),
              "/nonexistent-dir/plan.json: cannot write: No such file or directory");
  }
}

// A link planted at the temporary's name (its pid is guessable) would make the write land in the
// link's target; the writer removes whatever holds the name and creates its own file.
TEST(WriteFileAtomically, APlantedLinkAtTheTemporaryNameIsNotFollowed) {
  namespace fs = std::filesystem;
  const fs::path directory =
      fs::path(::testing::TempDir()) / ("atomic_link-" + std::to_string(::getpid()));
  fs::remove_all(directory);
  fs::create_directories(directory);
  const fs::path victim = directory / "victim.txt";
  std::ofstream(victim) << "precious\n";
  const fs::path path = directory / "plan.json";
  fs::create_symlink(victim, path.string() + ".tmp." + std::to_string(::getpid()));
  write_file_atomically(path, "written\n");
  std::ifstream written(path), kept(victim);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(written), {}), "written\n");
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(kept), {}), "precious\n");
  EXPECT_FALSE(fs::is_symlink(path));
}

// A path that exists and is not a regular file is refused by kind, and left as it was (a device
// itself is not tried here: a broken check would replace the system's node as root).
TEST(WriteFileAtomically, OutputsThatAreNotRegularFilesAreRefusedByKind) {
  namespace fs = std::filesystem;
  const fs::path directory =
      fs::path(::testing::TempDir()) / ("atomic_kinds-" + std::to_string(::getpid()));
  fs::remove_all(directory);
  fs::create_directories(directory / "a-directory");
  fs::create_symlink("/dev/null", directory / "link");
  const auto refusal = [](const fs::path& path) {
    return strata::testing::input_error_message([&] { write_file_atomically(path, "x"); });
  };
  EXPECT_EQ(refusal(directory / "link"),
            (directory / "link").string() +
                ": is a symbolic link: strata writes regular files only (a new file is renamed "
                "over the path), so name a regular file or a new one");
  EXPECT_THAT(refusal(directory / "a-directory"), HasSubstr(": is a directory: "));
  EXPECT_TRUE(fs::is_symlink(directory / "link"));
  EXPECT_EQ(std::distance(fs::directory_iterator(directory), {}), 2) << "no temporary left";
}

}  // namespace
}  // namespace strata::schemas
