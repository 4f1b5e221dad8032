#include "strata/executor/model/parameter_store.h"

#include "strata/executor/model/parameter_init.h"
#include "strata/executor/ops/convert.h"

namespace strata::executor {

ParameterStore::ParameterStore(std::vector<ParameterSpec> specs, ScalarType type, Device device,
                               std::optional<ScalarType> compute_type) {
  std::int64_t total = 0;
  for (const ParameterSpec& spec : specs) total += shape_numel(spec.shape);
  values_ = Tensor::zeros({total}, type, device);
  gradients_ = Tensor::zeros({total}, type, device);
  compute_values_ = compute_type && *compute_type != type
                        ? Tensor::zeros({total}, *compute_type, device)
                        : values_;
  std::int64_t offset = 0;
  for (ParameterSpec& spec : specs) {
    for (const ParameterEntry& existing : entries_) {
      STRATA_CHECK(existing.spec.name != spec.name, "parameter {} declared twice", spec.name);
    }
    const std::int64_t count = shape_numel(spec.shape);
    Tensor value = values_.view(offset, spec.shape);
    Tensor gradient = gradients_.view(offset, spec.shape);
    Tensor compute = compute_values_.view(offset, spec.shape);
    entries_.push_back(ParameterEntry{std::move(spec), offset, std::move(value),
                                      std::move(gradient), std::move(compute)});
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

std::vector<ParameterSpec> ParameterStore::specs() const {
  std::vector<ParameterSpec> specs;
  specs.reserve(entries_.size());
  for (const ParameterEntry& entry : entries_) specs.push_back(entry.spec);
  return specs;
}

bool ParameterStore::contains(const std::string& name) const {
  for (const ParameterEntry& candidate : entries_) {
    if (candidate.spec.name == name) return true;
  }
  return false;
}

void ParameterStore::initialize(std::uint64_t seed) {
  Tensor host = device() == Device::cpu
                    ? values_
                    : Tensor::zeros(values_.shape(), values_.scalar_type(), Device::cpu);
  for (ParameterEntry& parameter : entries_) {
    Tensor shard = host.view(parameter.offset, parameter.spec.shape);
    initialize_elements(shard, parameter.spec.init, seed, parameter.spec.name, 0);
  }
  if (host.raw() != values_.raw()) values_.copy_from(host);
  refresh_compute_values();
}

void ParameterStore::refresh_compute_values() {
  if (has_working_copy()) convert(values_, compute_values_);
}

}  // namespace strata::executor
