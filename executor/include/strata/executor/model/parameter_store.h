// ParameterStore: a model's named parameters as views into one flat value buffer and one flat
// gradient buffer, in a fixed order. Used by the model (views per layer), the optimizer (one pass
// over the flat buffers), checkpoints (the buffers are the file) and the PyTorch reference export.
//
// A parallel run's store holds this rank's tensor-parallel slice of each parameter, as the
// parameter's placement says; ZeRO-3 (parameters) and ZeRO-2/3 (gradients) leave the flat buffers
// to the optimizer that shards them (distributed/sharded_parameters.h), which binds the entries'
// views to its own buffers as the model walks its layers.
//
// Mixed precision (the CUDA backend's bfloat16 training) adds a third flat buffer: the working
// copy of the values in the compute type, which forward and backward read, while the optimizer
// updates the float32 masters and refreshes the copy in the same pass. Gradients stay float32.
// Without a separate compute type, `compute` is the values themselves.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "strata/executor/tensor/tensor.h"
#include "strata/layout/gradient_buckets.h"
#include "strata/layout/parameter_table.h"

namespace strata::executor {

// The parameter table and placements live in layout/ (below the executor and the cost models);
// the executor names them as its own.
using layout::AxisSplit;
using layout::DimensionInterval;
using layout::ElementRun;
using layout::InitKind;
using layout::InitRule;
using layout::local_element_runs;
using layout::local_shape;
using layout::moe_mlp_parameters;
using layout::parameter_unit;
using layout::parameter_unit_count;
using layout::ParameterSpec;
using layout::Placement;
using layout::PlacementKind;
using layout::shard_intervals;
using layout::ShardSegment;
using layout::stage_parameters;
using layout::stage_units;
using layout::transformer_layer_parameters;
using layout::transformer_parameters;

// Which tensor- and expert-parallel slice of each parameter a store holds, and which flat buffers
// it owns.
struct StoreOptions {
  std::int64_t tensor_parallel_rank = 0;
  std::int64_t tensor_parallel_size = 1;
  bool own_values = true;     // false: value and compute views are bound by a ZeRO-3 owner
  bool own_gradients = true;  // false: gradient views are bound by a ZeRO-2/3 owner
  std::int64_t expert_parallel_rank = 0;
  std::int64_t expert_parallel_size = 1;
  std::int64_t expert_tensor_parallel_rank = 0;
  std::int64_t expert_tensor_parallel_size = 1;
  // The rank's place on the axes that split parameters (the parameter table's coordinates).
  layout::RankCoordinates coordinates() const {
    return {tensor_parallel_rank, tensor_parallel_size,        expert_parallel_rank,
            expert_parallel_size, expert_tensor_parallel_rank, expert_tensor_parallel_size};
  }
};

struct ParameterEntry {
  ParameterSpec spec;
  Shape shape;                   // the slice this store holds (spec.shape on one rank)
  std::vector<ElementRun> runs;  // that slice as runs of the whole parameter's elements
  std::int64_t offset = 0;       // first element in the flat buffers
  Tensor value;                  // the master value
  Tensor gradient;
  Tensor compute;  // what the model computes with: value, or its working copy
};

class ParameterStore {
 public:
  // Values and gradients in `type` on `device`; a compute_type other than `type` adds the
  // working copy.
  ParameterStore(std::vector<ParameterSpec> specs, ScalarType type, Device device = Device::cpu,
                 std::optional<ScalarType> compute_type = std::nullopt, StoreOptions options = {});
  ParameterStore(const ParameterStore&) = delete;
  ParameterStore& operator=(const ParameterStore&) = delete;

  const std::vector<ParameterEntry>& entries() const { return entries_; }
  std::vector<ParameterEntry>& entries() { return entries_; }
  // The entry of `name`; a missing name is a bug in the model that asks.
  ParameterEntry& entry(const std::string& name);
  const ParameterEntry& entry(const std::string& name) const;
  bool contains(const std::string& name) const;
  std::vector<ParameterSpec> specs() const;
  const StoreOptions& options() const { return options_; }
  ScalarType scalar_type() const { return type_; }

  Device device() const { return device_; }
  ScalarType compute_type() const { return compute_values_.scalar_type(); }
  bool has_working_copy() const { return compute_values_.raw() != values_.raw(); }
  // The working copy's flat buffer (the values themselves without one).
  Tensor& compute_values() { return compute_values_; }
  // Rounds the values into the working copy: after anything but the optimizer writes them.
  void refresh_compute_values();

  Tensor& values() { return values_; }
  const Tensor& values() const { return values_; }
  Tensor& gradients() { return gradients_; }
  const Tensor& gradients() const { return gradients_; }
  // Elements of the slices this store holds (whether or not it owns their buffers).
  std::int64_t total_elements() const { return total_elements_; }
  void zero_gradients() { gradients_.fill_zero(); }
  // Frees the gradient buffer and its views: a store leaving a run (a layout switch keeps its
  // values for the transfer and nothing else). No backward may run on it after.
  void release_gradients();

  // Sets every value from its init rule: element i of parameter P is a pure function of
  // (seed, P's name, i) (see parameter_init.h), so any shard can be made on its own. Drawn in
  // host memory (on all cores) and copied to the device. Needs own_values.
  void initialize(std::uint64_t seed);

 private:
  StoreOptions options_;
  ScalarType type_;
  Device device_;
  std::int64_t total_elements_ = 0;
  std::vector<ParameterEntry> entries_;
  Tensor values_;
  Tensor gradients_;
  Tensor compute_values_;
};

}  // namespace strata::executor
