// ClusterConfig: the cluster file format (kind "cluster") — nodes, a GPU profile, network tiers
// and the memory a framework reserves. Read by the cost models, the simulator and the planner.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "strata/schemas/dtype.h"
#include "strata/schemas/enum_names.h"
#include "strata/schemas/json_location.h"

namespace strata::schemas {

inline constexpr int kClusterSchemaVersion = 1;
inline constexpr std::int64_t kMaxNodes = 1 << 16;
inline constexpr std::int64_t kMaxGpusPerNode = 1024;

// One point of a measured efficiency curve: at `size` (FLOPs of one GEMM, or bytes of one
// transfer) the hardware achieves `fraction` of its peak. Cost models interpolate between points.
struct EfficiencyPoint {
  double size = 0;
  double fraction = 1;
  bool operator==(const EfficiencyPoint&) const = default;
};

// One GPU. Units: bytes (B), TFLOP/s = 1e12 FLOP/s, GB/s = 1e9 B/s.
// GEMMs priced by their output tiles (costmodels/kernel_time.h) rather than by a curve indexed by
// FLOPs: the output is cut into rows × columns tiles (whichever orientation takes fewer waves),
// the tiles run on the SMs in waves, each costs 2·rows·columns·(k + k_overhead) FLOPs at
// `efficiency` of one SM's share of the peak — k_overhead is the tile's prologue and epilogue in
// units of reduction depth — and the kernel `fixed_us` on top. Measured GEMMs in isolation fix
// the shape (tile, k_overhead, fixed_us); `efficiency` is what they reach inside a training step.
struct GemmTileModel {
  double rows = 0;
  double columns = 0;
  double k_overhead = 0;
  double fixed_us = 0;
  double efficiency = 0;
  bool operator==(const GemmTileModel&) const = default;
};

struct GpuProfile {
  std::string name;
  std::optional<std::string> description;  // where the numbers come from
  std::int64_t memory_bytes = 0;
  std::map<Dtype, double> peak_dense_tflops;  // tensor-core peak without sparsity, per dtype
  double hbm_bandwidth_gb_per_s = 0;
  std::vector<EfficiencyPoint> gemm_efficiency_by_flops;  // achieved fraction of peak
  // Where present, GEMMs are priced by tiles and the FLOPs curve is not used for them (it still
  // prices unfused attention where no efficiency of its own is given). Needs the SM count.
  std::optional<GemmTileModel> gemm_tiles;
  std::vector<EfficiencyPoint> hbm_efficiency_by_bytes;  // achieved fraction of HBM bandwidth
  // GEMM tiles are spread over the SMs in waves; a partial last wave costs a whole one. Absent:
  // no wave quantization.
  std::optional<std::int64_t> streaming_multiprocessors;
  // Flash attention (costmodels/attention_time.h): the fraction of the tensor-core peak its
  // matrix products reach (absent: the GEMM curve's), and the special-function units' rate for
  // its exponentials, in T exp/s (absent: free).
  std::optional<double> attention_efficiency;
  // The same for attention under context parallelism, which runs chunk by chunk of the sequence
  // (the ring's or the all-gather's blocks of seq / 2·cp keys, each its own kernel call): shorter
  // products than one whole-sequence kernel, a measured profile's own rate. Absent: the
  // whole-sequence efficiency.
  std::optional<double> context_parallel_attention_efficiency;
  std::optional<double> special_function_tops;
  // Counter-based random numbers per second (dropout's keep decisions, regenerated in the
  // backward rather than stored), in units of 10^12: where a CPU spends dropout's time. Absent:
  // free, as on a GPU, where generating them hides under the kernel's memory traffic.
  std::optional<double> random_number_tops;
  // GEMMs in a dtype reach this fraction of the GEMM curve's efficiency (the curve is fitted to
  // 16-bit and per-tensor fp8 GEMMs): block-scaled formats load and apply their scales, and their
  // kernels are younger. Absent for a dtype: 1.
  std::map<Dtype, double> gemm_dtype_efficiency;
  // A GEMM with a dimension that is not a multiple of 16 bytes of elements (an unpadded
  // vocabulary of 50,257) misses the tensor-core kernels' vectorised loads: its efficiency is the
  // curve's times this (costmodels/kernel_time.h). Absent: 1. Measured by strata profile.
  std::optional<double> unaligned_gemm_efficiency;
  // Unfused attention (QKᵀ, softmax, dropout, PV as separate kernels over the whole s×s scores):
  // achieved fraction of peak on its causal FLOPs (absent: the GEMM curve's).
  std::optional<double> unfused_attention_efficiency;
  // The shortest a kernel can take, in µs: launching it (the host's launch rate, the framework's
  // dispatch). Small models at small micro-batches run kernels shorter than this (absent: none).
  std::optional<double> kernel_launch_us;
  // Host time, in µs, an eager PyTorch training loop spends issuing one kernel or collective on
  // this machine: Python layer code, the dispatcher, autograd and the launch, averaged over a
  // whole step (bench/gpu/small_kernel_probe.py measures it). The stacks that issue eagerly
  // (costmodels/framework_behaviour.h) pay it: a pass takes the longer of its kernels' device
  // time and their issue. Absent: the host is never the bound.
  std::optional<double> eager_issue_us_per_kernel;
  // Compute runs this fraction slower while a collective overlaps it (NCCL takes SMs and HBM).
  double compute_slowdown_under_communication = 0;
  bool operator==(const GpuProfile&) const = default;
};

// The precision a plan trains in when the user names none: bf16 where the GPU has a bf16 peak
// (mixed-precision training's norm), otherwise the narrowest of fp16, tf32, fp32 it lists. A CPU
// profile lists only fp32, so `strata plan --cluster cpu-local:4` plans in fp32.
Dtype default_training_precision(const GpuProfile& gpu);

// The collectives a tier may carry its own measured efficiency curve for. The non-blocking
// all-reduce is the gradient buckets' (MPI_Iallreduce): Open MPI runs it through another
// component than the blocking one (libnbc), at its own speed.
enum class TierCollective {
  all_reduce,
  all_gather,
  reduce_scatter,
  send_receive,
  all_reduce_non_blocking
};
inline constexpr std::array<EnumName<TierCollective>, 5> kTierCollectiveNames{
    {{TierCollective::all_reduce, "all_reduce"},
     {TierCollective::all_gather, "all_gather"},
     {TierCollective::reduce_scatter, "reduce_scatter"},
     {TierCollective::send_receive, "send_receive"},
     {TierCollective::all_reduce_non_blocking, "all_reduce_non_blocking"}}};

// The communicator's operations a cluster file states temporary memory for: the collectives as
// the tiers time them (blocking), and the non-blocking all-reduce that data-parallel gradient
// buckets overlap with the backward (Open MPI runs it through another component than the
// blocking one, which allocates differently).
enum class CommunicatorOperation {
  all_reduce,
  all_reduce_non_blocking,
  all_gather,
  reduce_scatter,
  send_receive
};
inline constexpr std::array<EnumName<CommunicatorOperation>, 5> kCommunicatorOperationNames{
    {{CommunicatorOperation::all_reduce, "all_reduce"},
     {CommunicatorOperation::all_reduce_non_blocking, "all_reduce_non_blocking"},
     {CommunicatorOperation::all_gather, "all_gather"},
     {CommunicatorOperation::reduce_scatter, "reduce_scatter"},
     {CommunicatorOperation::send_receive, "send_receive"}}};

// A level of the interconnect, from the inside out: tier 0 is e.g. the NVLink domain, tier 1 the
// inter-node fabric. A tier connects groups of `scope_gpus` consecutive ranks; tiers nest.
// One of the communication library's wire protocols on a tier (NCCL's LL, LL128 and Simple):
// each trades start-up latency for bandwidth, and the library picks, per call, the protocol and
// algorithm (ring or tree) that finish first. A collective with a protocol costs its base latency
// once, its hop latency per ring step (or per tree level), and its volume over the tier's bus
// bandwidth times the protocol's fraction, at most `max_bus_gb_per_s` (LL's flags halve what a
// link carries and cap it).
struct TierProtocol {
  std::string name;
  double base_latency_us = 0;
  double ring_hop_latency_us = 0;
  double tree_hop_latency_us = 0;
  double bandwidth_fraction = 1;
  std::optional<double> max_bus_gb_per_s;
  bool operator==(const TierProtocol&) const = default;
};

struct NetworkTier {
  std::string name;
  std::int64_t scope_gpus = 0;
  double bandwidth_gb_per_s = 0;  // per GPU, per direction
  double latency_us = 0;          // one message's start-up time
  double efficiency = 1;          // achieved fraction of bandwidth for large messages
  std::vector<EfficiencyPoint> efficiency_by_message_bytes;
  // Measured per collective (strata profile): where the communicator's algorithms differ from
  // one another — MPI on a CPU sums on the host, and its reduce-scatter runs 2–4× slower than
  // its all-gather per byte of bus volume — one curve per collective replaces the tier's curve
  // for it. Absent for a collective: the tier's curve (NCCL's ring/tree conventions hold).
  std::map<TierCollective, std::vector<EfficiencyPoint>> efficiency_by_collective;
  // The protocols collectives may use here (costmodels/collective_time.h). Absent: every step of
  // a ring or tree pays `latency_us`, at the tier's bandwidth, as one protocol would.
  std::vector<TierProtocol> protocols;
  bool operator==(const NetworkTier&) const = default;
};

// Memory on each GPU that the model cannot use.
struct ReservedMemory {
  std::int64_t cuda_context_bytes = 0;  // CUDA context, cuBLAS workspaces, kernels
  std::int64_t nccl_buffers_bytes = 0;  // NCCL's communicator buffers
  double allocator_slack_fraction = 0;  // caching-allocator fragmentation, of the GPU's memory
  bool operator==(const ReservedMemory&) const = default;
};

// How a cluster file's numbers were obtained when `strata profile` measured them (presets are
// datasheet values and carry none): what measured, when, with which command, on which hosts and
// backend, and how much each measured quantity varied between repeats (relative half-range).
struct MeasuredSources {
  std::string measured_by;  // "strata profile <version>"
  std::string date;         // ISO 8601, UTC
  std::string command;
  std::vector<std::string> hosts;
  std::string backend;  // "cpu" or "cuda"
  std::int64_t ranks = 1;
  std::int64_t threads_per_rank = 1;
  double duration_s = 0;
  std::map<std::string, double> spread;
  bool operator==(const MeasuredSources&) const = default;
};

struct ClusterConfig {
  std::string name;
  std::optional<std::string> description;
  std::optional<MeasuredSources> sources;
  std::int64_t nodes = 1;
  std::int64_t gpus_per_node = 1;
  GpuProfile gpu;
  std::vector<NetworkTier> network_tiers;
  ReservedMemory reserved_memory;
  // Bytes the communicator allocates per byte of a message and holds until that operation
  // completes: Open MPI's non-blocking all-reduce copies its whole buffer, its blocking one half,
  // NCCL allocates nothing per call. Measured by strata profile; an operation absent holds
  // nothing.
  std::map<CommunicatorOperation, double> communicator_temporary_bytes_per_byte;
  // The share of a non-blocking collective's time that it advances while its rank computes: 1
  // where it runs beside the compute (NCCL's kernels on their own SMs), 0 where it moves only
  // once the rank waits for it (Open MPI on a rank without a progress thread). What a gradient
  // bucket's all-reduce issued during the backward can hide. Measured by strata profile; absent:
  // 1.
  std::optional<double> communicator_progress_during_compute;

  std::int64_t world_size() const { return nodes * gpus_per_node; }
  std::int64_t reserved_bytes() const;
  std::int64_t usable_memory_bytes() const { return gpu.memory_bytes - reserved_bytes(); }
  // communicator_temporary_bytes_per_byte of `operation`, 0 where absent.
  double communicator_temporary_ratio(CommunicatorOperation operation) const;
  bool operator==(const ClusterConfig&) const = default;
};

ClusterConfig parse_cluster(const nlohmann::json& document, const JsonLocation& location);
nlohmann::json cluster_to_json(const ClusterConfig& cluster);
// Tiers nest from the inside out and the outermost connects every GPU; the reserve fits.
void validate_cluster(const ClusterConfig& cluster, const JsonLocation& location);

}  // namespace strata::schemas
