// Token files (llm.c's format), the byte tokenizer and the batch sampler.
#include "strata/executor/data/token_file.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <fstream>
#include <numeric>

#include "input_error_message.h"
#include "strata/executor/data/batch_sampler.h"
#include "strata/executor/data/byte_tokenizer.h"
#include "strata/schemas/input_error.h"

namespace strata::executor {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

fs::path temp_path(const std::string& name) {
  return fs::path(::testing::TempDir()) / (name + "-" + std::to_string(::getpid()));
}

void write_raw(const fs::path& path, std::array<std::int32_t, 256> header,
               std::size_t token_bytes) {
  std::ofstream file(path, std::ios::binary);
  file.write(reinterpret_cast<const char*>(header.data()), sizeof(header));
  const std::string tokens(token_bytes, '\x01');
  file.write(tokens.data(), static_cast<std::streamsize>(tokens.size()));
}

std::string error_of(auto&& action) { return strata::testing::input_error_message(action); }

TEST(TokenFile, RoundTripsWithLlmcHeader) {
  const fs::path path = temp_path("tokens.bin");
  const std::vector<std::uint16_t> tokens = tokenize_bytes("Hello, wörld\n");
  write_token_file(path, tokens);
  EXPECT_EQ(fs::file_size(path), 1024 + 2 * tokens.size());
  std::ifstream raw(path, std::ios::binary);
  std::array<std::int32_t, 3> header{};
  raw.read(reinterpret_cast<char*>(header.data()), sizeof(header));
  EXPECT_EQ(header[0], 20240520);
  EXPECT_EQ(header[1], 1);
  EXPECT_EQ(header[2], static_cast<std::int32_t>(tokens.size()));
  const TokenFile file = read_token_file(path);
  EXPECT_EQ(file.tokens, tokens);
  EXPECT_EQ(detokenize_bytes(file.tokens), "Hello, wörld\n");
  EXPECT_EQ(file.largest_token(), 0xC3);  // the first byte of 'ö' in UTF-8
}

TEST(TokenFile, BadFilesAreRefusedWithTheReason) {
  EXPECT_THAT(error_of([] { read_token_file("/nonexistent/tokens.bin"); }),
              HasSubstr("cannot open the token file"));
  const fs::path path = temp_path("bad.bin");
  std::array<std::int32_t, 256> header{};
  header = {20240521, 1, 4};
  write_raw(path, header, 8);
  EXPECT_THAT(error_of([&] { read_token_file(path); }),
              HasSubstr("header[0]: magic 20240521 is not llm.c's token-file magic 20240520"));
  header = {20240520, 2, 4};
  write_raw(path, header, 8);
  EXPECT_THAT(error_of([&] { read_token_file(path); }), HasSubstr("header[1]: version 2"));
  header = {20240520, 1, 5};
  write_raw(path, header, 8);  // 4 tokens where the header says 5: truncated
  EXPECT_THAT(
      error_of([&] { read_token_file(path); }),
      HasSubstr("header[2]: says 5 tokens (1034 bytes with the header), the file has 1032"));
  std::ofstream(path, std::ios::binary) << "short";
  EXPECT_THAT(error_of([&] { read_token_file(path); }), HasSubstr("shorter than llm.c's"));
}

TEST(BatchSampler, RefusesTooFewTokensAndTokensOutsideTheVocabulary) {
  const TokenFile few{"few.bin", {1, 2, 3, 4}};
  EXPECT_THAT(error_of([&] { BatchSampler(few, 4, 256, 1); }),
              HasSubstr("few.bin: 4 tokens are too few for one sample of 4 + 1 tokens"));
  const TokenFile wide{"gpt2.bin", {1, 2, 50256, 4, 5, 6}};
  EXPECT_THAT(
      error_of([&] { BatchSampler(wide, 4, 256, 1); }),
      HasSubstr("gpt2.bin: token 50256 at position 2 is outside the model's vocabulary of 256"));
}

TEST(TokenFile, ReadsPreTokenisedGpt2FilesForModelsWithGpt2sVocabulary) {
  // GPT-2 ids go up to 50256 (<|endoftext|>), as llm.c's tinyshakespeare files hold them.
  const fs::path path = temp_path("gpt2_tokens.bin");
  std::vector<std::uint16_t> tokens;
  for (int i = 0; i < 100; ++i) tokens.push_back(static_cast<std::uint16_t>((i * 4099) % 50257));
  tokens.push_back(50256);
  write_token_file(path, tokens);
  const TokenFile file = read_token_file(path);
  EXPECT_EQ(file.largest_token(), 50256);
  const BatchSampler sampler(file, 16, 50257, 1);
  Tensor inputs = Tensor::zeros({2, 16}, ScalarType::int32);
  Tensor targets = Tensor::zeros({2, 16}, ScalarType::int32);
  sampler.fill(0, 0, inputs, targets);
  const std::int64_t start = sampler.window_start(0, 1);
  EXPECT_EQ(inputs.data<std::int32_t>()[16], tokens[static_cast<std::size_t>(start)]);
}

TEST(BatchSampler, SamplesDependOnSeedStepAndIndexOnlyNotOnTheMicroBatchSplit) {
  TokenFile file{"text.bin", {}};
  for (int i = 0; i < 5000; ++i) file.tokens.push_back(static_cast<std::uint16_t>(i % 251));
  const BatchSampler sampler(file, 16, 256, 99);
  // One micro-batch of 4 versus two of 2, for step 7.
  Tensor whole_in = Tensor::zeros({4, 16}, ScalarType::int32);
  Tensor whole_out = Tensor::zeros({4, 16}, ScalarType::int32);
  sampler.fill(7, 0, whole_in, whole_out);
  for (std::int64_t half = 0; half < 2; ++half) {
    Tensor in = Tensor::zeros({2, 16}, ScalarType::int32),
           out = Tensor::zeros({2, 16}, ScalarType::int32);
    sampler.fill(7, 2 * half, in, out);
    EXPECT_EQ(0, std::memcmp(in.raw(), whole_in.data<std::int32_t>() + 32 * half, in.bytes()));
    EXPECT_EQ(0, std::memcmp(out.raw(), whole_out.data<std::int32_t>() + 32 * half, out.bytes()));
  }
  // Targets are the next tokens.
  for (std::int64_t t = 0; t + 1 < 16; ++t) {
    EXPECT_EQ(whole_out.data<std::int32_t>()[t], whole_in.data<std::int32_t>()[t + 1]);
  }
  // Steps draw different windows; the same (seed, step, sample) draws the same one.
  EXPECT_NE(sampler.window_start(7, 0), sampler.window_start(8, 0));
  EXPECT_EQ(sampler.window_start(7, 3), BatchSampler(file, 16, 256, 99).window_start(7, 3));
  EXPECT_NE(sampler.window_start(7, 3), BatchSampler(file, 16, 256, 98).window_start(7, 3));
}

// llm.c's loader on 100 tokens with B = 2, T = 8: a batch reads 17 tokens and moves 16 on,
// starting over when fewer than 17 remain: batches at 0, 16, …, 80 (80 + 17 ≤ 100), then 96 + 17
// > 100 wraps to 0 — six batches an epoch, ⌊(100 − 1) / 16⌋.
TEST(BatchSampler, SequentialOrderIsLlmcsLoader) {
  TokenFile file{"text.bin", {}};
  for (int i = 0; i < 100; ++i) file.tokens.push_back(static_cast<std::uint16_t>(i));
  const BatchSampler sampler(file, 8, 256, 1, DataOrder::sequential, 2);
  // A simulation of llm.c's dataloader_next_batch, written out: reset when the next B·T + 1 tokens
  // would run past the end, read from the position, advance by B·T.
  std::int64_t position = 0;
  for (std::int64_t step = 0; step < 20; ++step) {
    if (position + 2 * 8 + 1 > 100) position = 0;
    EXPECT_EQ(sampler.window_start(step, 0), position) << "step " << step;
    EXPECT_EQ(sampler.window_start(step, 1), position + 8) << "step " << step;
    position += 2 * 8;
  }
  EXPECT_EQ(sampler.epoch_of(5), 0);
  EXPECT_EQ(sampler.epoch_of(6), 1);
  EXPECT_EQ(BatchSampler(file, 8, 256, 1).epoch_of(6), std::nullopt);  // random order: no epochs
  // The last target of the last batch of an epoch is inside the file.
  Tensor inputs = Tensor::zeros({2, 8}, ScalarType::int32);
  Tensor targets = Tensor::zeros({2, 8}, ScalarType::int32);
  sampler.fill(5, 0, inputs, targets);
  EXPECT_EQ(targets.data<std::int32_t>()[15], 96);
  EXPECT_THAT(error_of([&] { BatchSampler(file, 8, 256, 1, DataOrder::sequential, 16); }),
              HasSubstr("text.bin: 100 tokens are too few for one global batch of 16 × 8 + 1 "
                        "tokens in sequential order"));
}

TEST(BatchSampler, ShuffledOrderPermutesEachEpochsBatchesBySeed) {
  TokenFile file{"text.bin", {}};
  for (int i = 0; i < 10'000; ++i) file.tokens.push_back(static_cast<std::uint16_t>(i % 251));
  const std::int64_t batches = (10'000 - 1) / (4 * 16);  // 156 per epoch
  const auto epoch_order = [&](const BatchSampler& sampler, std::int64_t epoch) {
    std::vector<std::int64_t> starts;
    for (std::int64_t k = 0; k < batches; ++k) {
      starts.push_back(sampler.window_start(epoch * batches + k, 0) / (4 * 16));
    }
    return starts;
  };
  const BatchSampler sampler(file, 16, 256, 7, DataOrder::shuffled, 4);
  std::vector<std::int64_t> first = epoch_order(sampler, 0);
  const std::vector<std::int64_t> second = epoch_order(sampler, 1);
  EXPECT_NE(first, second);
  // Every batch of the epoch once, and not in file order.
  std::vector<std::int64_t> sorted = first;
  std::sort(sorted.begin(), sorted.end());
  std::vector<std::int64_t> all(static_cast<std::size_t>(batches));
  std::iota(all.begin(), all.end(), 0);
  EXPECT_EQ(sorted, all);
  EXPECT_NE(first, all);
  // A pure function of (seed, step): another sampler, asked out of order, agrees; another seed
  // does not.
  const BatchSampler again(file, 16, 256, 7, DataOrder::shuffled, 4);
  EXPECT_EQ(again.window_start(batches + 3, 2), sampler.window_start(batches + 3, 2));
  EXPECT_EQ(again.window_start(2, 1), sampler.window_start(2, 1));
  EXPECT_NE(epoch_order(BatchSampler(file, 16, 256, 8, DataOrder::shuffled, 4), 0), first);
}

}  // namespace
}  // namespace strata::executor
