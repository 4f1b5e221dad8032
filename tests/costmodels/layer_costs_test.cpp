#include "strata/costmodels/layer_costs.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <string>
#include <utility>

#include "gpt3_layer_plan.h"
#include "strata/costmodels/activation_memory.h"
#include "strata/costmodels/attention_time.h"
#include "strata/costmodels/kernel_time.h"
#include "strata/schemas/plan_builder.h"
#include "strata/schemas/presets.h"

namespace strata::costmodels {
namespace {

using strata::testing::gpt3_plan;

// One GPT-3 175B layer (h = 12288, 96 heads of 128) on 2048 tokens, forward:
//   GEMMs 24·s·h² = 24 × 2048 × 12288² = 7.421703487488e12 FLOP (QKV 6sh², projection 2sh²,
//   MLP 16sh²), causal attention 2·s²·h = 2 × 2048² × 12288 = 1.03079215104e11 FLOP
//   (QKᵀ and AV at 2·s²·h each, half of the score matrix skipped).
TEST(LayerCosts, Gpt3LayerForwardFlops) {
  const schemas::Plan plan = gpt3_plan(1, false);
  const PassCosts costs =
      transformer_layer_costs(layer_context(plan), schemas::RecomputeGranularity::none);
  EXPECT_DOUBLE_EQ(costs.forward_flops, 7.421703487488e12 + 1.03079215104e11);
  // Split over tp = 8, each rank does an eighth.
  const schemas::Plan split = gpt3_plan(8, false);
  EXPECT_DOUBLE_EQ(
      transformer_layer_costs(layer_context(split), schemas::RecomputeGranularity::none)
          .forward_flops,
      (7.421703487488e12 + 1.03079215104e11) / 8);
}

TEST(LayerCosts, BackwardSplitsIntoInputAndWeightGradients) {
  const schemas::Plan plan = gpt3_plan(8, true);
  const LayerContext context = layer_context(plan);
  const PassCosts none = transformer_layer_costs(context, schemas::RecomputeGranularity::none);
  // Both gradient GEMMs repeat the forward's FLOPs; W has no communication and no attention.
  EXPECT_GT(none.backward_input.compute_s, none.backward_weight.compute_s);
  EXPECT_EQ(none.backward_weight.tp_comm_s, 0);
  EXPECT_GT(none.forward.tp_comm_s, 0);
  EXPECT_EQ(none.recompute.total_s(), 0);
  const PassCosts full = transformer_layer_costs(context, schemas::RecomputeGranularity::full);
  EXPECT_DOUBLE_EQ(full.recompute.total_s(), full.forward.total_s());
  const PassCosts selective =
      transformer_layer_costs(context, schemas::RecomputeGranularity::selective);
  EXPECT_GT(selective.recompute.total_s(), 0);
  EXPECT_LT(selective.recompute.total_s(), 0.2 * full.recompute.total_s());
}

// bf16 keeps fp32 main gradients: each weight-gradient GEMM reads and writes a 4-byte accumulator
// per weight where fp16's is 2 bytes, 4 more bytes per weight per micro-batch. On an A100 (same
// 16-bit peak for both) only the weight gradient changes, by those bytes over HBM for each of
// the layer's GEMMs at tp = 8: QKV 12288 × 4608, projection 1536 × 12288, fc1 12288 × 6144,
// fc2 6144 × 12288 weights (12·h²/8 in all).
TEST(LayerCosts, Fp32GradientAccumulatorsSlowOnlyTheWeightGradient) {
  const PassCosts fp16 = transformer_layer_costs(
      layer_context(gpt3_plan(8, true, schemas::Dtype::fp16)), schemas::RecomputeGranularity::none);
  const schemas::Plan bf16_plan = gpt3_plan(8, true, schemas::Dtype::bf16);
  const PassCosts bf16 =
      transformer_layer_costs(layer_context(bf16_plan), schemas::RecomputeGranularity::none);
  EXPECT_DOUBLE_EQ(bf16.forward.compute_s, fp16.forward.compute_s);
  EXPECT_DOUBLE_EQ(bf16.backward_input.compute_s, fp16.backward_input.compute_s);
  const schemas::GpuProfile& gpu = bf16_plan.cluster.gpu;
  const double extra_s =
      memory_bound_time_s(gpu, 4.0 * 12288 * 4608) + memory_bound_time_s(gpu, 4.0 * 1536 * 12288) +
      memory_bound_time_s(gpu, 4.0 * 12288 * 6144) + memory_bound_time_s(gpu, 4.0 * 6144 * 12288);
  EXPECT_NEAR(bf16.backward_weight.compute_s - fp16.backward_weight.compute_s, extra_s, 1e-12);
  EXPECT_GT(extra_s, 0.05 * fp16.backward_weight.compute_s);  // not lost in rounding
  // Gradients accumulated in bf16 (the plan's gradient_dtype) are as narrow as fp16's.
  schemas::Plan bf16_gradients_plan = bf16_plan;
  bf16_gradients_plan.gradient_dtype = schemas::Dtype::bf16;
  const PassCosts bf16_gradients = transformer_layer_costs(layer_context(bf16_gradients_plan),
                                                           schemas::RecomputeGranularity::none);
  EXPECT_DOUBLE_EQ(bf16_gradients.backward_weight.compute_s, fp16.backward_weight.compute_s);
}

// A GPT-3 175B layer at tp = 8 with sequence parallelism priced without and with
// tp_comm_overlap, and its two tp collectives of the 2048 × 12288 16-bit activations.
struct TpOverlapCase {
  schemas::Plan plan;
  PassCosts exposed;
  PassCosts overlapped;
  double gather = 0;
  double scatter = 0;
};

TpOverlapCase tp_overlap_case(schemas::Plan plan) {
  TpOverlapCase result;
  result.exposed =
      transformer_layer_costs(layer_context(plan), schemas::RecomputeGranularity::none);
  plan.tp_comm_overlap = true;
  const LayerContext context = layer_context(plan);
  result.overlapped = transformer_layer_costs(context, schemas::RecomputeGranularity::none);
  const double bytes = 2048.0 * 12288 * 2;
  result.gather = collective_time_s(plan.cluster, context.tp_span, Collective::all_gather, bytes);
  result.scatter =
      collective_time_s(plan.cluster, context.tp_span, Collective::reduce_scatter, bytes);
  result.plan = std::move(plan);
  return result;
}

// tp_comm_overlap: each of the forward's four GEMMs at tp = 8 with sequence parallelism is
// paired with one collective of the layer's 2048 × 12288 fp16 activations (all-gathers feed qkv
// and fc1, reduce-scatters drain the projection and fc2). A pair costs max(GEMM × (1 + σ),
// collective) + min(GEMM, collective) / 8, where σ = 0.1 is the A100 profile's slowdown of
// compute under communication; the pass's tp time is what that adds to the GEMMs. (The A100's
// GEMMs are priced by a FLOPs curve, so each keeps its whole time; see the next test.)
TEST(LayerCosts, OverlappedTpCommunicationShowsOnlyWhatTheGemmsDoNotCover) {
  const auto [plan, exposed, overlapped, gather, scatter] = tp_overlap_case(gpt3_plan(8, true));
  const schemas::GpuProfile& gpu = plan.cluster.gpu;
  const double gemms[4] = {
      gemm_time_s(gpu, plan.precision, 2048, 4608, 12288),   // qkv: 3 × 12288 / 8 columns
      gemm_time_s(gpu, plan.precision, 2048, 12288, 1536),   // projection
      gemm_time_s(gpu, plan.precision, 2048, 6144, 12288),   // fc1: 4 × 12288 / 8
      gemm_time_s(gpu, plan.precision, 2048, 12288, 6144)};  // fc2
  double expected = 0;
  for (int i = 0; i < 4; ++i) {
    const double comm = i % 2 == 0 ? gather : scatter;
    expected += std::max(gemms[i] * 1.1, comm) + std::min(gemms[i], comm) / 8 - gemms[i];
  }
  EXPECT_NEAR(overlapped.forward.tp_comm_s, expected, 1e-12);
  EXPECT_DOUBLE_EQ(exposed.forward.tp_comm_s, 2 * (gather + scatter));  // on the critical path
  // Here the GEMMs are longer than the collectives: what shows is mostly the GEMMs' slowdown.
  EXPECT_LT(overlapped.forward.tp_comm_s, 0.8 * exposed.forward.tp_comm_s);
  EXPECT_LT(overlapped.backward_input.tp_comm_s, 0.8 * exposed.backward_input.tp_comm_s);
  EXPECT_DOUBLE_EQ(overlapped.forward.compute_s, exposed.forward.compute_s);
}

// Where GEMMs are priced by their tiles (the H100 preset), the overlap runs each paired GEMM as tp
// chunks of 2048 / 8 = 256 tokens: a pair costs max(8·chunk × (1 + σ), collective) + min(8·chunk,
// collective) / 8, and the tp time is what that adds to the whole GEMM — the chunks' lost waves
// included. The compute stays the whole GEMMs'.
TEST(LayerCosts, OverlappedGemmsRunInTpChunksWhereTilesPriceThem) {
  const auto [plan, exposed, overlapped, gather, scatter] =
      tp_overlap_case(gpt3_plan(8, true, schemas::Dtype::bf16, "dgx-h100"));
  const schemas::GpuProfile& gpu = plan.cluster.gpu;
  ASSERT_TRUE(gpu.gemm_tiles.has_value());
  const double columns[4][2] = {{4608, 12288}, {12288, 1536}, {6144, 12288}, {12288, 6144}};
  double expected = 0;
  double chunking = 0;
  for (int i = 0; i < 4; ++i) {
    const double whole = gemm_time_s(gpu, plan.precision, 2048, columns[i][0], columns[i][1]);
    const double chunked = 8 * gemm_time_s(gpu, plan.precision, 256, columns[i][0], columns[i][1]);
    const double comm = i % 2 == 0 ? gather : scatter;
    expected += std::max(chunked * 1.1, comm) + std::min(chunked, comm) / 8 - whole;
    chunking += chunked - whole;
  }
  EXPECT_NEAR(overlapped.forward.tp_comm_s, expected, 1e-12);
  EXPECT_GT(chunking, 0.05 * exposed.forward.tp_comm_s);  // the chunks cost something here
  EXPECT_DOUBLE_EQ(overlapped.forward.compute_s, exposed.forward.compute_s);
}

// fp8 on an H100 (GPT-3 175B layer, tp = 8 with sequence parallelism, 2,048 tokens; HBM at its
// full 3,350 GB/s so bytes add): the four layer GEMMs run at the fp8 peak, and the casts add
//   forward   the transposed fp8 copies of the qkv and fc1 inputs, 2 × 2048 × 12288 × 1 byte,
//             and the cast-transposes of the projection's and fc2's inputs, 2048 × (1536 + 6144)
//             × 4 bytes: 113,246,208 bytes;
//   backward  the cast-transposes of the four output gradients, 2048 × (4608 + 12288 + 6144 +
//             12288) × 4 bytes: 289,406,976 bytes.
// The LM head stays a 16-bit GEMM.
// One GPT-3 175B layer at tp 8 with sequence parallelism over 2,048 tokens on `cluster`, in
// `precision`, with HBM at its full bandwidth so that bytes add.
schemas::Plan gpt3_layer_plan(const std::string& cluster, schemas::Dtype precision) {
  schemas::Plan plan = gpt3_plan(8, true, precision, cluster);
  plan.cluster.gpu.hbm_efficiency_by_bytes.clear();
  return plan;
}

TEST(LayerCosts, Fp8RunsTheLayerGemmsInFp8AndPaysForTheCasts) {
  const auto h100_plan = [](schemas::Dtype precision) {
    return gpt3_layer_plan("dgx-h100", precision);
  };
  const schemas::Plan bf16_plan = h100_plan(schemas::Dtype::bf16);
  const schemas::Plan fp8_plan = h100_plan(schemas::Dtype::fp8);
  const LayerContext bf16_context = layer_context(bf16_plan);
  const LayerContext fp8_context = layer_context(fp8_plan);
  const PassCosts bf16 = transformer_layer_costs(bf16_context, schemas::RecomputeGranularity::none);
  const PassCosts fp8 = transformer_layer_costs(fp8_context, schemas::RecomputeGranularity::none);
  const schemas::GpuProfile& gpu = fp8_plan.cluster.gpu;
  const double shapes[4][3] = {
      {2048, 4608, 12288}, {2048, 12288, 1536}, {2048, 6144, 12288}, {2048, 12288, 6144}};
  double forward_gemms = 0;
  double input_gemms = 0;
  for (const auto& shape : shapes) {
    for (schemas::Dtype dtype : {schemas::Dtype::fp8, schemas::Dtype::bf16}) {
      const double sign = dtype == schemas::Dtype::fp8 ? 1 : -1;
      forward_gemms += sign * gemm_time_s(gpu, dtype, shape[0], shape[1], shape[2]);
      input_gemms += sign * gemm_time_s(gpu, dtype, shape[0], shape[2], shape[1]);
    }
  }
  EXPECT_NEAR(fp8.forward.compute_s - bf16.forward.compute_s, forward_gemms + 113246208.0 / 3350e9,
              1e-12);
  EXPECT_NEAR(fp8.backward_input.compute_s - bf16.backward_input.compute_s,
              input_gemms + 289406976.0 / 3350e9, 1e-12);
  EXPECT_LT(fp8.forward.compute_s, 0.7 * bf16.forward.compute_s);  // still much faster
  EXPECT_DOUBLE_EQ(lm_head_costs(fp8_context).forward.compute_s,
                   lm_head_costs(bf16_context).forward.compute_s);
}

// Block-scaled formats on a B200 (the same layer): the GEMMs run at the format's peak times the
// GPU's gemm_dtype_efficiency, and each cast writes q bytes per element with the scales (q =
// 1 + 1/32 for mxfp8, 1/2 + 1/16 for nvfp4), so a cast-transpose moves 2 + 2q:
//   mxfp8 forward  2 × 2048 × 12288 × 1.03125 + 2048 × 7680 × 4.0625 = 115,802,112 bytes,
//         backward 2048 × 35328 × 4.0625 = 293,928,960 bytes;
//   nvfp4 forward  2 × 2048 × 12288 × 0.5625 + 2048 × 7680 × 3.125 = 77,463,552 bytes,
//         backward 2048 × 35328 × 3.125 = 226,099,200 bytes.
// Attention and the LM head stay in bf16. (HBM at its full 8,000 GB/s, no launch floor.)
TEST(LayerCosts, BlockScaledFormatsPayTheirScalesAndTheirGemmEfficiency) {
  const auto b200_plan = [](schemas::Dtype precision) {
    schemas::Plan plan = gpt3_layer_plan("dgx-b200", precision);
    // Bytes add only above the launch floor, which 8 TB/s would otherwise reach here.
    plan.cluster.gpu.kernel_launch_us.reset();
    return plan;
  };
  const schemas::Plan bf16_plan = b200_plan(schemas::Dtype::bf16);
  const PassCosts bf16 =
      transformer_layer_costs(layer_context(bf16_plan), schemas::RecomputeGranularity::none);
  const double shapes[4][3] = {
      {2048, 4608, 12288}, {2048, 12288, 1536}, {2048, 6144, 12288}, {2048, 12288, 6144}};
  struct Case {
    schemas::Dtype dtype;
    double forward_bytes;
    double backward_bytes;
  };
  for (const Case& c : {Case{schemas::Dtype::mxfp8, 115802112.0, 293928960.0},
                        Case{schemas::Dtype::nvfp4, 77463552.0, 226099200.0}}) {
    const schemas::Plan plan = b200_plan(c.dtype);
    const schemas::GpuProfile& gpu = plan.cluster.gpu;
    ASSERT_TRUE(gpu.gemm_dtype_efficiency.contains(c.dtype));
    const LayerContext context = layer_context(plan);
    const PassCosts costs = transformer_layer_costs(context, schemas::RecomputeGranularity::none);
    double forward_gemms = 0;
    double input_gemms = 0;
    for (const auto& shape : shapes) {
      forward_gemms += gemm_time_s(gpu, c.dtype, shape[0], shape[1], shape[2]) -
                       gemm_time_s(gpu, schemas::Dtype::bf16, shape[0], shape[1], shape[2]);
      input_gemms += gemm_time_s(gpu, c.dtype, shape[0], shape[2], shape[1]) -
                     gemm_time_s(gpu, schemas::Dtype::bf16, shape[0], shape[2], shape[1]);
    }
    EXPECT_NEAR(costs.forward.compute_s - bf16.forward.compute_s,
                forward_gemms + c.forward_bytes / 8000e9, 1e-12);
    EXPECT_NEAR(costs.backward_input.compute_s - bf16.backward_input.compute_s,
                input_gemms + c.backward_bytes / 8000e9, 1e-12);
    EXPECT_DOUBLE_EQ(lm_head_costs(context).forward.compute_s,
                     lm_head_costs(layer_context(bf16_plan)).forward.compute_s);
  }
  // A large GEMM is compute-bound: its time is the FLOPs over the peak, the curve and the factor
  // (148 × 4 tiles of 128 × 128 fill four whole waves of the B200's 148 SMs).
  const schemas::GpuProfile& gpu = bf16_plan.cluster.gpu;
  const double flops = 2.0 * 18944 * 512 * 65536;
  for (schemas::Dtype dtype : {schemas::Dtype::fp8, schemas::Dtype::mxfp8, schemas::Dtype::nvfp4}) {
    const double factor =
        gpu.gemm_dtype_efficiency.contains(dtype) ? gpu.gemm_dtype_efficiency.at(dtype) : 1.0;
    EXPECT_NEAR(gemm_time_s(gpu, dtype, 18944, 512, 65536),
                flops / (gpu.peak_dense_tflops.at(dtype) * 1e12 *
                         gpu.gemm_efficiency_by_flops.back().fraction * factor),
                1e-12);
  }
}

}  // namespace
}  // namespace strata::costmodels

namespace strata::costmodels {
namespace {

// A device slow at exponentials (a CPU core: ~1e9 per second) pays GELU's tanh per element on top
// of attention's exponentials; on the A100 (2.44e12 per second) the activation stays bound by its
// bytes and only attention's exponentials depend on the rate.
TEST(LayerCosts, TheActivationIsBoundByItsEvaluationsOnADeviceSlowAtThem) {
  schemas::Plan plan = gpt3_plan(8, false);
  const AttentionShape attention{
      .batch = 1, .heads = 12, .query_tokens = 2048, .key_tokens = 2048, .head_dim = 128};
  const auto forward_at = [&](double tops) {
    plan.cluster.gpu.special_function_tops = tops;
    const double layer =
        transformer_layer_costs(layer_context(plan), schemas::RecomputeGranularity::none)
            .forward.compute_s;
    return layer - attention_time(plan.cluster.gpu, plan.precision, schemas::AttentionKernel::flash,
                                  attention)
                       .forward_s;
  };
  const double unbounded = forward_at(1e9);
  EXPECT_DOUBLE_EQ(forward_at(2.44), unbounded);
  const double tokens = 2048, ffn = 4 * 12288 / 8.0;
  const double activation_bytes = 2 * 2 * tokens * ffn;  // fp16 read and write
  EXPECT_NEAR(forward_at(1e-3) - unbounded,
              tokens * ffn / 1e9 - memory_bound_time_s(plan.cluster.gpu, activation_bytes, 1),
              1e-12);
  EXPECT_DOUBLE_EQ(elementwise_time_s(plan.cluster.gpu, 8e9, 1e6),
                   memory_bound_time_s(plan.cluster.gpu, 8e9));
  EXPECT_DOUBLE_EQ(elementwise_time_s(plan.cluster.gpu, 8e3, 1e6), 1e-3);
}

// Dropout's keep decisions cost their generation where the profile measured a rate (a CPU): each
// layer draws one per element of both residual branches forward and again backward, over the
// tokens its norms see (all of them under tp without sequence parallelism, a 1/tp share with
// it); the embedding one per element each way. Without dropout, or without a rate, nothing.
TEST(LayerCosts, DropoutPaysForItsRandomNumbersWhereTheProfileMeasuredTheirRate) {
  for (const bool sequence_parallel : {false, true}) {
    schemas::Plan plan = gpt3_plan(8, sequence_parallel);
    const auto costs_at = [&](double dropout, std::optional<double> rate) {
      plan.model.dropout = dropout;
      plan.cluster.gpu.random_number_tops = rate;
      const LayerContext context = layer_context(plan);
      return std::pair{transformer_layer_costs(context, schemas::RecomputeGranularity::none),
                       embedding_costs(context)};
    };
    const auto [layer, embedding] = costs_at(0.1, std::nullopt);
    const auto [layer_random, embedding_random] = costs_at(0.1, 1e-4);
    const auto [layer_without, embedding_without] = costs_at(0.0, 1e-4);
    const auto [layer_plain, embedding_plain] = costs_at(0.0, std::nullopt);
    const double tokens = sequence_parallel ? 2048.0 / 8 : 2048.0;
    const double numbers = tokens * 12288;  // one branch of one layer
    EXPECT_DOUBLE_EQ(layer_without.forward.compute_s, layer_plain.forward.compute_s);
    EXPECT_DOUBLE_EQ(embedding_without.forward.compute_s, embedding_plain.forward.compute_s);
    EXPECT_NEAR(layer_random.forward.compute_s - layer.forward.compute_s, 2 * numbers / 1e8, 1e-12);
    EXPECT_NEAR(layer_random.backward_input.compute_s - layer.backward_input.compute_s,
                2 * numbers / 1e8, 1e-12);
    EXPECT_DOUBLE_EQ(layer_random.backward_weight.compute_s, layer.backward_weight.compute_s);
    EXPECT_NEAR(embedding_random.forward.compute_s - embedding.forward.compute_s, numbers / 1e8,
                1e-12);
    EXPECT_NEAR(embedding_random.backward_weight.compute_s - embedding.backward_weight.compute_s,
                numbers / 1e8, 1e-12);
  }
}

// Llama 3.1 8B's layout of the context-parallel tests below: 8,192 tokens over cp 4, dp 2.
schemas::PlanKnobs llama_over_cp4_knobs() {
  schemas::PlanKnobs knobs;
  knobs.mesh = {.tp = 1, .cp = 4, .dp = 2, .pp = 1};
  knobs.seq_length = 8192;
  knobs.micro_batch_size = 1;
  knobs.global_batch_size = 2;
  return knobs;
}

// Llama 3.1 8B (8 kv heads of 128) at 8,192 tokens over cp 4 on one DGX H100, bf16: each rank
// holds 2,048 tokens, whose keys and values are 2 × 2,048 × 8 × 128 × 2 B = 8,388,608 B.
// The all-gather variant gathers 4 × that in the forward, gathers it again in the backward and
// reduce-scatters its gradient, none of it hidden; it holds 2·cp + 2 blocks of keys and values
// where the ring holds 5 (two blocks in hand and arriving, three of their gradients).
TEST(LayerCosts, ContextParallelAllGatherPricesItsCollectivesUnhidden) {
  schemas::PlanKnobs knobs = llama_over_cp4_knobs();
  const schemas::ModelConfig model = schemas::model_preset("llama3.1-8b");
  const schemas::ClusterConfig cluster = schemas::cluster_preset("dgx-h100");
  const schemas::Plan ring_plan = schemas::build_plan(model, cluster, knobs, "test");
  knobs.cp_comm = schemas::ContextParallelComm::all_gather;
  const schemas::Plan gather_plan = schemas::build_plan(model, cluster, knobs, "test");
  const LayerContext ring = layer_context(ring_plan);
  const LayerContext gather = layer_context(gather_plan);
  const double kv_bytes = 8'388'608;
  const double gather_s =
      collective_time_s(cluster, gather.cp_span, Collective::all_gather, 4 * kv_bytes);
  const double scatter_s =
      collective_time_s(cluster, gather.cp_span, Collective::reduce_scatter, 4 * kv_bytes);
  ASSERT_EQ(gather.cp_span.size, 4);
  const PassCosts gathered = transformer_layer_costs(gather, schemas::RecomputeGranularity::none);
  EXPECT_DOUBLE_EQ(gathered.forward.cp_comm_s, gather_s);
  EXPECT_DOUBLE_EQ(gathered.backward_input.cp_comm_s, gather_s + scatter_s);
  EXPECT_EQ(gathered.backward_weight.cp_comm_s, 0);
  // The ring's transfers hide behind the attention they overlap, here entirely, but for the
  // backward's last hop of key/value gradients, which arrives after the last compute.
  const PassCosts ringed = transformer_layer_costs(ring, schemas::RecomputeGranularity::none);
  EXPECT_EQ(ringed.forward.cp_comm_s, 0);
  EXPECT_DOUBLE_EQ(ringed.backward_input.cp_comm_s,
                   point_to_point_time_s(cluster, ring.cp_tier, kv_bytes));
  EXPECT_LT(ringed.forward.cp_comm_s + ringed.backward_input.cp_comm_s,
            gathered.forward.cp_comm_s + gathered.backward_input.cp_comm_s);
  // Both copy the keys and values out of qkv in each pass (a read and a write); in the backward
  // both zero the cp blocks their gradients collect in and add the rank's own into its qkv
  // gradient (3 passes over a block), and the ring adds each of the cp − 1 arriving partial sums
  // (3 more each): 2 + 4 + 3 + 9 = 18 blocks in 2·cp + 1 = 9 kernels against 9 blocks in 3.
  EXPECT_DOUBLE_EQ(gathered.forward.compute_s, ringed.forward.compute_s);
  EXPECT_NEAR(ringed.backward_input.compute_s - gathered.backward_input.compute_s,
              memory_bound_time_s(cluster.gpu, 18 * kv_bytes, 9) -
                  memory_bound_time_s(cluster.gpu, 9 * kv_bytes, 3),
              1e-15);
  const double extra_blocks = (2 * 4 + 2) - 5;
  EXPECT_DOUBLE_EQ(layer_activation_bytes(gather, schemas::RecomputeGranularity::none).working -
                       layer_activation_bytes(ring, schemas::RecomputeGranularity::none).working,
                   extra_blocks * kv_bytes);
}

// A communicator that does not move messages while its rank computes (progress share 0, Open MPI
// without a progress thread at its limit) leaves every hop of the ring exposed: the forward's
// cp − 1 hops of keys and values, the backward's cp − 1 hops of keys and values with their
// gradients and the gradients' last hop. Half progress hides half of each hop at most.
TEST(LayerCosts, RingHopsWaitForTheCommunicatorsProgress) {
  schemas::PlanKnobs knobs = llama_over_cp4_knobs();
  const schemas::ModelConfig model = schemas::model_preset("llama3.1-8b");
  schemas::ClusterConfig cluster = schemas::cluster_preset("dgx-h100");
  cluster.communicator_progress_during_compute = 0.0;
  const schemas::Plan still = schemas::build_plan(model, cluster, knobs, "test");
  const LayerContext context = layer_context(still);
  const double kv_bytes = 8'388'608;
  const double hop_s = point_to_point_time_s(cluster, context.cp_tier, kv_bytes);
  const double pair_hop_s = point_to_point_time_s(cluster, context.cp_tier, 2 * kv_bytes);
  const PassCosts none = transformer_layer_costs(context, schemas::RecomputeGranularity::none);
  EXPECT_NEAR(none.forward.cp_comm_s, 3 * hop_s, 1e-15);
  EXPECT_NEAR(none.backward_input.cp_comm_s, 3 * pair_hop_s + hop_s, 1e-15);
  cluster.communicator_progress_during_compute = 0.5;
  const schemas::Plan half_plan = schemas::build_plan(model, cluster, knobs, "test");
  const PassCosts half =
      transformer_layer_costs(layer_context(half_plan), schemas::RecomputeGranularity::none);
  // The attention of 2,048 queries over up to 8,192 keys outlasts half of three hops on NVLink.
  EXPECT_NEAR(half.forward.cp_comm_s, 0.5 * 3 * hop_s, 1e-15);
  EXPECT_NEAR(half.backward_input.cp_comm_s, 0.5 * 3 * pair_hop_s + hop_s, 1e-15);
  // The copies and sums of the ring are compute, whatever the communicator does.
  EXPECT_DOUBLE_EQ(none.forward.compute_s, half.forward.compute_s);
  EXPECT_DOUBLE_EQ(none.backward_input.compute_s, half.backward_input.compute_s);
}

// A profile that measured context parallelism's block-by-block attention prices it at that rate;
// without one, at the whole-sequence kernel's; a plan without cp never reads it.
TEST(LayerCosts, ContextParallelAttentionRunsAtItsOwnMeasuredRate) {
  schemas::PlanKnobs knobs;
  knobs.mesh = {.tp = 1, .cp = 2, .dp = 1, .pp = 1};
  knobs.seq_length = 4096;
  knobs.micro_batch_size = 1;
  knobs.global_batch_size = 1;
  const schemas::ModelConfig model = schemas::model_preset("llama3.1-8b");
  schemas::ClusterConfig cluster = schemas::cluster_preset("dgx-h100");
  const auto layer = [&](std::int64_t cp) {
    knobs.mesh.cp = cp;
    knobs.global_batch_size = 8 / cp;
    knobs.mesh.dp = 8 / cp;
    return transformer_layer_costs(layer_context(schemas::build_plan(model, cluster, knobs, "t")),
                                   schemas::RecomputeGranularity::none);
  };
  const PassCosts plain = layer(2);
  const PassCosts dense_plain = layer(1);
  cluster.gpu.context_parallel_attention_efficiency = 0.5 * *cluster.gpu.attention_efficiency;
  const PassCosts chunked = layer(2);
  EXPECT_DOUBLE_EQ(layer(1).forward.compute_s, dense_plain.forward.compute_s);
  // 8 heads' worth of products per rank (32 heads of 128, half the queries of 4,096 tokens
  // against all of them), their exponentials unchanged: the products take twice as long.
  const costmodels::AttentionShape shape{
      .batch = 1, .heads = 32, .query_tokens = 2048, .key_tokens = 4096, .head_dim = 128};
  schemas::GpuProfile no_exponentials = cluster.gpu;
  no_exponentials.special_function_tops.reset();
  no_exponentials.attention_efficiency = no_exponentials.context_parallel_attention_efficiency;
  const AttentionTime slow_products =
      attention_time(no_exponentials, schemas::Dtype::bf16, schemas::AttentionKernel::flash, shape);
  EXPECT_NEAR(chunked.forward.compute_s - plain.forward.compute_s, 0.5 * slow_products.forward_s,
              1e-12);
  EXPECT_NEAR(chunked.backward_input.compute_s - plain.backward_input.compute_s,
              0.5 * slow_products.backward_s, 1e-12);
}

}  // namespace
}  // namespace strata::costmodels
