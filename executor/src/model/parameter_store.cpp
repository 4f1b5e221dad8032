#include "strata/executor/model/parameter_store.h"

#include "strata/executor/model/parameter_init.h"

namespace strata::executor {

ParameterStore::ParameterStore(std::vector<ParameterSpec> specs, ScalarType type) {
  std::int64_t total = 0;
  for (const ParameterSpec& spec : specs) total += shape_numel(spec.shape);
  values_ = Tensor::zeros({total}, type);
  gradients_ = Tensor::zeros({total}, type);
  std::int64_t offset = 0;
  for (ParameterSpec& spec : specs) {
    for (const ParameterEntry& existing : entries_) {
      STRATA_CHECK(existing.spec.name != spec.name, "parameter {} declared twice", spec.name);
    }
    const std::int64_t count = shape_numel(spec.shape);
    Tensor value = values_.view(offset, spec.shape);
    Tensor gradient = gradients_.view(offset, spec.shape);
    entries_.push_back(
        ParameterEntry{std::move(spec), offset, std::move(value), std::move(gradient)});
    offset += count;
  }
}

ParameterEntry& ParameterStore::entry(const std::string& name) {
  for (ParameterEntry& candidate : entries_) {
    if (candidate.spec.name == name) return candidate;
  }
  STRATA_CHECK(false, "no parameter named {}", name);
  return entries_.front();
}

const ParameterEntry& ParameterStore::entry(const std::string& name) const {
  return const_cast<ParameterStore*>(this)->entry(name);
}

bool ParameterStore::contains(const std::string& name) const {
  for (const ParameterEntry& candidate : entries_) {
    if (candidate.spec.name == name) return true;
  }
  return false;
}

void ParameterStore::initialize(std::uint64_t seed) {
  for (ParameterEntry& parameter : entries_) {
    initialize_elements(parameter.value, parameter.spec.init, seed, parameter.spec.name, 0);
  }
}

}  // namespace strata::executor
