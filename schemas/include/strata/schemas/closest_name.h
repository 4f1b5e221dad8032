// closest_name: the "did you mean" suggestion for a mistyped key, enum value or preset name.
// Used by ObjectReader and by the preset lookup.
#pragma once

#include <optional>
#include <span>
#include <string_view>

namespace strata::schemas {

// The candidate nearest to `typo` by edit distance (insert, delete, substitute, swap adjacent,
// ignoring case), if it is close enough to be a plausible typo: at most a third of the longer
// name's length (rounded down) and at most 3 edits.
std::optional<std::string_view> closest_name(std::string_view typo,
                                             std::span<const std::string_view> candidates);

}  // namespace strata::schemas
