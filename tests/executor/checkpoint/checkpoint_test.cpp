// Training checkpoints (atomic directories with checksums) and llm.c model files.
#include "strata/executor/checkpoint/checkpoint.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <cstring>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "executor_models.h"
#include "input_error_message.h"
#include "strata/executor/checkpoint/checkpoint_directory.h"
#include "strata/executor/checkpoint/checkpoint_resharding.h"
#include "strata/executor/checkpoint/checkpoint_state_check.h"
#include "strata/executor/checkpoint/llmc_checkpoint.h"
#include "strata/executor/model/transformer.h"
#include "strata/schemas/presets.h"
#include "tensor_testing.h"

namespace strata::executor {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

fs::path fresh_directory(const std::string& name) {
  const fs::path path = fs::path(::testing::TempDir()) / (name + "-" + std::to_string(::getpid()));
  fs::remove_all(path);
  return path;
}

schemas::ModelConfig micro_model() { return testing::micro_gpt(50); }

OptimizerMoments moments_for(const ParameterStore& store, std::uint32_t seed) {
  const Shape shape{store.total_elements()};
  return {testing::random_tensor(shape, ScalarType::float32, seed),
          testing::random_tensor(shape, ScalarType::float32, seed + 1)};
}

std::string error_of(auto&& action) { return strata::testing::input_error_message(action); }

RunIdentity run_identity() {
  return RunIdentity{8, 16, "fp32", 4000, "0badc0de", "tokens.bin", "fnv1a64:0123", "sequential"};
}

// Rewrites one field of a checkpoint's state.json, leaving its recorded CRC-32 as it was.
void edit_state(const fs::path& checkpoint, const std::string& from, const std::string& to) {
  std::ifstream in(checkpoint / "state.json");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::size_t at = text.find(from);
  ASSERT_NE(at, std::string::npos) << from;
  text.replace(at, from.size(), to);
  std::ofstream(checkpoint / "state.json") << text;
}

// Rewrites state.json through `change` and records a fresh CRC-32, as a forger who knows the
// format would: what the checksum cannot catch, the layout and range checks must.
void forge_state(const fs::path& checkpoint, const std::function<void(nlohmann::json&)>& change) {
  nlohmann::json state;
  std::ifstream(checkpoint / "state.json") >> state;
  change(state);
  state[kCheckpointStateChecksumKey] = checkpoint_state_checksum(state);
  std::ofstream(checkpoint / "state.json") << state.dump(2);
}

struct CheckpointFixture : ::testing::Test {
  schemas::ModelConfig model = micro_model();
  Transformer written{model, ScalarType::float32, 7};
  OptimizerMoments written_moments = moments_for(written.parameters(), 3);
  fs::path directory = fresh_directory("checkpoints");
  fs::path saved = write_checkpoint(directory, model, written.parameters(), written_moments,
                                    TrainingState{12, 7, 12 * 64, run_identity(), ""});
  Transformer loaded{model, ScalarType::float32, 8};
  OptimizerMoments loaded_moments = moments_for(loaded.parameters(), 9);
};

TEST_F(CheckpointFixture, RoundTripsParametersMomentsAndState) {
  EXPECT_EQ(saved, directory / "step_00000012");
  const TrainingState state = read_checkpoint(saved, model, loaded.parameters(), loaded_moments);
  EXPECT_EQ(state.step, 12);
  EXPECT_EQ(state.seed, 7u);
  EXPECT_EQ(state.tokens_seen, 768);
  EXPECT_EQ(state.run, run_identity());
  EXPECT_EQ(0, std::memcmp(loaded.parameters().values().raw(), written.parameters().values().raw(),
                           written.parameters().values().bytes()));
  EXPECT_EQ(0, std::memcmp(loaded_moments.second.raw(), written_moments.second.raw(),
                           written_moments.second.bytes()));
}

TEST_F(CheckpointFixture, LatestIsTheHighestCompleteStepAndTemporariesAreIgnored) {
  write_checkpoint(directory, model, written.parameters(), written_moments,
                   TrainingState{3, 7, 0, std::nullopt, ""});
  fs::create_directory(directory / ".step_00000099.tmp.123");  // a crash mid-write
  EXPECT_EQ(latest_checkpoint(directory), directory / "step_00000012");
  EXPECT_EQ(latest_checkpoint(directory / "missing"), std::nullopt);
}

// A temporary left by a writer that no longer runs is removed; a live writer's (this process's)
// is not.
TEST_F(CheckpointFixture, AbandonedTemporariesAreRemoved) {
  // Process ids are below 2^22 on Linux: 2^22 + 1 is no process.
  const fs::path abandoned = directory / ".step_00000013.tmp.4194305";
  const fs::path live = directory / (".step_00000014.tmp." + std::to_string(::getpid()));
  fs::create_directory(abandoned);
  fs::create_directory(live);
  remove_abandoned_checkpoints(directory);
  EXPECT_FALSE(fs::exists(abandoned));
  EXPECT_TRUE(fs::exists(live));
}

// An edited state.json (its own CRC-32 no longer matches) and a state whose step is not its
// directory's are refused before anything is loaded.
TEST_F(CheckpointFixture, EditedStateIsRefused) {
  edit_state(saved, "\"step\": 12", "\"step\": 13");
  EXPECT_THAT(error_of([&] { read_checkpoint(saved, model, loaded.parameters(), loaded_moments); }),
              HasSubstr("state.json: /state_crc32: CRC-32"));
  const fs::path other = write_checkpoint(directory, model, written.parameters(), written_moments,
                                          TrainingState{20, 7, 0, std::nullopt, ""});
  fs::rename(other, directory / "step_00000021");
  EXPECT_THAT(error_of([&] {
                read_checkpoint(directory / "step_00000021", model, loaded.parameters(),
                                loaded_moments);
              }),
              HasSubstr("/step: 20 belongs in a directory step_00000020, not step_00000021"));
}

TEST_F(CheckpointFixture, TruncatedFilesAreRefused) {
  fs::resize_file(saved / "model.bin", fs::file_size(saved / "model.bin") - 4);
  EXPECT_THAT(error_of([&] { read_checkpoint(saved, model, loaded.parameters(), loaded_moments); }),
              HasSubstr("model.bin: " + std::to_string(written.parameters().values().bytes() - 4) +
                        " bytes, state.json says"));
}

TEST_F(CheckpointFixture, CorruptedBytesAreRefusedByTheChecksum) {
  {
    std::fstream file(saved / "optimizer.bin", std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(100);
    file.put('\x5a');
  }
  EXPECT_THAT(error_of([&] { read_checkpoint(saved, model, loaded.parameters(), loaded_moments); }),
              HasSubstr("optimizer.bin: CRC-32"));
}

TEST_F(CheckpointFixture, AnotherModelIsRefusedNamingTheField) {
  schemas::ModelConfig wider = model;
  wider.ffn_hidden_size = 32;
  Transformer other(wider, ScalarType::float32, 1);
  OptimizerMoments other_moments = moments_for(other.parameters(), 1);
  EXPECT_THAT(error_of([&] { read_checkpoint(saved, wider, other.parameters(), other_moments); }),
              HasSubstr("state.json: /model/ffn_hidden_size: the checkpoint's model has 64, the "
                        "model to train has 32"));
  fs::remove(saved / "state.json");
  EXPECT_THAT(error_of([&] { read_checkpoint(saved, model, loaded.parameters(), loaded_moments); }),
              HasSubstr("not a checkpoint: state.json is missing"));
}

// sed "version": 2 → 1 used to switch the state's CRC-32 check off: a checksum is checked whatever
// version the document claims, and a version this build does not know is refused by its number.
TEST_F(CheckpointFixture, AnEditedVersionDoesNotSwitchTheChecksumOff) {
  edit_state(saved, "\"version\": 2", "\"version\": 1");
  EXPECT_THAT(error_of([&] { read_checkpoint(saved, model, loaded.parameters(), loaded_moments); }),
              HasSubstr("state.json: /state_crc32: CRC-32"));
  forge_state(saved, [](nlohmann::json& state) { state["version"] = 3; });
  EXPECT_THAT(error_of([&] { read_checkpoint(saved, model, loaded.parameters(), loaded_moments); }),
              HasSubstr("state.json: /version: 3: this build reads checkpoint versions 1 to 2"));
  forge_state(saved, [](nlohmann::json& state) {
    state["version"] = 2;
    state["step"] = -1;
  });
  EXPECT_THAT(error_of([&] { read_checkpoint(saved, model, loaded.parameters(), loaded_moments); }),
              HasSubstr("state.json: /step: -1 is below the minimum 0"));
}

// A ZeRO-1 checkpoint of dp 2 whose layout values are forged (with a valid checksum): each is
// refused, naming the field, before a byte of the model is read, and quickly (dp = 10^9 used to
// make the reader walk a billion ranks).
TEST_F(CheckpointFixture, ForgedLayoutValuesAreRefusedBeforeAnyRead) {
  const layout::StateLayout zero1_dp2{.mesh = {.tp = 1, .cp = 1, .dp = 2, .pp = 1},
                                      .zero_stage = 1,
                                      .bucket_elements = 1000,
                                      .stages = {}};
  const fs::path sharded =
      reshard_checkpoint(saved, model, zero1_dp2, fresh_directory("forged-layouts"));
  // It reads back as written.
  read_checkpoint(sharded, model, loaded.parameters(), loaded_moments);
  EXPECT_EQ(0, std::memcmp(loaded_moments.second.raw(), written_moments.second.raw(),
                           written_moments.second.bytes()));
  const std::string original = [&] {
    std::ifstream in(sharded / "state.json");
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }();
  const auto refusal = [&](const std::function<void(nlohmann::json&)>& change) {
    std::ofstream(sharded / "state.json") << original;
    forge_state(sharded, change);
    const auto start = std::chrono::steady_clock::now();
    const std::string message =
        error_of([&] { read_checkpoint(sharded, model, loaded.parameters(), loaded_moments); });
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5)) << message;
    EXPECT_EQ(message, error_of([&] {
                reshard_checkpoint(sharded, model, std::nullopt, fresh_directory("forged-reshard"));
              }));
    return message;
  };
  EXPECT_THAT(refusal([](nlohmann::json& state) { state["parallel"]["bucket_elements"] = 0; }),
              HasSubstr("state.json: /parallel/bucket_elements: 0 is below the minimum 1"));
  EXPECT_THAT(refusal([](nlohmann::json& state) { state["parallel"]["bucket_elements"] = -1; }),
              HasSubstr("/parallel/bucket_elements: -1 is below the minimum 1"));
  EXPECT_THAT(
      refusal([](nlohmann::json& state) { state["parallel"]["zero_stage"] = 0; }),
      HasSubstr("state.json: /files: 3 files, but a layout of tp 1 · cp 1 · dp 2 · pp 1, ZeRO-0 "
                "writes 2"));
  EXPECT_THAT(refusal([](nlohmann::json& state) { state["parallel"]["zero_stage"] = 4; }),
              HasSubstr("/parallel/zero_stage: 4 is above the maximum 3"));
  EXPECT_THAT(
      refusal([](nlohmann::json& state) { state["parallel"]["mesh"]["dp"] = 1'000'000'000; }),
      HasSubstr("/parallel/mesh/dp: 1000000000 is above the maximum 67108864"));
  EXPECT_THAT(refusal([](nlohmann::json& state) {
                state["parallel"]["mesh"]["dp"] = 1 << 20;
                state["parallel"]["mesh"]["cp"] = 1 << 20;
              }),
              HasSubstr("/parallel/mesh: tp × cp × dp × pp = 1099511627776 ranks: more than "
                        "Strata's limit of 67108864"));
  EXPECT_THAT(
      refusal([](nlohmann::json& state) { state["parallel"]["mesh"]["dp"] = 4096; }),
      HasSubstr("/files: 3 files, but a layout of tp 1 · cp 1 · dp 4096 · pp 1, ZeRO-1 writes "
                "4097"));
  EXPECT_THAT(refusal([](nlohmann::json& state) { state["parallel"]["mesh"]["tp"] = 3; }),
              HasSubstr("/parallel/mesh/tp: 3 does not divide num_attention_heads="));
  // Expert parallelism: it folds over the stage's tp × cp × dp ranks (its state into the dense
  // state's hybrid-sharding replicas), and only a mixture of experts has experts to split.
  EXPECT_THAT(refusal([](nlohmann::json& state) { state["parallel"]["mesh"]["ep"] = 3; }),
              HasSubstr("/parallel/mesh/ep: ep × etp = 3 × 1 does not divide tp × cp × dp = 2"));
  EXPECT_THAT(refusal([](nlohmann::json& state) {
                state["parallel"]["mesh"]["ep"] = 2;
                state["parallel"]["mesh"]["dp_shard"] = 1;
              }),
              HasSubstr("/parallel/mesh/ep: dp / dp_shard = 2 replicas do not divide the expert "
                        "data-parallel size tp·cp·dp / (ep·etp) = 1"));
  EXPECT_THAT(refusal([](nlohmann::json& state) { state["parallel"]["mesh"]["etp"] = 4; }),
              HasSubstr("/parallel/mesh/etp: ep × etp = 1 × 4 does not divide tp × cp × dp = 2"));
  EXPECT_THAT(refusal([](nlohmann::json& state) { state["parallel"]["mesh"]["ep"] = 2; }),
              HasSubstr("/parallel/mesh/ep: 2 needs a mixture-of-experts model"));
  // A layout whose files would have other sizes is refused by them, also with a forged checksum.
  EXPECT_THAT(
      refusal([](nlohmann::json& state) {
        state["files"]["optimizer.tp0.pp0.dp1.bin"]["bytes"] =
            state["files"]["optimizer.tp0.pp0.dp1.bin"]["bytes"].get<std::int64_t>() + 8;
      }),
      HasSubstr("bytes recorded, but a layout of tp 1 · cp 1 · dp 2 · pp 1, ZeRO-1 makes this "
                "file"));
  // Another bucket size can give files of the same sizes: that edit is caught by the checksum
  // (only a forger who recomputes it gets past, as with any unsigned format).
  std::ofstream(sharded / "state.json") << original;
  edit_state(sharded, "\"bucket_elements\": 1000", "\"bucket_elements\": 7");
  EXPECT_THAT(
      error_of([&] { read_checkpoint(sharded, model, loaded.parameters(), loaded_moments); }),
      HasSubstr("state.json: /state_crc32: CRC-32"));
  EXPECT_THAT(
      refusal([](nlohmann::json& state) { state["parallel"]["mesh"]["order"] = "tp-tp"; }),
      HasSubstr("/parallel/mesh/order: \"tp-tp\" must name each of tp, cp, dp and pp once"));
}

// Step numbers past eight digits (--steps allows 2^40) name longer directories, which resume and
// clean-up still find, in numeric order.
TEST_F(CheckpointFixture, StepsPastEightDigitsAreFoundInNumericOrder) {
  write_checkpoint(directory, model, written.parameters(), written_moments,
                   TrainingState{99'999'999, 7, 0, std::nullopt, ""});
  const fs::path nine_digits =
      write_checkpoint(directory, model, written.parameters(), written_moments,
                       TrainingState{100'000'000, 7, 0, std::nullopt, ""});
  EXPECT_EQ(nine_digits, directory / "step_100000000");
  EXPECT_EQ(latest_checkpoint(directory), nine_digits);
  EXPECT_EQ(read_checkpoint(nine_digits, model, loaded.parameters(), loaded_moments).step,
            100'000'000);
  const fs::path abandoned = directory / ".step_100000001.tmp.4194305";
  fs::create_directory(abandoned);
  remove_abandoned_checkpoints(directory);
  EXPECT_FALSE(fs::exists(abandoned));
}

TEST(LlmcCheckpoint, WritesLlmcsHeaderAndLayoutAndReadsItBack) {
  const schemas::ModelConfig model = micro_model();
  Transformer written(model, ScalarType::float32, 11);
  const fs::path path = fresh_directory("gpt2_micro.bin");
  write_llmc_checkpoint(path, model, written.parameters());
  std::ifstream raw(path, std::ios::binary);
  std::array<std::int32_t, 256> header{};
  raw.read(reinterpret_cast<char*>(header.data()), sizeof(header));
  EXPECT_EQ((std::array<std::int32_t, 8>{header[0], header[1], header[2], header[3], header[4],
                                         header[5], header[6], header[7]}),
            (std::array<std::int32_t, 8>{20240326, 3, 8, 50, 2, 2, 16, 128}));
  // wte padded to 128 rows, then wpe: llm.c's element 128·16 is wpe[0][0].
  std::vector<float> body((fs::file_size(path) - 1024) / 4);
  raw.read(reinterpret_cast<char*>(body.data()), static_cast<std::streamsize>(4 * body.size()));
  EXPECT_EQ(body.size(),
            static_cast<std::size_t>(written.parameters().total_elements() + (128 - 50) * 16));
  EXPECT_EQ(body[128 * 16],
            written.parameters().entry("embedding.position").value.data<float>()[0]);
  EXPECT_EQ(body[49 * 16 + 3],
            written.parameters().entry("embedding.word").value.data<float>()[49 * 16 + 3]);
  EXPECT_EQ(body[50 * 16], 0.0f);
  // qkvw of layer 1 follows wte, wpe, ln1w (2·16) and ln1b (2·16) and layer 0's 48·16 rows.
  const std::size_t qkv_layer1 = 128 * 16 + 8 * 16 + 2 * 16 + 2 * 16 + 48 * 16;
  EXPECT_EQ(body[qkv_layer1 + 5],
            written.parameters().entry("layers.1.attention.qkv.weight").value.data<float>()[5]);
  EXPECT_EQ(body.back(), written.parameters().entry("final_norm.bias").value.data<float>()[15]);

  const schemas::ModelConfig header_model = read_llmc_model_config(path);
  EXPECT_EQ(header_model.hidden_size, 16);
  EXPECT_EQ(header_model.vocab_size, 50);
  EXPECT_EQ(header_model.ffn_hidden_size, 64);
  Transformer loaded(header_model, ScalarType::float32, 99);
  read_llmc_parameters(path, header_model, loaded.parameters());
  EXPECT_EQ(0, std::memcmp(loaded.parameters().values().raw(), written.parameters().values().raw(),
                           written.parameters().values().bytes()));
}

TEST(LlmcCheckpoint, RefusesModelsLlmcCannotHoldAndMismatchedHeaders) {
  const fs::path path = fresh_directory("llmc.bin");
  const schemas::ModelConfig llama = schemas::model_preset("llama-tiny");
  Transformer transformer(llama, ScalarType::float32, 1);
  EXPECT_THAT(error_of([&] { write_llmc_checkpoint(path, llama, transformer.parameters()); }),
              HasSubstr("llm.c files hold GPT-2-shaped models"));
  const schemas::ModelConfig model = micro_model();
  Transformer written(model, ScalarType::float32, 11);
  write_llmc_checkpoint(path, model, written.parameters());
  schemas::ModelConfig longer = model;
  longer.max_seq_length = 16;
  Transformer other(longer, ScalarType::float32, 1);
  EXPECT_THAT(error_of([&] { read_llmc_parameters(path, longer, other.parameters()); }),
              HasSubstr("header[2]: 8 where model micro has 16"));
  // A header field outside the model format's range is refused by name before it sizes anything.
  {
    std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
    const std::int32_t minus_one = -1;
    file.seekp(2 * 4);
    file.write(reinterpret_cast<const char*>(&minus_one), 4);
  }
  EXPECT_THAT(error_of([&] { read_llmc_model_config(path); }),
              HasSubstr("header[2] (max_seq_len): -1 is not from 1 to 16777216"));
}

}  // namespace
}  // namespace strata::executor
