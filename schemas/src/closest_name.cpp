#include "strata/schemas/closest_name.h"

#include <algorithm>
#include <cctype>
#include <vector>

namespace strata::schemas {
namespace {

char fold_case(char c) { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); }

// Optimal string alignment distance (Damerau-Levenshtein without repeated edits of a substring).
std::size_t edit_distance(std::string_view a, std::string_view b) {
  const std::size_t rows = a.size() + 1;
  const std::size_t cols = b.size() + 1;
  std::vector<std::size_t> d(rows * cols);
  auto at = [&](std::size_t i, std::size_t j) -> std::size_t& { return d[i * cols + j]; };
  for (std::size_t i = 0; i < rows; ++i) at(i, 0) = i;
  for (std::size_t j = 0; j < cols; ++j) at(0, j) = j;
  for (std::size_t i = 1; i < rows; ++i) {
    for (std::size_t j = 1; j < cols; ++j) {
      const std::size_t substitution = fold_case(a[i - 1]) == fold_case(b[j - 1]) ? 0 : 1;
      at(i, j) = std::min({at(i - 1, j) + 1, at(i, j - 1) + 1, at(i - 1, j - 1) + substitution});
      if (i > 1 && j > 1 && fold_case(a[i - 1]) == fold_case(b[j - 2]) &&
          fold_case(a[i - 2]) == fold_case(b[j - 1])) {
        at(i, j) = std::min(at(i, j), at(i - 2, j - 2) + 1);
      }
    }
  }
  return at(rows - 1, cols - 1);
}

std::size_t common_prefix(std::string_view a, std::string_view b) {
  std::size_t length = 0;
  while (length < a.size() && length < b.size() && fold_case(a[length]) == fold_case(b[length])) {
    ++length;
  }
  return length;
}

}  // namespace

std::optional<std::string_view> closest_name(std::string_view typo,
                                             std::span<const std::string_view> candidates) {
  std::optional<std::string_view> best;
  std::size_t best_distance = 0;
  for (std::string_view candidate : candidates) {
    const std::size_t distance = edit_distance(typo, candidate);
    // Two-letter names ("ep" vs "tp") are too short for a one-letter difference to be a typo.
    const std::size_t allowed =
        std::min<std::size_t>(std::max(typo.size(), candidate.size()) / 3, 3);
    // Ties go to the longer common prefix: "llama3-8b" means "llama3.1-8b", not "llama2-7b".
    const bool better =
        !best || distance < best_distance ||
        (distance == best_distance && common_prefix(typo, candidate) > common_prefix(typo, *best));
    if (distance <= allowed && better) {
      best = candidate;
      best_distance = distance;
    }
  }
  return best;
}

}  // namespace strata::schemas
