#include "strata/schedule/action.h"

#include <array>
#include <charconv>

namespace strata::schedule {
namespace {

struct TypeToken {
  ActionType type;
  std::string_view token;
};

// Longest tokens first, so that "RESHARD" is not read as "R" + ... and "REDUCE_GRAD" not as "R".
constexpr std::array<TypeToken, 13> kTokens{{
    {ActionType::reduce_grad, "REDUCE_GRAD"},
    {ActionType::tied_embedding_grad, "TIED_GRAD"},
    {ActionType::unshard, "UNSHARD"},
    {ActionType::reshard, "RESHARD"},
    {ActionType::send_forward, "SEND_F"},
    {ActionType::recv_forward, "RECV_F"},
    {ActionType::send_backward, "SEND_B"},
    {ActionType::recv_backward, "RECV_B"},
    {ActionType::optimizer_step, "STEP"},
    {ActionType::forward, "F"},
    {ActionType::backward, "B"},
    {ActionType::backward_input, "I"},
    {ActionType::backward_weight, "W"},
}};

std::optional<int> parse_index(std::string_view digits) {
  if (digits.empty() || digits.size() > 9) return std::nullopt;
  int value = 0;
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (error != std::errc() || end != digits.data() + digits.size()) return std::nullopt;
  return value;
}

}  // namespace

std::string_view action_type_token(ActionType type) {
  for (const TypeToken& entry : kTokens) {
    if (entry.type == type) return entry.token;
  }
  return "?";
}

bool is_compute(ActionType type) {
  return type == ActionType::forward || type == ActionType::backward ||
         type == ActionType::backward_input || type == ActionType::backward_weight;
}

bool is_backward(ActionType type) {
  return type == ActionType::backward || type == ActionType::backward_input;
}

bool has_micro_batch(ActionType type) {
  return is_compute(type) || type == ActionType::send_forward || type == ActionType::recv_forward ||
         type == ActionType::send_backward || type == ActionType::recv_backward;
}

std::string to_string(const Action& action) {
  if (action.type == ActionType::optimizer_step) return "STEP";
  std::string text = std::to_string(action.stage) + std::string(action_type_token(action.type));
  if (has_micro_batch(action.type)) text += std::to_string(action.micro_batch);
  return text;
}

std::optional<Action> parse_action(std::string_view text) {
  if (text == "STEP") return Action{ActionType::optimizer_step, -1, -1};
  std::size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  const std::optional<int> stage = parse_index(text.substr(0, digits));
  if (!stage) return std::nullopt;
  const std::string_view rest = text.substr(digits);
  for (const TypeToken& entry : kTokens) {
    if (entry.type == ActionType::optimizer_step || !rest.starts_with(entry.token)) continue;
    const std::string_view tail = rest.substr(entry.token.size());
    if (!has_micro_batch(entry.type)) {
      if (!tail.empty()) return std::nullopt;
      return Action{entry.type, *stage, -1};
    }
    const std::optional<int> micro_batch = parse_index(tail);
    if (!micro_batch) return std::nullopt;
    return Action{entry.type, *stage, *micro_batch};
  }
  return std::nullopt;
}

}  // namespace strata::schedule
