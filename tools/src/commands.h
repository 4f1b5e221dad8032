// The subcommands of `strata`: each adds itself to the CLI11 app with its options, and runs
// after parsing. Errors in user input are thrown as schemas::InputError (exit 1).
#pragma once

#include <CLI/CLI.hpp>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "output_format.h"
#include "stall_timeout_option.h"

namespace strata::tools {

struct PresetsOptions {
  std::optional<std::string> show;  // print one preset's document
  OutputFormat format = OutputFormat::table;
};
CLI::App* add_presets_command(CLI::App& app, PresetsOptions& options);
int run_presets(const PresetsOptions& options);

struct ValidateOptions {
  std::vector<std::string> files;
  OutputFormat format = OutputFormat::table;
};
CLI::App* add_validate_command(CLI::App& app, ValidateOptions& options);
int run_validate(const ValidateOptions& options);

struct DescribeOptions {
  std::string model = "llama3.1-70b";
  std::optional<std::string> cluster;
  std::optional<std::int64_t> seq_length;
  std::string precision = "bf16";
  OutputFormat format = OutputFormat::table;
  bool shrink = false;                     // describe the model's tiny copy (model_shrink.h)
  std::optional<std::string> write_model;  // also write the described model file there
};
CLI::App* add_describe_command(CLI::App& app, DescribeOptions& options);
int run_describe(const DescribeOptions& options);

struct ScheduleOptions {
  std::string plan;
  std::optional<std::string> plan_id;  // a plan set's plan; absent: each of its plans
  std::optional<int> rank;
  std::optional<std::string> csv_path;
  OutputFormat format = OutputFormat::table;
};
CLI::App* add_schedule_command(CLI::App& app, ScheduleOptions& options);
int run_schedule(const ScheduleOptions& options);

struct SimulateOptions {
  std::optional<std::string> plan;
  std::optional<std::string> plan_id;  // a plan set's plan; absent: the set as a whole
  std::optional<std::string> model;
  std::optional<std::string> cluster;
  std::int64_t tp = 1;
  std::int64_t pp = 1;
  std::int64_t cp = 1;
  std::optional<std::int64_t> dp;
  std::int64_t vpp = 1;
  std::int64_t micro_batch = 1;
  std::optional<std::int64_t> global_batch;
  std::optional<std::int64_t> seq_length;
  std::string recompute = "none";
  std::vector<std::string> recompute_modules;  // with selective; empty: core_attn
  std::vector<std::string> cuda_graph_scope;   // replayed from CUDA graphs; empty: none
  bool sequence_parallel = false;
  bool no_overlap_grad_reduce = false;
  std::optional<std::int64_t> bucket_size;  // parameters per gradient bucket
  bool tp_comm_overlap = false;
  std::string framework = "strata";
  std::string attention = "flash";
  std::string cp_comm = "ring";  // how cp attention communicates
  std::int64_t zero_stage = 0;
  std::optional<std::int64_t> dp_shard;  // hybrid sharding: dp ranks per ZeRO shard group
  std::int64_t ep = 1;                   // expert parallelism (mixture-of-experts models)
  std::int64_t etp = 1;                  // expert tensor parallelism
  bool ep_comm_overlap = false;
  std::optional<double> expert_load_imbalance;
  std::string schedule = "1f1b";
  std::optional<std::string> precision;  // absent: the cluster GPU's default (bf16 if it has it)
  std::optional<std::string> gradient_dtype;  // absent: the precision's default
  std::string mode = "symmetric";
  std::optional<std::string> trace_path;
  OutputFormat format = OutputFormat::table;
};
CLI::App* add_simulate_command(CLI::App& app, SimulateOptions& options);
int run_simulate(const SimulateOptions& options);

struct ValidateSimOptions {
  std::string runs_path;
  std::optional<std::string> plans_directory;
  OutputFormat format = OutputFormat::table;
};
CLI::App* add_validate_sim_command(CLI::App& app, ValidateSimOptions& options);
int run_validate_sim(const ValidateSimOptions& options);

struct PlanOptions {
  std::string model = "llama3.1-70b";
  std::string cluster = "dgx-h100:8";
  std::int64_t global_batch = 256;
  std::optional<std::int64_t> seq_length;
  std::size_t top_k = 5;
  std::optional<std::filesystem::path> out_path;
  double memory_reserve = 0;
  std::optional<std::int64_t> max_tp;
  std::vector<std::string> schedules;
  std::optional<std::string> precision;  // absent: the cluster GPU's default (bf16 if it has it)
  std::optional<std::string> gradient_dtype;  // absent: the precision's default
  std::string framework = "strata";
  std::string emit;
  bool all_variants = false;
  bool quiet = false;
  // A phases file: one plan per phase (a plan set); or K diverse strategies for one phase.
  std::optional<std::filesystem::path> phases_path;
  std::optional<std::size_t> strategies;
  // An HTML report of the plans found: the first in full, the others compared with it.
  std::optional<std::filesystem::path> report_path;
  OutputFormat format = OutputFormat::table;
};
CLI::App* add_plan_command(CLI::App& app, PlanOptions& options);
int run_plan(const PlanOptions& options);

struct ReportOptions {
  std::string plan;                      // a plan file or a plan set
  std::optional<std::string> plan_id;    // a plan set's plan to show in full (default: its first)
  std::vector<std::string> compare;      // more plan files or plan sets, compared with it
  std::optional<std::string> train_log;  // what `strata train` logged running the plan
  std::string mode = "symmetric";        // the timeline's ranks: one per stage, or every rank
  std::filesystem::path out_path;
};
CLI::App* add_report_command(CLI::App& app, ReportOptions& options);
int run_report(const ReportOptions& options);

struct DataOptions {
  std::string text_path;
  std::string out_path;
};
CLI::App* add_data_command(CLI::App& app, DataOptions& options);
int run_data(const DataOptions& options);

enum class LogFormat { text, json };
struct ReshardOptions {
  std::string from;
  std::string to_plan;
  std::string out;
};
CLI::App* add_reshard_command(CLI::App& app, ReshardOptions& options);
int run_reshard(const ReshardOptions& options);

struct SampleOptions {
  std::optional<std::string> checkpoint;     // a checkpoint (DIR/step_N) or a --checkpoint-dir
  std::optional<std::string> init_llmc;      // an llm.c GPT-2 model file
  std::optional<std::string> prompt;         // text, encoded as bytes
  std::optional<std::string> prompt_tokens;  // comma-separated token ids
  std::optional<std::string> tokenizer;      // llm.c's gpt2_tokenizer.bin, to decode
  std::int64_t tokens = 64;
  double temperature = 1.0;
  std::int64_t top_k = 0;
  std::uint64_t seed = 1234;
  LogFormat log_format = LogFormat::text;
};
CLI::App* add_sample_command(CLI::App& app, SampleOptions& options);
int run_sample(const SampleOptions& options);

struct ProfileOptions {
  std::string out = "cluster.json";
  bool quick = false;
  std::string device = "cpu";            // cpu or cuda: the backend whose ops are measured
  std::optional<std::string> precision;  // fp32 or bf16 (cuda only; default bf16 there)
  std::optional<std::string> name;
  std::optional<std::int64_t> gpus_per_node;
  LogFormat log_format = LogFormat::text;
  double stall_timeout_s = kDefaultStallTimeoutSeconds;  // 0: wait for a peer forever
};
CLI::App* add_profile_command(CLI::App& app, ProfileOptions& options);
// `command_line` is recorded in the cluster file's sources.
int run_profile(const ProfileOptions& options, const std::string& command_line);

struct TrainOptions {
  std::optional<std::string> plan;
  std::optional<std::string> model;
  std::int64_t micro_batch = 4;
  std::optional<std::int64_t> global_batch;
  std::optional<std::int64_t> seq_length;
  std::optional<std::string> write_plan;
  // Layout switches in memory: "STEP:PLAN" items, before optimizer step STEP + 1 the run goes on
  // under the plan file PLAN (the same model, precision and ranks).
  std::vector<std::string> switches;
  std::string data;
  std::int64_t steps = 100;
  std::optional<std::uint64_t> seed;
  double learning_rate = 3e-4;
  double min_lr_fraction = 0.1;
  std::int64_t warmup_steps = 0;
  double weight_decay = 0.1;
  double grad_clip = 1.0;
  std::string lr_schedule = "cosine";
  std::string data_order = "random";
  bool log_samples = false;
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  std::optional<std::string> checkpoint_dir;
  std::int64_t checkpoint_every = 0;
  bool resume = false;
  bool resume_with_changes = false;
  bool overwrite_checkpoints = false;
  double stall_timeout_s = kDefaultStallTimeoutSeconds;  // 0: wait for a peer forever
  bool memory_check = true;                              // --memory-check on|off
  std::optional<std::string> init_llmc;
  std::optional<std::string> save_llmc;
  std::optional<std::string> val_data;  // validation token file
  // With val_data (unset: 0, before the first and after the last step only; 10 batches).
  std::optional<std::int64_t> eval_every;
  std::optional<std::int64_t> eval_batches;
  LogFormat log_format = LogFormat::text;
  std::optional<std::string> device;     // cpu | cuda (default: where the plan's cluster is)
  std::string collectives = "auto";      // auto | nccl | mpi: what carries CUDA ranks' tensors
  std::optional<std::string> precision;  // fp32 | bf16, with --model
  std::optional<std::string> cluster;    // the GPU cluster preset a --model plan names on cuda
  // The layout of a --model plan (on cpu-local:tp·cp·dp·pp): dp defaults to the job's ranks /
  // (tp·cp·pp).
  std::int64_t tp = 1;
  std::int64_t cp = 1;
  std::string cp_comm = "ring";  // how cp attention communicates
  std::optional<std::int64_t> dp;
  std::int64_t ep = 1;   // a MoE model's routed experts split over ep ranks of tp × cp × dp
  std::int64_t etp = 1;  // and each expert's width over etp ranks
  std::int64_t pp = 1;
  std::int64_t vpp = 1;
  std::optional<std::string> schedule;  // default: 1f1b, interleaved-1f1b with vpp > 1
  bool sequence_parallel = false;
  std::int64_t zero_stage = 0;
  std::optional<std::int64_t> dp_shard;  // hybrid sharding: dp ranks per ZeRO shard group
  std::string recompute = "none";
  bool no_overlap_grad_reduce = false;
  std::optional<std::int64_t> bucket_size;  // gradient-reduction bucket, in parameters
  std::optional<std::string> trace;         // Chrome trace of one step beside its prediction
  std::optional<std::int64_t> trace_step;   // which step (default: the last)
};
CLI::App* add_train_command(CLI::App& app, TrainOptions& options);
int run_train(const TrainOptions& options);

}  // namespace strata::tools
