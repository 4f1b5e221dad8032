#include "strata/executor/checkpoint/llmc_checkpoint.h"

#include <fmt/format.h>

#include <array>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "strata/schemas/input_error.h"
#include "strata/schemas/json_file.h"
#include "strata/schemas/model_config.h"

namespace strata::executor {
namespace {

using schemas::ModelConfig;
namespace fs = std::filesystem;

constexpr std::int32_t kVersionFloat32 = 3;
constexpr std::int32_t kVersionBfloat16 = 5;
constexpr std::int64_t kVocabularyPadding = 128;
using Header = std::array<std::int32_t, 256>;

// One llm.c tensor kind: our name per layer (or once), llm.c's rows per layer.
struct LlmcTensor {
  const char* suffix;
  bool per_layer;
};
// llm.c's order after wte and wpe.
constexpr std::array<LlmcTensor, 14> kOrder{{{"attention_norm.weight", true},
                                             {"attention_norm.bias", true},
                                             {"attention.qkv.weight", true},
                                             {"attention.qkv.bias", true},
                                             {"attention.output.weight", true},
                                             {"attention.output.bias", true},
                                             {"mlp_norm.weight", true},
                                             {"mlp_norm.bias", true},
                                             {"mlp.fc.weight", true},
                                             {"mlp.fc.bias", true},
                                             {"mlp.output.weight", true},
                                             {"mlp.output.bias", true},
                                             {"final_norm.weight", false},
                                             {"final_norm.bias", false}}};

std::int64_t padded_vocabulary(std::int64_t vocab) {
  return (vocab + kVocabularyPadding - 1) / kVocabularyPadding * kVocabularyPadding;
}

void check_header(const Header& header, const fs::path& path) {
  if (header[0] != kLlmcModelMagic) {
    throw schemas::InputError(
        path.string(), "header[0]",
        fmt::format("magic {} is not llm.c's model magic {}", header[0], kLlmcModelMagic));
  }
  if (header[1] != kVersionFloat32 && header[1] != kVersionBfloat16) {
    throw schemas::InputError(
        path.string(), "header[1]",
        fmt::format("version {} (known: 3 = float32, 5 = bfloat16)", header[1]));
  }
  // The shape fields, within the model format's limits, before anything is sized by them.
  struct Field {
    std::size_t index;
    const char* name;
    std::int64_t maximum;
  };
  for (const Field& field :
       {Field{2, "max_seq_len", schemas::kMaxSeqLength},
        Field{3, "vocab_size", schemas::kMaxVocabSize}, Field{4, "num_layers", schemas::kMaxLayers},
        Field{5, "num_heads", schemas::kMaxHeads}, Field{6, "channels", schemas::kMaxHiddenSize},
        Field{7, "padded_vocab_size", schemas::kMaxVocabSize + kVocabularyPadding}}) {
    const std::int64_t value = header[field.index];
    if (value < 1 || value > field.maximum) {
      throw schemas::InputError(path.string(),
                                fmt::format("header[{}] ({})", field.index, field.name),
                                fmt::format("{} is not from 1 to {}", value, field.maximum));
    }
  }
}

// The file open at its first tensor, with its header and size: tensors are read from it one at a
// time straight into parameter buffers, never the whole file at once.
struct LlmcFile {
  std::ifstream stream;
  Header header{};
  std::uintmax_t bytes = 0;
};

LlmcFile open_llmc_file(const fs::path& path) {
  LlmcFile file;
  file.stream.open(path, std::ios::binary);
  if (!file.stream) {
    throw schemas::InputError(path.string(), "",
                              fmt::format("cannot open: {}", std::strerror(errno)));
  }
  if (fs::is_directory(path)) throw schemas::InputError(path.string(), "", "is a directory");
  file.bytes = fs::file_size(path);
  if (file.bytes < sizeof(Header)) {
    throw schemas::InputError(
        path.string(), "header",
        fmt::format("{} bytes, shorter than llm.c's 1024-byte header", file.bytes));
  }
  file.stream.read(reinterpret_cast<char*>(file.header.data()), sizeof(Header));
  if (!file.stream) throw schemas::InputError(path.string(), "header", "read failed");
  check_header(file.header, path);
  return file;
}

// Visits every parameter in llm.c's order with the store's tensor and its element count in the
// file (wte has Vp rows there).
template <class Store, class Visit>
void for_each_in_llmc_order(const ModelConfig& model, Store& parameters, Visit&& visit) {
  visit(parameters.entry("embedding.word").value,
        padded_vocabulary(model.vocab_size) * model.hidden_size);
  visit(parameters.entry("embedding.position").value, model.max_seq_length * model.hidden_size);
  for (const LlmcTensor& kind : kOrder) {
    if (!kind.per_layer) {
      auto& value = parameters.entry(kind.suffix).value;
      visit(value, value.numel());
      continue;
    }
    for (std::int64_t layer = 0; layer < model.num_layers; ++layer) {
      auto& value = parameters.entry(fmt::format("layers.{}.{}", layer, kind.suffix)).value;
      visit(value, value.numel());
    }
  }
}

void check_gpt2_shaped(const ModelConfig& model, const std::string& source) {
  const bool gpt2 = model.position_embedding == schemas::PositionEmbedding::learned &&
                    model.norm == schemas::NormKind::layernorm &&
                    model.mlp_activation == schemas::MlpActivation::gelu && model.tied_embeddings &&
                    model.qkv_bias && model.attention_output_bias && model.mlp_bias &&
                    model.ffn_hidden_size == 4 * model.hidden_size &&
                    model.num_kv_heads == model.num_attention_heads &&
                    model.attention_width() == model.hidden_size &&
                    // llm.c's file has no place for any other parameter.
                    !model.moe && !model.mtp && !model.embedding_norm && !model.qk_norm &&
                    !model.attention_sinks;
  if (!gpt2) {
    throw schemas::InputError(
        source, "",
        fmt::format("llm.c files hold GPT-2-shaped models (learned positions, "
                    "LayerNorm, GELU 4h MLP, biases, tied embeddings, nothing more); model "
                    "{} is not one",
                    model.name));
  }
}

}  // namespace

ModelConfig read_llmc_model_config(const fs::path& path) {
  const Header header = open_llmc_file(path).header;
  ModelConfig model = ModelConfig::defaults_for(schemas::Architecture::gpt);
  model.name = "llmc:" + path.filename().string();
  model.max_seq_length = header[2];
  model.vocab_size = header[3];
  model.num_layers = header[4];
  model.num_attention_heads = header[5];
  model.num_kv_heads = header[5];
  model.hidden_size = header[6];
  model.ffn_hidden_size = 4 * model.hidden_size;
  model.dropout = 0.0;
  if (model.num_attention_heads <= 0 || model.hidden_size % model.num_attention_heads != 0 ||
      header[7] < model.vocab_size) {
    throw schemas::InputError(path.string(), "header",
                              fmt::format("inconsistent shape: {} heads, {} channels, vocabulary "
                                          "{} padded to {}",
                                          header[5], header[6], header[3], header[7]));
  }
  model.head_dim = model.hidden_size / model.num_attention_heads;
  schemas::validate_model(model, schemas::JsonLocation{path.string(), ""});
  return model;
}

void read_llmc_parameters(const fs::path& path, const ModelConfig& model,
                          ParameterStore& parameters) {
  if (parameters.device() != Device::cpu || parameters.has_working_copy()) {
    // Read into host memory, then copy the masters over and round the working copy.
    ParameterStore host(parameters.specs(), parameters.values().scalar_type());
    read_llmc_parameters(path, model, host);
    parameters.values().copy_from(host.values());
    parameters.refresh_compute_values();
    return;
  }
  LlmcFile file = open_llmc_file(path);
  const Header& header = file.header;
  check_gpt2_shaped(model, path.string());
  const std::array<std::int64_t, 5> wanted{model.max_seq_length, model.vocab_size, model.num_layers,
                                           model.num_attention_heads, model.hidden_size};
  for (std::size_t i = 0; i < wanted.size(); ++i) {
    if (header[i + 2] != wanted[i]) {
      throw schemas::InputError(
          path.string(), fmt::format("header[{}]", i + 2),
          fmt::format("{} where model {} has {}", header[i + 2], model.name, wanted[i]));
    }
  }
  const std::size_t element_bytes = header[1] == kVersionFloat32 ? 4 : 2;
  const std::int64_t padded_vocab = header[7];
  std::size_t expected = sizeof(Header);
  for_each_in_llmc_order(model, parameters, [&](Tensor&, std::int64_t count) {
    expected += static_cast<std::size_t>(count) * element_bytes;
  });
  expected += static_cast<std::size_t>((padded_vocab - padded_vocabulary(model.vocab_size)) *
                                       model.hidden_size) *
              element_bytes;
  if (file.bytes != expected) {
    throw schemas::InputError(
        path.string(), "",
        fmt::format("{} bytes, the header's shapes need {}", file.bytes, expected));
  }
  // float32 into float32 lands in place; other pairs pass through a small staging buffer.
  constexpr std::int64_t kStagingElements = 1 << 16;
  std::vector<char> staging;
  bool first = true;
  for_each_in_llmc_order(model, parameters, [&](Tensor& value, std::int64_t count) {
    const std::int64_t elements = value.numel();
    if (element_bytes == 4 && value.scalar_type() == ScalarType::float32) {
      file.stream.read(static_cast<char*>(value.raw()), static_cast<std::streamsize>(elements) * 4);
    } else {
      staging.resize(static_cast<std::size_t>(kStagingElements) * element_bytes);
      for (std::int64_t begin = 0; begin < elements && file.stream; begin += kStagingElements) {
        const std::int64_t length = std::min(kStagingElements, elements - begin);
        file.stream.read(staging.data(), static_cast<std::streamsize>(length) *
                                             static_cast<std::streamsize>(element_bytes));
        for (std::int64_t i = 0; i < length; ++i) {
          float element;
          if (element_bytes == 4) {
            std::memcpy(&element, staging.data() + 4 * i, 4);
          } else {
            std::uint16_t bits;
            std::memcpy(&bits, staging.data() + 2 * i, 2);
            const std::uint32_t widened = static_cast<std::uint32_t>(bits) << 16;
            std::memcpy(&element, &widened, 4);
          }
          if (value.scalar_type() == ScalarType::float64) {
            value.data<double>()[begin + i] = element;
          } else {
            value.data<float>()[begin + i] = element;
          }
        }
      }
    }
    // wte holds Vp rows in the file: read the first V, skip the padding.
    const std::int64_t file_count = first ? padded_vocab * model.hidden_size : count;
    first = false;
    file.stream.seekg(static_cast<std::streamoff>((file_count - elements) *
                                                  static_cast<std::int64_t>(element_bytes)),
                      std::ios::cur);
    if (!file.stream) {
      throw schemas::InputError(path.string(), "", "read failed (file changed while reading?)");
    }
  });
}

void write_llmc_checkpoint(const fs::path& path, const ModelConfig& model,
                           const ParameterStore& parameters) {
  check_gpt2_shaped(model, path.string());
  if (parameters.device() != Device::cpu) {
    ParameterStore host(parameters.specs(), parameters.values().scalar_type());
    host.values().copy_from(parameters.values());
    write_llmc_checkpoint(path, model, host);
    return;
  }
  STRATA_CHECK(parameters.values().scalar_type() == ScalarType::float32,
               "llm.c files are written from float32 parameters");
  Header header{};
  header[0] = kLlmcModelMagic;
  header[1] = kVersionFloat32;
  header[2] = static_cast<std::int32_t>(model.max_seq_length);
  header[3] = static_cast<std::int32_t>(model.vocab_size);
  header[4] = static_cast<std::int32_t>(model.num_layers);
  header[5] = static_cast<std::int32_t>(model.num_attention_heads);
  header[6] = static_cast<std::int32_t>(model.hidden_size);
  header[7] = static_cast<std::int32_t>(padded_vocabulary(model.vocab_size));
  // Streamed tensor by tensor: a 475 MB model is not copied into memory first.
  schemas::write_file_atomically(path, [&](std::FILE* file) {
    bool written = std::fwrite(header.data(), sizeof(header), 1, file) == 1;
    for_each_in_llmc_order(model, parameters, [&](const Tensor& value, std::int64_t count) {
      written = written && std::fwrite(value.raw(), 1, value.bytes(), file) == value.bytes();
      // Zero rows pad wte to Vp. Only wte has any; fwrite of an empty vector's null data is
      // undefined even for zero bytes.
      if (count > value.numel()) {
        const std::vector<char> padding(static_cast<std::size_t>(count - value.numel()) * 4, '\0');
        written = written && std::fwrite(padding.data(), 1, padding.size(), file) == padding.size();
      }
    });
    return written;
  });
}

}  // namespace strata::executor
