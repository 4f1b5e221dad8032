// The `strata` Python module: the planning half of the command line — describe, plan, simulate,
// validate and the presets — for notebooks and scripts, on plain dicts in the JSON formats of
// schemas/ (a plan from plan() goes to simulate() as it is, or to a file for `strata train`).
// Each function answers what the command with --format json answers: both call the same code
// (tools/src/*_report.h, plan_request.h, the planner and the simulator).
//
// Bad input raises strata.InputError (a ValueError) whose message is the command line's one line,
// with .source, .json_path and .rule; a search where nothing fits raises strata.NoPlanFits with
// the binding constraint.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

#include "describe_report.h"
#include "phased_plan_report.h"
#include "plan_request.h"
#include "presets_report.h"
#include "strata/planner/phase_planning.h"
#include "strata/planner/plan_search.h"
#include "strata/planner/strategy_choice.h"
#include "strata/schemas/cluster_config.h"
#include "strata/schemas/document_kind.h"
#include "strata/schemas/document_loader.h"
#include "strata/schemas/input_error.h"
#include "strata/schemas/json_file.h"
#include "strata/schemas/json_location.h"
#include "strata/schemas/model_config.h"
#include "strata/schemas/plan.h"
#include "strata/schemas/plan_set.h"
#include "strata/schemas/training_phases.h"
#include "strata/simulator/plan_simulation.h"

namespace py = pybind11;

namespace strata::python {
namespace {

// A search in which no plan fits: the message is the binding constraint.
class NoPlanFits : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// JSON crosses the boundary as text through Python's json module: exact for every value the
// formats hold, and no hand-written walk over both object models.
py::object to_python(const nlohmann::json& value) {
  return py::module_::import("json").attr("loads")(value.dump());
}

// The JSON pointer of the first float in `value` that is NaN or infinite (empty: none). Python's
// json module writes them as NaN and Infinity, which are not JSON: the error names where they are.
std::optional<std::string> non_finite_at(const py::handle& value, const std::string& path) {
  if (py::isinstance<py::float_>(value)) {
    if (!std::isfinite(value.cast<double>())) return path;
  } else if (py::isinstance<py::dict>(value)) {
    for (const auto& [key, item] : value.cast<py::dict>()) {
      const std::string name = py::str(key).cast<std::string>();
      if (auto found = non_finite_at(item, path + "/" + name)) return found;
    }
  } else if (py::isinstance<py::list>(value) || py::isinstance<py::tuple>(value)) {
    std::size_t index = 0;
    for (const py::handle item : value) {
      if (auto found = non_finite_at(item, path + "/" + std::to_string(index++))) return found;
    }
  }
  return std::nullopt;
}

// `value` (the argument `argument`) as JSON; NaN and infinity are refused as the file formats
// refuse them, naming the argument and the path.
nlohmann::json from_python(const py::handle& value, const std::string& argument) {
  if (const std::optional<std::string> path = non_finite_at(value, "")) {
    throw schemas::InputError(argument, *path,
                              "is not a finite number (JSON has no NaN or infinity)");
  }
  const std::string text = py::module_::import("json").attr("dumps")(value).cast<std::string>();
  return schemas::parse_json_text(text, argument);
}

// What names a command-line flag in an error ("--seq-len") as the keyword argument the module
// takes for it ("seq_len"); any other source as it is.
std::string keyword_of(const std::string& source) {
  if (!source.starts_with("--")) return source;
  std::string keyword = source.substr(2);
  std::replace(keyword.begin(), keyword.end(), '-', '_');
  return keyword;
}

// A model or cluster given as a preset name or file path (str), or as a document (dict).
using Spec = std::variant<std::string, py::dict>;

schemas::ModelConfig model_of(const Spec& spec) {
  if (const auto* name = std::get_if<std::string>(&spec)) return schemas::resolve_model(*name);
  return schemas::parse_model(from_python(std::get<py::dict>(spec), "model"),
                              schemas::JsonLocation("model"));
}

schemas::ClusterConfig cluster_of(const Spec& spec) {
  if (const auto* name = std::get_if<std::string>(&spec)) return schemas::resolve_cluster(*name);
  return schemas::parse_cluster(from_python(std::get<py::dict>(spec), "cluster"),
                                schemas::JsonLocation("cluster"));
}

py::object describe(const Spec& model, const std::optional<Spec>& cluster,
                    std::optional<std::int64_t> seq_len, const std::string& precision) {
  return to_python(tools::describe_report(tools::describe_model(
      model_of(model), cluster ? std::optional(cluster_of(*cluster)) : std::nullopt, precision,
      seq_len)));
}

// The command line's request for these arguments (its checks name them as keywords).
tools::PlanRequest request_of(std::int64_t global_batch, std::optional<std::int64_t> seq_len,
                              std::int64_t top, std::optional<std::string> precision,
                              const std::string& framework,
                              const std::vector<std::string>& schedules,
                              std::optional<std::string> gradient_dtype) {
  tools::PlanRequest options;
  options.global_batch = global_batch;
  options.seq_length = seq_len;
  // Negative counts reach here as numbers (the command line's validator sees them as text).
  tools::require_whole_number(top, 1, tools::kMaxTopPlans, "--top");
  options.top_k = static_cast<std::size_t>(top);
  options.precision = std::move(precision);
  options.gradient_dtype = std::move(gradient_dtype);
  options.framework = framework;
  options.schedules = schedules;
  return options;
}

planner::SearchResult search(const schemas::ModelConfig& model,
                             const schemas::ClusterConfig& cluster,
                             const planner::SearchOptions& options) {
  planner::SearchResult result;
  {
    py::gil_scoped_release unlocked;  // a search of seconds need not stop other threads
    result = planner::search_plans(model, cluster, options);
  }
  if (result.best.empty()) throw NoPlanFits(result.binding_constraint);
  return result;
}

py::object plan(const Spec& model_spec, const Spec& cluster_spec, std::int64_t global_batch,
                std::optional<std::int64_t> seq_len, std::int64_t top,
                std::optional<std::string> precision, const std::string& framework,
                const std::vector<std::string>& schedules,
                std::optional<std::string> gradient_dtype, bool variants) {
  const schemas::ModelConfig model = model_of(model_spec);
  const schemas::ClusterConfig cluster = cluster_of(cluster_spec);
  tools::PlanRequest options = request_of(global_batch, seq_len, top, std::move(precision),
                                          framework, schedules, std::move(gradient_dtype));
  options.all_variants = variants;
  std::string precision_note;
  const planner::SearchResult result =
      search(model, cluster, tools::plan_search_options(options, model, cluster, precision_note));
  py::list plans;
  for (const planner::RankedPlan& ranked : result.best) {
    plans.append(to_python(schemas::plan_to_json(ranked.plan)));
  }
  return plans;
}

// One plan per phase of a run, chosen with the switches between them (strata plan --phases).
py::object plan_phases(const Spec& model_spec, const Spec& cluster_spec, const Spec& phases_spec,
                       std::int64_t top, std::optional<std::string> precision,
                       const std::string& framework, const std::vector<std::string>& schedules,
                       std::optional<std::string> gradient_dtype) {
  const schemas::ModelConfig model = model_of(model_spec);
  const schemas::ClusterConfig cluster = cluster_of(cluster_spec);
  const auto* path = std::get_if<std::string>(&phases_spec);
  const schemas::TrainingPhases phases =
      path != nullptr
          ? schemas::load_training_phases_file(*path)
          : schemas::parse_training_phases(from_python(std::get<py::dict>(phases_spec), "phases"),
                                           schemas::JsonLocation("phases"));
  // Each phase sets the batch and sequence; the request's own are the command line's defaults.
  const tools::PlanRequest options =
      request_of(tools::PlanRequest{}.global_batch, std::nullopt, top, std::move(precision),
                 framework, schedules, std::move(gradient_dtype));
  std::string precision_note;
  const planner::SearchOptions search_options =
      tools::plan_search_options(options, model, cluster, precision_note);
  planner::PhasedPlan planned;
  {
    py::gil_scoped_release unlocked;
    planned = planner::plan_phases(model, cluster, phases, path != nullptr ? *path : "phases",
                                   search_options);
  }
  return to_python(tools::phased_plan_report(model, cluster, phases, planned));
}

// `count` fast plans of different meshes with the predicted switch between each pair, as a plan
// set (strata plan --strategies).
py::object plan_strategies(const Spec& model_spec, const Spec& cluster_spec,
                           std::int64_t global_batch, std::int64_t count,
                           std::optional<std::int64_t> seq_len,
                           std::optional<std::string> precision, const std::string& framework,
                           const std::vector<std::string>& schedules,
                           std::optional<std::string> gradient_dtype) {
  const schemas::ModelConfig model = model_of(model_spec);
  const schemas::ClusterConfig cluster = cluster_of(cluster_spec);
  tools::require_whole_number(count, 1, tools::kMaxStrategies, "--strategies");
  const tools::PlanRequest options =
      request_of(global_batch, seq_len, static_cast<std::int64_t>(tools::PlanRequest{}.top_k),
                 std::move(precision), framework, schedules, std::move(gradient_dtype));
  std::string precision_note;
  planner::SearchOptions search_options =
      tools::plan_search_options(options, model, cluster, precision_note);
  // Strategies come from a deeper list: the fastest plans often share a mesh.
  search_options.top_k =
      tools::strategy_search_depth(search_options.top_k, static_cast<std::size_t>(count));
  const planner::SearchResult result = search(model, cluster, search_options);
  const std::vector<planner::RankedPlan> strategies =
      planner::diverse_strategies(result.best, static_cast<std::size_t>(count));
  schemas::PlanSet set;
  {
    py::gil_scoped_release unlocked;  // pricing every pair of a large world takes seconds
    set = planner::strategy_set(strategies, tools::strategies_description(
                                                model, cluster, search_options, strategies.size()));
  }
  return to_python(schemas::plan_set_to_json(set));
}

py::object simulate(const py::dict& plan_document) {
  const schemas::Plan plan =
      schemas::parse_plan(from_python(plan_document, "plan"), schemas::JsonLocation("plan"));
  simulator::PlanSimulation simulation;
  {
    py::gil_scoped_release unlocked;
    simulation = simulator::simulate_plan(plan, {});
  }
  return to_python(simulator::simulation_to_json(plan, simulation));
}

// Checks a document as `strata validate` does; returns its kind ("model", "cluster", "plan").
std::string validate(const py::dict& document) {
  const nlohmann::json value = from_python(document, "document");
  const schemas::JsonLocation location("document");
  switch (schemas::detect_document_kind(value, location)) {
    case schemas::DocumentKind::model:
      schemas::parse_model(value, location);
      return "model";
    case schemas::DocumentKind::hf_config:
      schemas::parse_model(value, location);
      return "model";
    case schemas::DocumentKind::cluster:
      schemas::parse_cluster(value, location);
      return "cluster";
    case schemas::DocumentKind::plan:
      schemas::parse_plan(value, location);
      return "plan";
    case schemas::DocumentKind::plan_set:
      schemas::parse_plan_set(value, location);
      return "plan_set";
    case schemas::DocumentKind::phases:
      schemas::parse_training_phases(value, location);
      return "phases";
  }
  return "unknown";
}

}  // namespace
}  // namespace strata::python

PYBIND11_MODULE(strata, module) {
  using namespace strata;
  module.doc() =
      "Strata's planner and simulator: describe a model, plan its parallel layout on a cluster, "
      "simulate a plan, validate documents. Dicts in and out, in the JSON formats of strata's "
      "schemas/.";
  static py::exception<schemas::InputError> input_error(module, "InputError", PyExc_ValueError);
  static py::exception<python::NoPlanFits> no_plan(module, "NoPlanFits", PyExc_RuntimeError);
  py::register_exception_translator([](std::exception_ptr raised) {
    try {
      if (raised) std::rethrow_exception(raised);
    } catch (const schemas::InputError& raised_error) {
      // The shared checks name the command line's flags; a caller here gave keyword arguments.
      const schemas::InputError error(python::keyword_of(raised_error.source()),
                                      raised_error.json_path(), raised_error.rule());
      // Called as an object (not exception::operator(), which only sets the message).
      py::object instance = py::reinterpret_borrow<py::object>(input_error)(error.what());
      instance.attr("source") = error.source();
      instance.attr("json_path") = error.json_path();
      instance.attr("rule") = error.rule();
      PyErr_SetObject(input_error.ptr(), instance.ptr());
    } catch (const python::NoPlanFits& error) {
      no_plan(error.what());
    }
  });

  module.def(
      "presets", [] { return python::to_python(tools::presets_report()); },
      "The built-in models and clusters with their key numbers (strata presets).");
  module.def(
      "preset",
      [](const std::string& name) { return python::to_python(tools::preset_document(name)); },
      py::arg("name"),
      "One preset's complete model or cluster document (a cluster as NAME, NAME:NODES or "
      "NAME:NODESxGPUS).");
  module.def("describe", &python::describe, py::arg("model"), py::arg("cluster") = py::none(),
             py::arg("seq_len") = py::none(), py::arg("precision") = "bf16",
             "Parameters by component, FLOPs per token and model-state bytes of a model (a preset "
             "name, a file path or a model dict), and on a cluster the fewest GPUs that hold its "
             "states (strata describe --format json).");
  module.def("plan", &python::plan, py::arg("model"), py::arg("cluster"), py::arg("global_batch"),
             py::arg("seq_len") = py::none(), py::arg("top") = 5, py::arg("precision") = py::none(),
             py::arg("framework") = "strata", py::arg("schedules") = std::vector<std::string>{},
             py::arg("gradient_dtype") = py::none(), py::arg("variants") = false,
             "The best plans for training `model` on `cluster` at a global batch, fastest first, "
             "as plan dicts (strata plan): one per mesh, or every layout with variants=True; "
             "raises NoPlanFits with the binding constraint when none fits.");
  module.def("plan_phases", &python::plan_phases, py::arg("model"), py::arg("cluster"),
             py::arg("phases"), py::arg("top") = 5, py::arg("precision") = py::none(),
             py::arg("framework") = "strata", py::arg("schedules") = std::vector<std::string>{},
             py::arg("gradient_dtype") = py::none(),
             "One plan per phase of a run (a phases dict or file path: steps, global batch and "
             "sequence length of each), chosen from each phase's top plans so that the steps and "
             "the predicted switches between phases take least time (strata plan --phases "
             "--format json); its plan_set is what strata train --plan-set runs.");
  module.def("plan_strategies", &python::plan_strategies, py::arg("model"), py::arg("cluster"),
             py::arg("global_batch"), py::arg("count") = 4, py::arg("seq_len") = py::none(),
             py::arg("precision") = py::none(), py::arg("framework") = "strata",
             py::arg("schedules") = std::vector<std::string>{},
             py::arg("gradient_dtype") = py::none(),
             "`count` fast plans of different meshes for one batch, with the predicted switch "
             "between every ordered pair, as a plan set dict (strata plan --strategies).");
  module.def("simulate", &python::simulate, py::arg("plan"),
             "One training step of a plan dict predicted: time, throughput, MFU, memory per "
             "pipeline rank (strata simulate --format json).");
  module.def("validate", &python::validate, py::arg("document"),
             "Checks a model, cluster or plan dict as strata validate does; returns its kind or "
             "raises InputError naming the JSON path and the rule.");
}
