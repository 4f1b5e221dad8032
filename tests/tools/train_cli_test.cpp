// `strata data` and `strata train` as users run them: logs, plans, checkpoints, llm.c files and
// one-line errors.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <unistd.h>

#include <array>
#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "strata_command.h"

namespace strata::tools {
namespace {

using strata::testing::CommandResult;
using strata::testing::lines;
using strata::testing::slurp;
using strata::testing::strata;
using ::testing::HasSubstr;
using ::testing::StartsWith;
namespace fs = std::filesystem;

const std::string kMicroModel = std::string(STRATA_FIXTURES_DIR) + "/executor/gpt-micro.json";
const std::string kText = "/usr/share/common-licenses/GPL-3";

struct TrainCli : ::testing::Test {
  void SetUp() override {
    if (!fs::exists(kText)) GTEST_SKIP() << kText << " is not installed";
    directory = fs::path(::testing::TempDir()) /
                ("train-cli-" + std::to_string(::getpid()) + "-" +
                 ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(directory);
    fs::create_directories(directory);
    tokens = (directory / "gpl.bin").string();
    const CommandResult data = strata("data --text " + kText + " --out " + tokens);
    ASSERT_EQ(data.exit_code, 0) << data.err;
    EXPECT_THAT(data.out, HasSubstr("wrote 35149 tokens (byte-level, vocabulary 256)"));
  }
  std::string small_run(const std::string& extra) const {
    return "train --model " + kMicroModel + " --data " + tokens +
           " --micro-batch 2 --global-batch 4 --seq-len 32 " + extra;
  }
  fs::path directory;
  std::string tokens;
};

TEST_F(TrainCli, JsonLogsOneObjectPerStepThenASummaryAndWritesThePlan) {
  const std::string plan = (directory / "plan.json").string();
  const CommandResult run = strata(small_run("--steps 3 --log-format json --write-plan " + plan));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(lines(run.out), 4u);
  std::istringstream stream(run.out);
  std::string line;
  for (int step = 1; step <= 3; ++step) {
    std::getline(stream, line);
    const nlohmann::json record = nlohmann::json::parse(line);
    EXPECT_EQ(record.at("step"), step);
    for (const char* key :
         {"loss", "learning_rate", "gradient_norm", "tokens_per_s", "step_time_s"}) {
      EXPECT_TRUE(record.at(key).is_number()) << key;
    }
  }
  std::getline(stream, line);
  EXPECT_EQ(nlohmann::json::parse(line).at("steps_run"), 3);
  // The plan it wrote is a valid 1×1×1 fp32 plan that trains the same way.
  EXPECT_EQ(strata("validate " + plan).exit_code, 0);
  const nlohmann::json written = nlohmann::json::parse(slurp(plan));
  EXPECT_EQ(written.at("precision"), "fp32");
  EXPECT_EQ(written.at("batch").at("num_micro_batches"), 2);
  const CommandResult from_plan =
      strata("train --plan " + plan + " --data " + tokens + " --steps 3");
  ASSERT_EQ(from_plan.exit_code, 0) << from_plan.err;
  EXPECT_THAT(from_plan.out, HasSubstr("step 1/3 | loss "));
  EXPECT_THAT(from_plan.out, HasSubstr("trained steps 1..3 in "));
  // Same plan, same seed: the same first loss as the run that wrote the plan.
  const double first_loss =
      nlohmann::json::parse(run.out.substr(0, run.out.find('\n'))).at("loss").get<double>();
  char expected[64];
  std::snprintf(expected, sizeof(expected), "step 1/3 | loss %.4f |", first_loss);
  EXPECT_THAT(from_plan.out, HasSubstr(expected));
}

TEST_F(TrainCli, OptimizerSettingsAreFlagsWithTheirDefaultsShownAndLogged) {
  const CommandResult help = strata("train --help");
  ASSERT_EQ(help.exit_code, 0) << help.err;
  for (const char* shown : {"--beta1", "--beta2", "--eps", "--lr-schedule", "=0.95", "=cosine",
                            "=0.0003", "=0.1", "=1e-08", "=100", "=4"}) {
    EXPECT_THAT(help.out, HasSubstr(shown));
  }
  const auto summary_of = [&](const std::string& flags) {
    const CommandResult run = strata(small_run("--steps 3 --log-format json " + flags));
    EXPECT_EQ(run.exit_code, 0) << run.err;
    const std::string last = run.out.substr(run.out.rfind('\n', run.out.size() - 2) + 1);
    return nlohmann::json::parse(last);
  };
  const nlohmann::json defaults = summary_of("");
  EXPECT_EQ(defaults.at("optimizer").at("beta2"), 0.95);
  EXPECT_EQ(defaults.at("optimizer").at("lr_schedule"), "cosine");
  // llm.c's settings: constant rate, β2 0.999, no weight decay, no clipping.
  const nlohmann::json llmc =
      summary_of("--lr-schedule constant --beta2 0.999 --weight-decay 0 --grad-clip 0 --eps 1e-8");
  EXPECT_EQ(llmc.at("optimizer").at("beta2"), 0.999);
  EXPECT_EQ(llmc.at("optimizer").at("lr_schedule"), "constant");
  EXPECT_NE(llmc.at("final_loss"), defaults.at("final_loss"));
  const CommandResult bad = strata(small_run("--steps 1 --beta2 1"));
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_EQ(bad.err, "strata: --beta2: 1 must be below 1\n");
}

TEST_F(TrainCli, ZeroStepsWritesTheInitialModelAndLaterRunsStartFromIt) {
  const fs::path checkpoints = directory / "ckpt";
  const std::string llmc = (directory / "initial.llmc").string();
  const CommandResult initial = strata(small_run("--steps 0 --log-format json --save-llmc " + llmc +
                                                 " --checkpoint-dir " + checkpoints.string()));
  ASSERT_EQ(initial.exit_code, 0) << initial.err;
  EXPECT_EQ(initial.err, "");
  const nlohmann::json summary = nlohmann::json::parse(initial.out);
  EXPECT_EQ(summary.at("steps_run"), 0);
  EXPECT_TRUE(summary.at("final_loss").is_null());
  EXPECT_TRUE(fs::exists(checkpoints / "step_00000000" / "state.json"));
  EXPECT_TRUE(fs::exists(llmc));
  // Training on from the step-0 checkpoint, from the llm.c file, or from scratch: the same run.
  const auto losses_of = [&](const std::string& flags) {
    const CommandResult run = strata(small_run("--steps 2 --log-format json " + flags));
    EXPECT_EQ(run.exit_code, 0) << run.err;
    std::vector<double> losses;
    std::istringstream stream(run.out);
    for (std::string line; std::getline(stream, line);) {
      const nlohmann::json record = nlohmann::json::parse(line);
      if (record.contains("loss")) losses.push_back(record.at("loss").get<double>());
      if (record.contains("summary")) {
        EXPECT_EQ(record.at("first_step"), 1);  // numbered as the step records
        EXPECT_EQ(record.at("last_step"), 2);
      }
    }
    return losses;
  };
  const std::vector<double> scratch = losses_of("");
  EXPECT_EQ(losses_of("--resume --checkpoint-dir " + checkpoints.string()), scratch);
  EXPECT_EQ(losses_of("--init-llmc " + llmc), scratch);
}

TEST_F(TrainCli, ValidatesOnHeldOutTextAndSamplesFromTheCheckpoint) {
  const std::string validation = (directory / "apache.bin").string();
  ASSERT_EQ(
      strata("data --text /usr/share/common-licenses/Apache-2.0 --out " + validation).exit_code, 0);
  const fs::path checkpoints = directory / "ckpt";
  const std::string flags = "--steps 4 --eval-every 2 --eval-batches 2 --val-data " + validation +
                            " --checkpoint-dir " + checkpoints.string();
  const CommandResult run = strata(small_run(flags + " --log-format json"));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.err, "");
  std::vector<std::int64_t> evaluated;
  std::vector<double> validation_losses;
  std::istringstream stream(run.out);
  for (std::string line; std::getline(stream, line);) {
    const nlohmann::json record = nlohmann::json::parse(line);
    if (record.contains("eval_step")) {
      evaluated.push_back(record.at("eval_step").get<std::int64_t>());
      validation_losses.push_back(record.at("validation_loss").get<double>());
      EXPECT_EQ(record.at("eval_batches"), 2);
    }
    if (record.contains("summary")) {
      EXPECT_EQ(record.at("final_validation_loss").get<double>(), validation_losses.back());
    }
  }
  EXPECT_EQ(evaluated, (std::vector<std::int64_t>{0, 2, 4}));
  // Text logs say it in the step lines' format; a run does not change what it validates on.
  const CommandResult text =
      strata(small_run("--steps 2 --eval-batches 2 --val-data " + validation));
  ASSERT_EQ(text.exit_code, 0) << text.err;
  char first[64];
  std::snprintf(first, sizeof(first), "step 0/2 | val loss %.4f | 2 batches in ",
                validation_losses[0]);
  EXPECT_THAT(text.out, HasSubstr(first));
  EXPECT_THAT(text.out, HasSubstr("step 2/2 | val loss "));

  // Sampling from the checkpoint directory (its newest checkpoint): deterministic for a seed.
  const std::string sample =
      "sample --checkpoint " + checkpoints.string() + " --prompt 'The ' --tokens 24 --seed 3";
  const CommandResult once = strata(sample);
  ASSERT_EQ(once.exit_code, 0) << once.err;
  EXPECT_EQ(once.err, "");
  EXPECT_THAT(once.out, StartsWith("The "));
  EXPECT_EQ(strata(sample).out, once.out);
  const CommandResult json = strata(sample + " --log-format json");
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const nlohmann::json drawn = nlohmann::json::parse(json.out);
  EXPECT_EQ(drawn.at("tokens").size(), 24u);
  EXPECT_EQ(drawn.at("prompt_tokens"), (std::vector<int>{'T', 'h', 'e', ' '}));
  EXPECT_NE(strata("sample --checkpoint " + checkpoints.string() +
                   " --prompt 'The ' --tokens 24 --seed 4 --log-format json")
                .out,
            json.out);
  // Greedy decoding needs no seed.
  const std::string greedy = "sample --checkpoint " + (checkpoints / "step_00000004").string() +
                             " --prompt-tokens 84,104 --tokens 8 --temperature 0 --log-format json";
  EXPECT_EQ(nlohmann::json::parse(strata(greedy + " --seed 1").out).at("tokens"),
            nlohmann::json::parse(strata(greedy + " --seed 2").out).at("tokens"));

  // An llm.c tokenizer file (here: one piece per byte, version 2, end-of-text 10) decodes ids.
  const fs::path tokenizer = directory / "bytes_tokenizer.bin";
  {
    std::array<std::uint32_t, 256> header{};
    header[0] = 20240328;
    header[1] = 2;
    header[2] = 256;
    header[3] = 10;
    std::ofstream file(tokenizer, std::ios::binary);
    file.write(reinterpret_cast<const char*>(header.data()), sizeof(header));
    for (int byte = 0; byte < 256; ++byte) {
      const char piece[2] = {1, static_cast<char>(byte)};
      file.write(piece, 2);
    }
  }
  const CommandResult decoded =
      strata("sample --checkpoint " + checkpoints.string() + " --tokenizer " + tokenizer.string() +
             " --prompt-tokens 84,104,101 --tokens 5 --seed 3");
  ASSERT_EQ(decoded.exit_code, 0) << decoded.err;
  EXPECT_THAT(decoded.out, StartsWith("The"));
  // Without a prompt it starts at the tokenizer's end-of-text, as llm.c does.
  const CommandResult unconditional =
      strata("sample --checkpoint " + checkpoints.string() + " --tokenizer " + tokenizer.string() +
             " --tokens 3 --log-format json");
  ASSERT_EQ(unconditional.exit_code, 0) << unconditional.err;
  EXPECT_EQ(nlohmann::json::parse(unconditional.out).at("prompt_tokens"), (std::vector<int>{10}));

  // Bad input: one line naming what is wrong.
  const auto error_of = [&](const std::string& arguments) { return strata(arguments).err; };
  EXPECT_EQ(error_of(small_run("--steps 1 --eval-every 2")),
            "strata: --eval-every: needs --val-data FILE to evaluate on\n");
  EXPECT_EQ(error_of("sample --prompt x"),
            "strata: command line: give --checkpoint DIR or --init-llmc FILE\n");
  EXPECT_THAT(error_of("sample --checkpoint " + checkpoints.string() + " --tokenizer " +
                       tokenizer.string() + " --prompt x"),
              HasSubstr("--prompt: llm.c's tokenizer file only decodes"));
  EXPECT_EQ(error_of("sample --checkpoint " + checkpoints.string() + " --prompt-tokens 1,x"),
            "strata: --prompt-tokens: \"x\" is not a token id (give ids like 50256,464,3290)\n");
  EXPECT_EQ(error_of("sample --checkpoint " + directory.string() + " --prompt x"),
            "strata: " + directory.string() + ": holds no checkpoint\n");
  fs::resize_file(tokenizer, 1024 + 100);
  EXPECT_EQ(error_of("sample --checkpoint " + checkpoints.string() + " --tokenizer " +
                     tokenizer.string()),
            "strata: " + tokenizer.string() + ": token 50: the file ends before token 50 of 256\n");
}

TEST_F(TrainCli, SequentialOrderNamesEachStepsSamplesAndEpoch) {
  // Global batch 4 × 32 tokens: step k reads from token 128·k, sample b from 128·k + 32·b.
  const CommandResult run =
      strata(small_run("--steps 3 --data-order sequential --log-samples --log-format json"));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  std::istringstream stream(run.out);
  std::string line;
  for (std::int64_t step = 0; step < 3; ++step) {
    std::getline(stream, line);
    const nlohmann::json record = nlohmann::json::parse(line);
    EXPECT_EQ(record.at("epoch"), 0);
    EXPECT_EQ(record.at("samples"), (std::vector<std::int64_t>{128 * step, 128 * step + 32,
                                                               128 * step + 64, 128 * step + 96}));
  }
  const CommandResult text = strata(small_run("--steps 1 --data-order shuffled"));
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_THAT(text.out, HasSubstr("| epoch 0"));
}

TEST_F(TrainCli, CheckpointsResumeAndRefuseAnotherSeed) {
  const std::string checkpoints = (directory / "ckpt").string();
  const CommandResult first = strata(small_run("--steps 4 --checkpoint-every 2 --checkpoint-dir " +
                                               checkpoints + " --log-format json"));
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_TRUE(fs::exists(fs::path(checkpoints) / "step_00000002" / "state.json"));
  EXPECT_TRUE(fs::exists(fs::path(checkpoints) / "step_00000004" / "model.bin"));
  fs::remove_all(fs::path(checkpoints) / "step_00000004");
  const CommandResult resumed = strata(
      small_run("--steps 4 --resume --checkpoint-dir " + checkpoints + " --log-format json"));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  // Steps 3 and 4 log the same lines apart from timing.
  auto losses = [](const std::string& out) {
    std::vector<double> values;
    std::istringstream stream(out);
    for (std::string line; std::getline(stream, line);) {
      const nlohmann::json record = nlohmann::json::parse(line);
      if (record.contains("loss")) values.push_back(record.at("loss").get<double>());
    }
    return values;
  };
  const std::vector<double> all = losses(first.out);
  const std::vector<double> tail = losses(resumed.out);
  ASSERT_EQ(tail.size(), 2u);
  EXPECT_EQ(tail[0], all[2]);
  EXPECT_EQ(tail[1], all[3]);
  const CommandResult other_seed =
      strata(small_run("--steps 4 --resume --seed 5 --checkpoint-dir " + checkpoints));
  EXPECT_EQ(other_seed.exit_code, 1);
  EXPECT_EQ(other_seed.err,
            "strata: --seed: 5 differs from the checkpoint's seed 1234; a resumed "
            "run keeps its seed\n");
}

// A run owns its checkpoint directory: a new run into one holding another run's checkpoints is
// refused (a later --resume would continue, or declare finished, the other run), unless
// --overwrite-checkpoints removes them; a resumed run keeps the run id its checkpoints carry.
TEST_F(TrainCli, ANewRunDoesNotMixItsCheckpointsWithAnotherRuns) {
  const fs::path checkpoints = directory / "ckpt";
  const std::string flags = " --checkpoint-dir " + checkpoints.string();
  const auto run_id = [&](const char* step) {
    return nlohmann::json::parse(slurp(checkpoints / step / "state.json")).at("run_id");
  };
  ASSERT_EQ(strata(small_run("--steps 4 --checkpoint-every 2" + flags)).exit_code, 0);
  const nlohmann::json first_run = run_id("step_00000004");
  EXPECT_EQ(run_id("step_00000002"), first_run);
  EXPECT_EQ(first_run.get<std::string>().size(), 16u);

  const CommandResult again = strata(small_run("--steps 2" + flags));
  EXPECT_EQ(again.exit_code, 1);
  EXPECT_EQ(again.err, "strata: " + checkpoints.string() +
                           ": holds 2 checkpoint(s) of another run (steps 2 to 4): --resume "
                           "continues that run, --overwrite-checkpoints removes them for this "
                           "one\n");
  EXPECT_EQ(again.out, "");

  const CommandResult overwritten = strata(small_run("--steps 2 --overwrite-checkpoints" + flags));
  ASSERT_EQ(overwritten.exit_code, 0) << overwritten.err;
  EXPECT_FALSE(fs::exists(checkpoints / "step_00000004"));  // the other run's later step is gone
  const nlohmann::json second_run = run_id("step_00000002");
  EXPECT_NE(second_run, first_run);

  ASSERT_EQ(strata(small_run("--steps 3 --resume" + flags)).exit_code, 0);
  EXPECT_EQ(run_id("step_00000003"), second_run);
  EXPECT_EQ(strata(small_run("--steps 3 --resume --overwrite-checkpoints" + flags)).exit_code, 2);
}

// A second job on a directory another job holds is refused with the holder's host and pid; the
// test holds the lock as a job would (flock on DIR/.strata-lock).
TEST_F(TrainCli, ASecondJobOnALockedCheckpointDirectoryIsRefused) {
  const fs::path checkpoints = directory / "ckpt";
  fs::create_directories(checkpoints);
  const std::string lock = (checkpoints / ".strata-lock").string();
  const int descriptor = ::open(lock.c_str(), O_RDWR | O_CREAT, 0644);
  ASSERT_GE(descriptor, 0);
  ASSERT_EQ(::flock(descriptor, LOCK_EX | LOCK_NB), 0);
  const std::string holder = "host trainer-7, pid 4242, since 2026-11-26T04:00:00Z\n";
  ASSERT_EQ(::write(descriptor, holder.data(), holder.size()), static_cast<ssize_t>(holder.size()));
  const CommandResult refused =
      strata(small_run("--steps 1 --checkpoint-dir " + checkpoints.string()));
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_EQ(refused.err, "strata: " + checkpoints.string() +
                             ": in use by another job (host trainer-7, pid 4242, since "
                             "2026-11-26T04:00:00Z); two jobs in one checkpoint directory would "
                             "replace each other's checkpoints\n");
  // Once the holder is gone (its process ended: the kernel releases the lock), the directory
  // is free again.
  ::close(descriptor);
  EXPECT_EQ(strata(small_run("--steps 1 --checkpoint-dir " + checkpoints.string())).exit_code, 0);
}

// Files written after the last step are checked before the first: nothing trains for nothing.
TEST_F(TrainCli, OutputsWrittenAtTheEndAreCheckedBeforeTheFirstStep) {
  const std::string missing = (directory / "nodir" / "x.bin").string();
  for (const auto& [flag, message] :
       {std::pair{"--save-llmc", "--save-llmc"}, std::pair{"--trace", "--trace"}}) {
    const CommandResult run = strata(small_run("--steps 3 " + std::string(flag) + " " + missing));
    EXPECT_EQ(run.exit_code, 1) << flag;
    EXPECT_EQ(run.err, "strata: " + std::string(message) + ": cannot write " + missing +
                           ": its directory does not exist\n");
    EXPECT_EQ(run.out, "") << flag << ": no step ran";
  }
  // A checkpoint directory that cannot be made (its parent is a file) is refused alike.
  std::ofstream(directory / "a-file") << "x";
  const CommandResult run =
      strata(small_run("--steps 3 --checkpoint-dir " + (directory / "a-file" / "ckpt").string()));
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_THAT(run.err, HasSubstr("cannot create"));
  EXPECT_EQ(run.out, "");
}

// A job whose memory cannot fit is refused before it allocates, with the numbers and the fields
// to change (GPT-2 124M at 512 × 1,024 tokens: the simulator predicts hundreds of GiB of
// activations); a job that fits runs with the check on or off.
TEST_F(TrainCli, AJobThatCannotFitIsRefusedBeforeItAllocates) {
  const CommandResult run = strata("train --model gpt2-124m --data " + tokens +
                                   " --micro-batch 512 --seq-len 1024 --steps 1");
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_THAT(run.err, StartsWith("strata: --memory-check: this host's 1 rank(s) need "));
  EXPECT_THAT(run.err, HasSubstr(" GiB are available ("));
  EXPECT_THAT(run.err, HasSubstr("(the simulator's peak for the plan) + this process "));
  EXPECT_THAT(run.err, HasSubstr("Lower batch.micro_batch_size or seq_length"));
  EXPECT_EQ(lines(run.err), 1u);
  EXPECT_EQ(run.out, "");
  EXPECT_EQ(strata(small_run("--steps 1 --memory-check on")).exit_code, 0);
  EXPECT_EQ(strata(small_run("--steps 1 --memory-check off")).exit_code, 0);
  EXPECT_EQ(strata(small_run("--steps 1 --memory-check maybe")).exit_code, 2);
}

TEST_F(TrainCli, BadInputIsOneLineAndExitOne) {
  const CommandResult missing = strata(
      small_run("--steps 1")
          .replace(small_run("--steps 1").find(tokens), tokens.size(), "/nonexistent/tokens.bin"));
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_EQ(missing.err, "strata: /nonexistent/tokens.bin: cannot open the token file\n");
  const CommandResult too_long =
      strata("train --model " + kMicroModel + " --data " + tokens + " --seq-len 100 --steps 1");
  EXPECT_EQ(too_long.exit_code, 1);
  EXPECT_EQ(lines(too_long.err), 1u);
  EXPECT_THAT(too_long.err, HasSubstr("max_seq_length"));
  // 405B parameters need 6.5 TB of training state: refused before anything is allocated.
  const CommandResult huge = strata("train --model llama3.1-405b --data " + tokens + " --steps 1");
  EXPECT_EQ(huge.exit_code, 1);
  EXPECT_THAT(huge.err,
              HasSubstr("/model: llama3.1-405b's 405853388800 parameters need 6493.7 GB"));
  const CommandResult unwritable = strata(small_run("--steps 1 --checkpoint-dir /proc/strata"));
  EXPECT_EQ(unwritable.exit_code, 1);
  EXPECT_EQ(unwritable.out, "");  // refused before the first step
  EXPECT_THAT(unwritable.err, HasSubstr("/proc/strata: cannot create"));
  const CommandResult neither = strata("train --data " + tokens);
  EXPECT_EQ(neither.exit_code, 1);
  EXPECT_EQ(neither.err, "strata: command line: give --plan, --model or --init-llmc\n");
}

// A resume with nothing to do says so; one below the checkpoint, another batch, or an edited or
// overflowing state.json is refused naming both values or the path; --resume-with-changes
// continues another batch and says what changed.
TEST_F(TrainCli, ResumesCheckWhatTheCheckpointRecorded) {
  const std::string checkpoints = (directory / "ckpt").string();
  ASSERT_EQ(strata(small_run("--steps 3 --checkpoint-dir " + checkpoints)).exit_code, 0);
  const CommandResult again =
      strata(small_run("--steps 3 --resume --checkpoint-dir " + checkpoints));
  EXPECT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(again.out, "nothing to train: the checkpoint is at step 3, and --steps is 3\n");
  const CommandResult below =
      strata(small_run("--steps 2 --resume --checkpoint-dir " + checkpoints));
  EXPECT_EQ(below.exit_code, 1);
  EXPECT_EQ(below.err,
            "strata: --steps: 2 is below the checkpoint's step 3: nothing to train (--steps counts "
            "the steps of the whole run)\n");
  const std::string other_batch = "train --model " + kMicroModel + " --data " + tokens +
                                  " --micro-batch 2 --global-batch 8 --seq-len 32 --steps 4 "
                                  "--resume --checkpoint-dir " +
                                  checkpoints;
  const CommandResult refused = strata(other_batch);
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_THAT(refused.err, HasSubstr("--global-batch: the checkpoint"));
  EXPECT_THAT(refused.err, HasSubstr("was written with global batch 4, this run has 8"));
  const CommandResult changed = strata(other_batch + " --resume-with-changes");
  EXPECT_EQ(changed.exit_code, 0) << changed.err;
  EXPECT_THAT(changed.out, HasSubstr("resuming with a change: global batch 4 → 8"));
  // A state.json edited by hand fails its own CRC-32; one holding a number no double holds fails
  // at that number's path.
  const fs::path state = directory / "ckpt" / "step_00000004" / "state.json";
  std::string text = slurp(state);
  text.replace(text.find("\"tokens_seen\": "), 15, "\"tokens_seen\": 1");
  std::ofstream(state) << text;
  const CommandResult edited =
      strata(small_run("--steps 5 --resume --checkpoint-dir " + checkpoints));
  EXPECT_EQ(edited.exit_code, 1);
  EXPECT_THAT(edited.err, HasSubstr("state.json: /state_crc32: CRC-32"));
  text.replace(text.find("\"tokens_seen\": "), 15, "\"tokens_seen\": 1e999999999, \"x\": ");
  std::ofstream(state) << text;
  const CommandResult overflow =
      strata(small_run("--steps 5 --resume --checkpoint-dir " + checkpoints));
  EXPECT_EQ(overflow.exit_code, 1);
  EXPECT_EQ(lines(overflow.err), 1u);
  EXPECT_THAT(overflow.err, HasSubstr("state.json: /tokens_seen: 1e999999999 is too large"));
}

// The data order is part of what a checkpoint records: a sequential run resumed without
// --data-order sequential would silently read other batches, so it is refused by name.
TEST_F(TrainCli, AResumeKeepsTheDataOrder) {
  const std::string checkpoints = (directory / "ordered").string();
  ASSERT_EQ(strata(small_run("--steps 2 --data-order sequential --checkpoint-dir " + checkpoints))
                .exit_code,
            0);
  const CommandResult other =
      strata(small_run("--steps 3 --resume --checkpoint-dir " + checkpoints));
  EXPECT_EQ(other.exit_code, 1);
  EXPECT_EQ(lines(other.err), 1u);
  EXPECT_THAT(other.err, HasSubstr("--data-order: the checkpoint"));
  EXPECT_THAT(other.err, HasSubstr("was written with data order sequential, this run has random"));
  const CommandResult same = strata(
      small_run("--steps 3 --resume --data-order sequential --checkpoint-dir " + checkpoints));
  EXPECT_EQ(same.exit_code, 0) << same.err;
}

// The device flags: bf16 and a GPU cluster need --device cuda, and cuda needs a GPU (this test
// runs where there is none; on a GPU machine the CUDA tests train for real).
TEST_F(TrainCli, DeviceFlagsAreCheckedBeforeTraining) {
  const CommandResult bf16_on_cpu = strata(small_run("--steps 1 --precision bf16"));
  EXPECT_EQ(bf16_on_cpu.exit_code, 1);
  EXPECT_EQ(bf16_on_cpu.err, "strata: --precision: bf16 trains on a GPU: add --device cuda\n");
  const CommandResult cluster_on_cpu = strata(small_run("--steps 1 --cluster dgx-h100"));
  EXPECT_EQ(cluster_on_cpu.exit_code, 1);
  EXPECT_EQ(cluster_on_cpu.err,
            "strata: --cluster: dgx-h100 is a GPU cluster: add --device cuda, or give a file "
            "strata profile measured on the CPU\n");
  // Before the job's size and the GPU are looked at: the plan itself cannot run on CUDA.
  const CommandResult cp_on_cuda = strata(small_run("--steps 1 --device cuda --cp 2"));
  EXPECT_EQ(cp_on_cuda.exit_code, 1);
  EXPECT_EQ(cp_on_cuda.err,
            "strata: command line: /mesh/cp: cp 2: the CUDA backend runs data, tensor and "
            "pipeline parallelism (ranks may share a GPU); context parallelism runs on the CPU "
            "(--device cpu)\n");
  const CommandResult nccl_on_cpu = strata(small_run("--steps 1 --collectives nccl"));
  EXPECT_EQ(nccl_on_cpu.exit_code, 1);
  EXPECT_EQ(nccl_on_cpu.err,
            "strata: --collectives: nccl carries device tensors: add --device cuda\n");
  const CommandResult unknown = strata(small_run("--steps 1 --device tpu"));
  EXPECT_EQ(unknown.exit_code, 2);
  const CommandResult cuda = strata(small_run("--steps 1 --device cuda"));
  if (cuda.exit_code == 0) GTEST_SKIP() << "this machine has a GPU";
  EXPECT_EQ(cuda.exit_code, 1);
  EXPECT_EQ(lines(cuda.err), 1u);
  EXPECT_THAT(cuda.err, StartsWith("strata: --device: cuda: no GPU to train on ("));
  EXPECT_EQ(cuda.out, "");
}

TEST_F(TrainCli, LlmcFilesCarryTrainedWeightsBetweenRuns) {
  const std::string llmc = (directory / "gpt2_micro.bin").string();
  const CommandResult trained =
      strata(small_run("--steps 30 --lr 3e-3 --log-format json --save-llmc " + llmc));
  ASSERT_EQ(trained.exit_code, 0) << trained.err;
  ASSERT_TRUE(fs::exists(llmc));
  // A fresh run from the file starts where the first ended, not at the uniform loss 5.55.
  const CommandResult continued = strata("train --init-llmc " + llmc + " --data " + tokens +
                                         " --micro-batch 2 --global-batch 4 --seq-len 32 --steps 1"
                                         " --lr 1e-9 --log-format json");
  ASSERT_EQ(continued.exit_code, 0) << continued.err;
  const double start_loss =
      nlohmann::json::parse(continued.out.substr(0, continued.out.find('\n'))).at("loss");
  EXPECT_LT(start_loss, 4.5);
}

// llm.c files carry no dropout: loading one into a model that has some says so first, in text
// and in the JSON summary; a model that matches the file says nothing.
TEST_F(TrainCli, LlmcWeightsInAModelWithDropoutAreNamedFirst) {
  const std::string llmc = (directory / "initial_micro.bin").string();
  ASSERT_EQ(strata(small_run("--steps 0 --save-llmc " + llmc)).exit_code, 0);
  nlohmann::json model = nlohmann::json::parse(slurp(kMicroModel));
  model["dropout"] = 0.1;
  const fs::path dropout_model = directory / "gpt-micro-dropout.json";
  std::ofstream(dropout_model) << model.dump();
  const std::string run = "train --model " + dropout_model.string() + " --init-llmc " + llmc +
                          " --data " + tokens +
                          " --micro-batch 2 --global-batch 4 --seq-len 32 --steps 1";
  const CommandResult text = strata(run);
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_THAT(text.out,
              StartsWith("note: gpt-micro trains with dropout 0.1 where the llm.c file "));
  const CommandResult json = strata(run + " --log-format json");
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const std::string last = json.out.substr(json.out.rfind('\n', json.out.size() - 2) + 1);
  EXPECT_THAT(nlohmann::json::parse(last).at("notes").at(0).get<std::string>(),
              HasSubstr("dropout 0.1"));
  const CommandResult plain = strata(small_run("--steps 1 --init-llmc " + llmc));
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_THAT(plain.out, StartsWith("step"));
}

}  // namespace
}  // namespace strata::tools
