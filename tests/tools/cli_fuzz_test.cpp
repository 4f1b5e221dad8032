// The command line's contract under fuzzing: every fixture and preset, mutated (keys deleted or
// duplicated, types swapped, extreme numbers, truncated, bytes flipped), is fed to validate,
// describe, simulate, report (plans and plan sets), plan (clusters, and phases files with
// --phases) and validate-sim; checkpoints (one rank's and a ZeRO-1 dp 2 layout's) with a mutated
// state.json — half of them re-signed with a valid CRC-32, so that the forged values reach the
// range and layout checks behind it — to train --resume, sample and reshard; every output flag
// pointed at each kind of path (new, a regular file, a symbolic link, a dangling one, a FIFO, a
// directory, a path under a missing directory), after which every planted node must still be what
// it was and the file a link points to unchanged; and random flag combinations to every
// subcommand. Each case must end with exit 0, 1
// or 2 — no crash, sanitizer report, hang or internal error —, a failure must be exactly one
// `strata:` line on stderr (success: nothing there), and a success prints no inf or NaN (every
// prediction finite).
//
// Cases run `strata`'s run_cli in forked children (no exec: thousands fit in a minute), seeded
// (STRATA_FUZZ_SEED) and bounded by a case count and a time budget (STRATA_FUZZ_SECONDS); the
// test prints how many it ran. A failing case prints its arguments and its mutated file.
#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "cli.h"
#include "json_mutator.h"
#include "strata/executor/checkpoint/checkpoint_state_check.h"
#include "strata/schemas/presets.h"
#include "strata_command.h"

namespace strata::tools {
namespace {

namespace fs = std::filesystem;

constexpr int kMaxCases = 4000;
constexpr double kDefaultSeconds = 100;
constexpr unsigned kCaseSeconds = 30;  // one case's limit: a case past it is unbounded work

struct Outcome {
  bool exited = false;
  int code = 0;  // exit status, or the signal that ended the child
  std::string out, err;
};

// Runs run_cli(arguments) in a child whose working directory is `directory`.
Outcome run_strata(const std::vector<std::string>& arguments, const fs::path& directory) {
  int out_pipe[2], err_pipe[2];
  if (::pipe(out_pipe) != 0 || ::pipe(err_pipe) != 0) std::abort();
  std::fflush(nullptr);
  std::cout.flush();
  const pid_t child = ::fork();
  if (child == 0) {
    ::dup2(out_pipe[1], STDOUT_FILENO);
    ::dup2(err_pipe[1], STDERR_FILENO);
    for (int descriptor : {out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1]}) ::close(descriptor);
    const int input = ::open("/dev/null", O_RDONLY);
    ::dup2(input, STDIN_FILENO);
    if (::chdir(directory.c_str()) != 0) ::_exit(97);
    ::alarm(kCaseSeconds);
    std::vector<std::string> words = {"strata"};
    words.insert(words.end(), arguments.begin(), arguments.end());
    std::vector<char*> argv;
    for (std::string& word : words) argv.push_back(word.data());
    argv.push_back(nullptr);
    const int code = run_cli(static_cast<int>(words.size()), argv.data());
    std::cout.flush();
    std::fflush(nullptr);
    ::_exit(code);
  }
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  Outcome outcome;
  pollfd descriptors[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  std::string* sinks[2] = {&outcome.out, &outcome.err};
  int open_pipes = 2;
  char buffer[65536];
  while (open_pipes > 0) {
    if (::poll(descriptors, 2, -1) < 0) break;
    for (int i = 0; i < 2; ++i) {
      if (descriptors[i].fd < 0 || !(descriptors[i].revents & (POLLIN | POLLHUP))) continue;
      const ssize_t got = ::read(descriptors[i].fd, buffer, sizeof(buffer));
      if (got > 0) {
        // Keep enough of the output to judge it; a big table need not be held whole.
        if (sinks[i]->size() < (1u << 20)) sinks[i]->append(buffer, static_cast<std::size_t>(got));
      } else {
        ::close(descriptors[i].fd);
        descriptors[i].fd = -1;
        --open_pipes;
      }
    }
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  outcome.exited = WIFEXITED(status);
  outcome.code = outcome.exited ? WEXITSTATUS(status) : WTERMSIG(status);
  return outcome;
}

// What a case broke, or empty when it kept the contract.
std::string contract_breach(const Outcome& outcome) {
  if (!outcome.exited) {
    return outcome.code == SIGALRM ? fmt::format("ran past {} s", kCaseSeconds)
                                   : fmt::format("ended by signal {}", outcome.code);
  }
  if (outcome.code > 2) return fmt::format("exit {}", outcome.code);
  if (outcome.code == 0) {
    if (!outcome.err.empty()) return "exit 0 with something on stderr";
    // A prediction is a number: a cluster file the readers accepted never makes one inf or NaN.
    static const std::regex kNotFinite("(^|[^A-Za-z_])[-+]?(inf|nan)([^A-Za-z_]|$)",
                                       std::regex::icase);
    if (std::regex_search(outcome.out, kNotFinite)) return "inf or NaN in the output";
    return "";
  }
  const std::size_t newline = outcome.err.find('\n');
  if (outcome.err.rfind("strata: ", 0) != 0 || newline + 1 != outcome.err.size()) {
    return "not one `strata:` line on stderr";
  }
  if (outcome.err.find("internal error") != std::string::npos) return "an internal error";
  return "";
}

using strata::testing::Mutator;

struct Document {
  std::string name;  // the file name it is written as
  nlohmann::json content;
  std::string kind;  // model, cluster, plan, hf_config, row
};

std::vector<Document> seed_documents() {
  std::vector<Document> documents;
  const fs::path fixtures = STRATA_FIXTURES_DIR;
  for (const char* kind : {"model", "cluster", "plan"}) {
    for (const fs::directory_entry& entry : fs::directory_iterator(fixtures / kind / "valid")) {
      if (entry.path().extension() != ".json") continue;
      documents.push_back({entry.path().filename().string(),
                           nlohmann::json::parse(testing::slurp(entry.path())), kind});
    }
  }
  for (const fs::directory_entry& entry : fs::directory_iterator(fixtures / "hf")) {
    documents.push_back(
        {"config.json", nlohmann::json::parse(testing::slurp(entry.path())), "hf_config"});
  }
  for (std::string_view name : schemas::model_preset_names()) {
    documents.push_back({std::string(name) + ".json",
                         nlohmann::json::parse(schemas::model_preset_document(name)), "model"});
  }
  for (std::string_view name : schemas::cluster_preset_names()) {
    documents.push_back({std::string(name) + ".json",
                         nlohmann::json::parse(schemas::cluster_preset_document(name)), "cluster"});
  }
  for (const char* kind : {"plan_set", "phases"}) {
    for (const fs::directory_entry& entry : fs::directory_iterator(fixtures / kind / "valid")) {
      if (entry.path().extension() != ".json") continue;
      documents.push_back({entry.path().filename().string(),
                           nlohmann::json::parse(testing::slurp(entry.path())), kind});
    }
  }
  std::istringstream rows(testing::slurp(fixtures / "validation/published_runs.jsonl"));
  for (std::string line; std::getline(rows, line);) {
    if (!line.empty()) documents.push_back({"runs.jsonl", nlohmann::json::parse(line), "row"});
  }
  return documents;
}

// The commands that read a document of `kind` at `file`.
std::vector<std::vector<std::string>> commands_for(const std::string& kind,
                                                   const std::string& file) {
  if (kind == "row") return {{"validate-sim", file}};
  std::vector<std::vector<std::string>> commands = {{"validate", file}};
  if (kind == "model" || kind == "hf_config") {
    commands.push_back({"describe", "--model", file, "--seq-len", "2048"});
  }
  if (kind == "cluster") {
    // What a cluster feeds: the cost models (describe), the simulator and the planner's ranking.
    commands.push_back({"describe", "--model", "gpt2-124m", "--cluster", file});
    commands.push_back({"plan", "--model", "gpt-tiny", "--cluster", file, "--global-batch", "8",
                        "--top", "3", "--quiet"});
  }
  if (kind == "plan" || kind == "plan_set") {
    commands.push_back({"simulate", "--plan", file});
    commands.push_back({"report", "--plan", file, "--out", "report.html"});
  }
  if (kind == "phases") {
    // A small model on two CPU ranks keeps each phase's search short.
    commands.push_back({"plan", "--model", "gpt-tiny", "--cluster", "cpu-local:2", "--quiet",
                        "--phases", file, "--out", "phases-set.json"});
  }
  return commands;
}

// A random command line of known flags with values good, bad and extreme.
std::vector<std::string> random_flags(Mutator& random, const std::string& data_file) {
  static const std::vector<std::string> kNumbers = {"1",
                                                    "2",
                                                    "8",
                                                    "0",
                                                    "-1",
                                                    "nan",
                                                    "inf",
                                                    "-inf",
                                                    "1e309",
                                                    "abc",
                                                    "",
                                                    "1.5",
                                                    "0.9",
                                                    "4096",
                                                    "16777216",
                                                    "16777217",
                                                    "9223372036854775808",
                                                    std::string(200, '7'),
                                                    "1e3",
                                                    "+3"};
  static const std::vector<std::string> kModels = {
      "gpt-tiny", "gpt2-124m", "llama-tiny", "llama3.1-8b", "gpt3-175b", "nope", ""};
  static const std::vector<std::string> kClusters = {
      "dgx-h100", "dgx-h100:1", "dgx-a100-80gb:2", "cpu-local", "dgx-h100:0", "dgx-h100:x", ""};
  const auto number = [&] { return random.choose(kNumbers); };
  switch (random.pick(6)) {
    case 0: {  // simulate from knobs: cheap, every knob
      std::vector<std::string> args = {"simulate",
                                       "--model",
                                       random.choose(kModels),
                                       "--cluster",
                                       random.choose(kClusters),
                                       "--global-batch",
                                       number()};
      for (const char* flag :
           {"--tp", "--pp", "--cp", "--dp", "--vpp", "--micro-batch", "--seq-len", "--zero"}) {
        if (random.pick(3) == 0) args.insert(args.end(), {flag, number()});
      }
      if (random.pick(3) == 0) {
        args.insert(args.end(),
                    {"--schedule", random.choose(std::vector<std::string>{
                                       "1f1b", "gpipe", "zb-h1", "interleaved-1f1b", "x"})});
      }
      if (random.pick(4) == 0) args.push_back("--sequence-parallel");
      if (random.pick(4) == 0) args.insert(args.end(), {"--format", "json"});
      return args;
    }
    case 1: {  // plan: small models and clusters keep the search short
      std::vector<std::string> args = {
          "plan",
          "--quiet",
          "--model",
          random.choose(std::vector<std::string>{"gpt-tiny", "gpt2-124m", "x"}),
          "--cluster",
          random.choose(std::vector<std::string>{"dgx-h100:1", "cpu-local", "dgx-a100-40gb"})};
      for (const char* flag :
           {"--global-batch", "--seq-len", "--top", "--memory-reserve", "--max-tp"}) {
        if (random.pick(2) == 0) args.insert(args.end(), {flag, number()});
      }
      return args;
    }
    case 2: {  // describe
      std::vector<std::string> args = {"describe", "--model", random.choose(kModels)};
      if (random.pick(2) == 0) args.insert(args.end(), {"--seq-len", number()});
      if (random.pick(2) == 0) args.insert(args.end(), {"--cluster", random.choose(kClusters)});
      if (random.pick(3) == 0)
        args.insert(args.end(), {"--precision",
                                 random.choose(std::vector<std::string>{"fp8", "bf16", "int4"})});
      return args;
    }
    case 3: {  // train: the micro model, a few steps at most
      std::vector<std::string> args = {
          "train",
          "--model",
          STRATA_FIXTURES_DIR "/executor/gpt-micro.json",
          "--data",
          data_file,
          "--steps",
          random.choose(std::vector<std::string>{"1", "2", "0", "-1", "nan"})};
      for (const char* flag :
           {"--micro-batch", "--global-batch", "--seq-len", "--seed", "--lr", "--min-lr-fraction",
            "--warmup-steps", "--weight-decay", "--grad-clip", "--checkpoint-every"}) {
        if (random.pick(4) == 0) args.insert(args.end(), {flag, number()});
      }
      if (random.pick(3) == 0) args.insert(args.end(), {"--checkpoint-dir", "ckpt"});
      if (random.pick(4) == 0) args.push_back("--resume");
      return args;
    }
    case 4:  // presets and unknown words
      return {random.choose(
                  std::vector<std::string>{"presets", "presets", "plna", "--version", "-x", ""}),
              random.choose(std::vector<std::string>{"--show", "--format", "json", "x"}),
              random.choose(kModels)};
    default: {  // schedule of a fixture plan, with a rank
      return {"schedule", "--plan", STRATA_FIXTURES_DIR "/plan/valid/gpt2-cpu-tp2-pp2.json",
              "--rank", number()};
    }
  }
}

// The checkpoints a checkpoint case starts from: DIR/step_00000001 of a one-rank run and of its
// ZeRO-1 dp 2 reshard, each as written.
struct CheckpointSeeds {
  std::vector<fs::path> steps;
  fs::path dp2_plan;
};

// A copy of a seed checkpoint at `directory`/ckpt-fuzz/step_00000001 whose state.json is mutated
// (re-signed half the time); the mutated text is returned for the failure report.
std::string mutated_checkpoint(Mutator& random, const CheckpointSeeds& seeds,
                               const fs::path& directory) {
  const fs::path seed = random.choose(seeds.steps);
  const fs::path copy = directory / "ckpt-fuzz" / "step_00000001";
  fs::remove_all(directory / "ckpt-fuzz");
  fs::remove_all(directory / "reshard-out");
  fs::create_directories(copy.parent_path());
  fs::copy(seed, copy, fs::copy_options::recursive);
  std::string text = random.mutate(nlohmann::json::parse(testing::slurp(seed / "state.json")));
  if (random.pick(2) == 0) {
    // A forger who recomputes the checksum: what is behind it must still hold.
    nlohmann::json state = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (state.is_object()) {
      state[executor::kCheckpointStateChecksumKey] = executor::checkpoint_state_checksum(state);
      text = state.dump(2);
    }
  }
  std::ofstream(copy / "state.json") << text;
  return text;
}

std::vector<std::vector<std::string>> checkpoint_commands(const CheckpointSeeds& seeds) {
  return {{"train", "--model", STRATA_FIXTURES_DIR "/executor/gpt-micro.json", "--data",
           "tokens.bin", "--steps", "2", "--checkpoint-dir", "ckpt-fuzz", "--resume"},
          {"sample", "--checkpoint", "ckpt-fuzz/step_00000001", "--prompt-tokens", "1,2",
           "--tokens", "2"},
          {"reshard", "--from", "ckpt-fuzz/step_00000001", "--to-plan", seeds.dp2_plan.string(),
           "--out", "reshard-out"}};
}

// Trains the micro model one step into seeds/one, writes its dp 2 ZeRO-1 plan and reshards the
// checkpoint for it into seeds/dp2.
CheckpointSeeds make_checkpoint_seeds(const fs::path& directory) {
  const std::string micro = STRATA_FIXTURES_DIR "/executor/gpt-micro.json";
  const Outcome trained = run_strata(
      {"train", "--model", micro, "--data", "tokens.bin", "--steps", "1", "--micro-batch", "2",
       "--global-batch", "4", "--checkpoint-every", "1", "--checkpoint-dir", "seeds/one"},
      directory);
  EXPECT_EQ(trained.code, 0) << trained.err;
  // One process writes the plan --write-plan asks for before it refuses to run two ranks' plan.
  const Outcome planned =
      run_strata({"train", "--model", micro, "--data", "tokens.bin", "--steps", "1",
                  "--micro-batch", "2", "--global-batch", "4", "--dp", "2", "--zero", "1",
                  "--bucket-size", "1000", "--write-plan", "dp2.json"},
                 directory);
  EXPECT_TRUE(fs::exists(directory / "dp2.json")) << planned.err;
  const Outcome resharded = run_strata({"reshard", "--from", "seeds/one/step_00000001", "--to-plan",
                                        "dp2.json", "--out", "seeds/dp2"},
                                       directory);
  EXPECT_EQ(resharded.code, 0) << resharded.err;
  return {{directory / "seeds/one/step_00000001", directory / "seeds/dp2/step_00000001"},
          directory / "dp2.json"};
}

// Output paths of every kind, planted once in the case directory: each case's command writes to
// one of them, and afterwards each must still be what it was.
const std::vector<std::string> kOutputPaths = {
    "out-new.json",  "out-regular.json", "out-link.json",       "out-dangling.json",
    "out-fifo.json", "out-dir",          "missing-dir/out.json"};
constexpr const char* kLinkTarget = "link-target.txt";
constexpr const char* kLinkTargetText = "not to be replaced\n";

void plant_output_paths(const fs::path& directory) {
  std::ofstream(directory / kLinkTarget) << kLinkTargetText;
  std::ofstream(directory / "out-regular.json") << "{}\n";
  fs::create_symlink(kLinkTarget, directory / "out-link.json");
  fs::create_symlink("nowhere/out.json", directory / "out-dangling.json");
  ASSERT_EQ(::mkfifo((directory / "out-fifo.json").c_str(), 0644), 0);
  fs::create_directories(directory / "out-dir");
}

// What a case did to the planted paths (empty: nothing it should not have).
std::string planted_paths_breach(const fs::path& directory) {
  if (testing::slurp(directory / kLinkTarget) != kLinkTargetText) return "a link's target changed";
  if (!fs::is_symlink(directory / "out-link.json")) return "out-link.json is no longer a link";
  if (!fs::is_symlink(directory / "out-dangling.json")) return "out-dangling.json was replaced";
  if (fs::exists(directory / "nowhere")) return "a dangling link's target was created";
  if (!fs::is_fifo(directory / "out-fifo.json")) return "out-fifo.json is no longer a FIFO";
  if (!fs::is_directory(directory / "out-dir")) return "out-dir is no longer a directory";
  return "";
}

// A command writing one of its outputs to a random kind of path.
std::vector<std::string> output_path_command(Mutator& random) {
  const std::string out = random.choose(kOutputPaths);
  const std::string plan = STRATA_FIXTURES_DIR "/plan/valid/gpt2-cpu-tp2-pp2.json";
  switch (random.pick(5)) {
    case 0:
      return {"plan", "--model", "gpt-tiny", "--cluster", "cpu-local:2", "--global-batch",
              "8",    "--top",   "2",        "--quiet",   "--out",       out};
    case 1:
      return {"plan", "--model", "gpt-tiny", "--cluster", "cpu-local:2", "--global-batch",
              "8",    "--top",   "2",        "--quiet",   "--report",    out};
    case 2:
      return {"report", "--plan", plan, "--out", out};
    case 3:
      return {"train",   "--model", "gpt-tiny",     "--data", "tokens.bin",
              "--steps", "0",       "--write-plan", out};
    default:
      return {"train",
              "--model",
              STRATA_FIXTURES_DIR "/executor/gpt-micro.json",
              "--data",
              "tokens.bin",
              "--steps",
              "1",
              "--micro-batch",
              "2",
              "--global-batch",
              "2",
              random.pick(2) == 0 ? "--save-llmc" : "--trace",
              out};
  }
}

std::string joined(const std::vector<std::string>& words) {
  std::string line;
  for (const std::string& word : words) line += (line.empty() ? "" : " ") + word.substr(0, 80);
  return line;
}

TEST(CliFuzz, EveryCaseExitsZeroOneOrTwoWithOneLineOnFailure) {
  const char* seed_text = std::getenv("STRATA_FUZZ_SEED");
  const char* seconds_text = std::getenv("STRATA_FUZZ_SECONDS");
  const std::uint64_t seed = seed_text ? std::strtoull(seed_text, nullptr, 10) : 20261123;
  const double budget_s = seconds_text ? std::strtod(seconds_text, nullptr) : kDefaultSeconds;
  const fs::path directory =
      fs::path(::testing::TempDir()) / ("cli-fuzz-" + std::to_string(::getpid()));
  fs::remove_all(directory);
  fs::create_directories(directory);
  // The custom-schedule plan fixture reads its CSV beside it.
  fs::copy_file(fs::path(STRATA_FIXTURES_DIR) / "plan/valid/llama8b-schedule.csv",
                directory / "llama8b-schedule.csv");
  {
    std::ofstream text(directory / "text.txt");
    for (int i = 0; i < 400; ++i) text << "the plan runs on every rank and the step is predicted ";
  }
  ASSERT_EQ(run_strata({"data", "--text", "text.txt", "--out", "tokens.bin"}, directory).code, 0);

  const CheckpointSeeds checkpoints = make_checkpoint_seeds(directory);
  plant_output_paths(directory);
  if (::testing::Test::HasFailure()) return;

  Mutator mutator(seed);
  const std::vector<Document> documents = seed_documents();
  const auto started = std::chrono::steady_clock::now();
  const auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  };
  int cases = 0, failures = 0;
  while (cases < kMaxCases && elapsed() < budget_s) {
    std::vector<std::vector<std::string>> commands;
    std::string mutated;
    const std::size_t kind = mutator.pick(9);
    if (kind == 8) {
      commands = {output_path_command(mutator)};
    } else if (kind >= 3) {
      const Document& document = mutator.choose(documents);
      mutated = mutator.mutate(document.content);
      std::ofstream(directory / document.name) << mutated << (document.kind == "row" ? "\n" : "");
      commands = commands_for(document.kind, document.name);
    } else if (kind == 2) {
      mutated = mutated_checkpoint(mutator, checkpoints, directory);
      commands = checkpoint_commands(checkpoints);
    } else {
      commands = {random_flags(mutator, "tokens.bin")};
    }
    for (const std::vector<std::string>& command : commands) {
      ++cases;
      const Outcome outcome = run_strata(command, directory);
      std::string breach = contract_breach(outcome);
      if (breach.empty()) breach = planted_paths_breach(directory);
      if (breach.empty()) continue;
      if (++failures <= 10) {
        ADD_FAILURE() << "strata " << joined(command) << ": " << breach
                      << "\nstderr: " << outcome.err.substr(0, 2000)
                      << (mutated.empty() ? "" : "\nfile: " + mutated.substr(0, 4000));
      }
    }
  }
  std::printf("fuzz: %d cases in %.1f s (seed %llu), %d broke the contract\n", cases, elapsed(),
              static_cast<unsigned long long>(seed), failures);
  EXPECT_GT(cases, 100);
  fs::remove_all(directory);
}

}  // namespace
}  // namespace strata::tools
