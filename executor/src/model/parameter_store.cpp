#include "strata/executor/model/parameter_store.h"

#include "strata/executor/model/parameter_init.h"
#include "strata/executor/ops/convert.h"

namespace strata::executor {

ParameterStore::ParameterStore(std::vector<ParameterSpec> specs, ScalarType type, Device device,
                               std::optional<ScalarType> compute_type, StoreOptions options)
    : options_(options), type_(type), device_(device) {
  // The groups that split a parameter (the parameter table's rule for this rank's coordinates).
  const layout::RankCoordinates coordinates = options.coordinates();
  const auto splits_of = [&coordinates](const ParameterSpec& spec) {
    return layout::rank_splits(spec, coordinates);
  };
  std::vector<Shape> shapes;
  for (const ParameterSpec& spec : specs) {
    shapes.push_back(local_shape(spec.shape, splits_of(spec)));
    total_elements_ += shape_numel(shapes.back());
  }
  const ScalarType working_type = compute_type.value_or(type);
  if (options.own_values) {
    values_ = Tensor::zeros({total_elements_}, type, device);
    compute_values_ =
        working_type != type ? Tensor::zeros({total_elements_}, working_type, device) : values_;
  }
  if (options.own_gradients) gradients_ = Tensor::zeros({total_elements_}, type, device);
  std::int64_t offset = 0;
  for (std::size_t i = 0; i < specs.size(); ++i) {
    ParameterSpec& spec = specs[i];
    for (const ParameterEntry& existing : entries_) {
      STRATA_CHECK(existing.spec.name != spec.name, "parameter {} declared twice", spec.name);
    }
    ParameterEntry entry;
    entry.runs = local_element_runs(spec.shape, splits_of(spec));
    entry.shape = shapes[i];
    entry.offset = offset;
    if (options.own_values) {
      entry.value = values_.view(offset, entry.shape);
      entry.compute = compute_values_.view(offset, entry.shape);
    }
    if (options.own_gradients) entry.gradient = gradients_.view(offset, entry.shape);
    entry.spec = std::move(spec);
    offset += shape_numel(entry.shape);
    entries_.push_back(std::move(entry));
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
  STRATA_CHECK(options_.own_values, "a store whose values a ZeRO-3 owner holds initialises there");
  Tensor host = device() == Device::cpu
                    ? values_
                    : Tensor::zeros(values_.shape(), values_.scalar_type(), Device::cpu);
  for (ParameterEntry& parameter : entries_) {
    initialize_slice(host, parameter.offset, parameter, 0, shape_numel(parameter.shape), seed);
  }
  if (host.raw() != values_.raw()) values_.copy_from(host);
  refresh_compute_values();
}

void ParameterStore::refresh_compute_values() {
  if (has_working_copy()) convert(values_, compute_values_);
}

void ParameterStore::release_gradients() {
  gradients_ = Tensor();
  for (ParameterEntry& entry : entries_) entry.gradient = Tensor();
}

}  // namespace strata::executor
