// llm.c's GPT-2 model file (train_gpt2.c / train_gpt2.py write_model): a header of 256 int32
//   [20240326, version (3 = float32, 5 = bfloat16), max_seq_len, vocab_size, num_layers,
//    num_heads, channels, padded_vocab_size, 0…]
// then every parameter, each kind stacked over the layers:
//   wte [Vp, C] · wpe [maxT, C] · ln1w [L, C] · ln1b [L, C] · qkvw [L, 3C, C] · qkvb [L, 3C] ·
//   attprojw [L, C, C] · attprojb [L, C] · ln2w · ln2b · fcw [L, 4C, C] · fcb [L, 4C] ·
//   fcprojw [L, C, 4C] · fcprojb [L, C] · lnfw [C] · lnfb [C]
// Used by `strata train --init-llmc/--save-llmc`, so a GPT-2 moves between llm.c and Strata.
#pragma once

#include <filesystem>

#include "strata/executor/model/parameter_store.h"
#include "strata/schemas/model_config.h"

namespace strata::executor {

inline constexpr std::int32_t kLlmcModelMagic = 20240326;

// The gpt model a file's header describes (GPT-2's fixed choices: 4C MLP, tied embeddings,
// biases, learned positions, LayerNorm ε 1e-5, no dropout).
schemas::ModelConfig read_llmc_model_config(const std::filesystem::path& path);

// Loads the file's parameters (float32 or bfloat16) into `parameters` of a model equal in shape
// to the header; refuses other headers and sizes with the reason.
void read_llmc_parameters(const std::filesystem::path& path, const schemas::ModelConfig& model,
                          ParameterStore& parameters);

// Writes a float32 (version 3) file; the model must be GPT-2 shaped (refused otherwise). The
// vocabulary is padded to a multiple of 128 with zero rows, as llm.c pads it.
void write_llmc_checkpoint(const std::filesystem::path& path, const schemas::ModelConfig& model,
                           const ParameterStore& parameters);

}  // namespace strata::executor
