#include "report_timeline_svg.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <utility>
#include <vector>

#include "report_html.h"
#include "report_parts.h"
#include "strata/schedule/action.h"

namespace strata::tools {
namespace {

constexpr double kWidth = 1200;
constexpr double kPlotLeft = 180;  // room for the rank names
constexpr double kPlotRight = 1185;
constexpr double kTop = 8;
constexpr double kComputeLane = 20;
constexpr double kSideLane = 7;  // the pipeline and data-parallel lanes
constexpr double kLaneGap = 1;
constexpr double kRowGap = 12;
constexpr double kRowHeight = kComputeLane + 2 * (kSideLane + kLaneGap);
constexpr double kAxisHeight = 34;

using Segments = std::vector<std::pair<TimePart, double>>;

// The parts of a pass other than its kernels, in the order they are drawn after them.
void add_pass_communication(Segments& segments, const costmodels::PassTime& pass) {
  segments.push_back({TimePart::tp_comm, pass.tp_comm_s});
  segments.push_back({TimePart::cp_comm, pass.cp_comm_s});
  segments.push_back({TimePart::ep_comm, pass.ep_comm_s});
  segments.push_back({TimePart::dp_comm, pass.dp_comm_s});
  segments.push_back({TimePart::host_issue, pass.host_wait_s()});
}

// What a compute-stream slice spent its time on, by the cost model of the pass it ran; the same
// sums the simulator adds to the rank's TimeBreakdown for that action.
Segments compute_segments(const simulator::TimelineSlice& slice,
                          const costmodels::PlanCosts& costs) {
  const std::optional<schedule::Action> action = schedule::parse_action(slice.name);
  if (!action) return {{TimePart::compute, slice.duration_s}};
  if (action->type == schedule::ActionType::optimizer_step) {
    return {{TimePart::optimizer, slice.duration_s}};
  }
  if (action->stage < 0 || static_cast<std::size_t>(action->stage) >= costs.stages.size()) {
    return {{TimePart::compute, slice.duration_s}};
  }
  const costmodels::PassCosts& passes =
      costs.stages[static_cast<std::size_t>(action->stage)].passes;
  Segments segments;
  switch (action->type) {
    case schedule::ActionType::forward:
      segments.push_back({TimePart::forward, passes.forward.compute_s});
      add_pass_communication(segments, passes.forward);
      break;
    case schedule::ActionType::backward:
      segments.push_back({TimePart::recompute, passes.recompute.total_s()});
      segments.push_back(
          {TimePart::backward, passes.backward_input.compute_s + passes.backward_weight.compute_s});
      add_pass_communication(segments, passes.backward_input);
      add_pass_communication(segments, passes.backward_weight);
      break;
    case schedule::ActionType::backward_input:
      segments.push_back({TimePart::recompute, passes.recompute.total_s()});
      segments.push_back({TimePart::backward, passes.backward_input.compute_s});
      add_pass_communication(segments, passes.backward_input);
      break;
    case schedule::ActionType::backward_weight:
      segments.push_back({TimePart::backward_weight, passes.backward_weight.compute_s});
      add_pass_communication(segments, passes.backward_weight);
      break;
    default:
      return {{TimePart::compute, slice.duration_s}};
  }
  // Same parts, merged (a B pass has two tp shares), scaled to the slice as simulated.
  Segments merged;
  double total = 0;
  for (const auto& [part, seconds] : segments) {
    total += seconds;
    const auto same = std::find_if(merged.begin(), merged.end(),
                                   [part = part](const auto& m) { return m.first == part; });
    if (same != merged.end()) {
      same->second += seconds;
    } else {
      merged.push_back({part, seconds});
    }
  }
  if (!(total > 0)) return {{segments.front().first, slice.duration_s}};
  for (auto& segment : merged) segment.second *= slice.duration_s / total;
  return merged;
}

// Pipeline sends are pp communication; on the collective stream, gradient reductions and
// ZeRO-3 gathers are dp communication and the tied embedding's all-reduce is counted as the
// simulator's breakdown counts it, with pp communication.
TimePart side_stream_part(const simulator::TimelineSlice& slice) {
  if (slice.stream == simulator::Stream::pipeline) return TimePart::pp_comm;
  const std::optional<schedule::Action> action = schedule::parse_action(slice.name);
  if (action && action->type == schedule::ActionType::tied_embedding_grad) {
    return TimePart::pp_comm;
  }
  return TimePart::dp_comm;
}

// A compute slice narrower than this is drawn in its kernels' colour alone: its communication
// share would be a fraction of a pixel.
constexpr double kMinSplitPixels = 3;
// Idle narrower than this is not drawn (the slices around it touch on screen).
constexpr double kMinIdlePixels = 0.5;
// Rects of one part closer than this are drawn as one.
constexpr double kMergePixels = 0.25;

// One lane's rects. Consecutive rects of one part that touch on screen are drawn as one, with a
// tooltip saying how many slices it holds: a step of thousands of sub-pixel passes (a 70B model's
// interleaved pipeline) would otherwise be tens of thousands of rects.
class LaneRects {
 public:
  LaneRects(std::string& svg, double y, double height) : svg_(svg), y_(y), height_(height) {}
  ~LaneRects() { flush(); }
  LaneRects(const LaneRects&) = delete;
  LaneRects& operator=(const LaneRects&) = delete;

  // `what` names the slice in the tooltip ("pipeline rank 0: 3F7"); times in seconds.
  void add(const PartStyle& style, double x0, double x1, std::string what, double start_s,
           double end_s) {
    if (run_ && run_->style == &style && x0 - run_->x1 < kMergePixels) {
      run_->x1 = std::max(run_->x1, x1);
      run_->end_s = end_s;
      ++run_->slices;
      return;
    }
    flush();
    run_ = Run{&style, x0, x1, std::move(what), start_s, end_s, 1};
  }

  void flush() {
    if (!run_) return;
    const std::string times =
        fmt::format("from {:.3f} to {:.3f} ms", run_->start_s * 1e3, run_->end_s * 1e3);
    std::string title;
    if (run_->slices > 1) {
      title = fmt::format("{}: {} slices {}", run_->style->name, run_->slices, times);
    } else if (run_->what == run_->style->name) {
      title = fmt::format("{} {}", run_->what, times);  // idle
    } else {
      title = fmt::format("{} ({}) {}", run_->what, run_->style->name, times);
    }
    svg_ += fmt::format(
        "<rect class=\"{}\" x=\"{}\" y=\"{}\" width=\"{}\" "
        "height=\"{}\"><title>{}</title></rect>\n",
        run_->style->css_class, svg_number(run_->x0), svg_number(y_),
        svg_number(std::max(run_->x1 - run_->x0, 0.5)), svg_number(height_), html_escape(title));
    run_.reset();
  }

 private:
  struct Run {
    const PartStyle* style;
    double x0, x1;
    std::string what;
    double start_s, end_s;
    std::size_t slices;
  };
  std::string& svg_;
  double y_, height_;
  std::optional<Run> run_;
};

// Idle on the compute lane: hatched, and not one of the breakdown's parts (it is the bubble, or
// a wait for data still on the wire).
constexpr PartStyle kIdleStyle{"idle", "idle", ""};

}  // namespace

std::string timeline_svg(const simulator::PlanSimulation& simulation) {
  const simulator::Timeline& timeline = simulation.result.timeline;
  double end_s = simulation.result.step_time_s;
  for (const simulator::TimelineSlice& slice : timeline.slices) {
    end_s = std::max(end_s, slice.start_s + slice.duration_s);
  }
  const std::vector<double> ticks_ms = axis_ticks(end_s * 1e3);
  const double axis_end_s = std::max(end_s, ticks_ms.back() / 1e3);
  const double pixels_per_s = (kPlotRight - kPlotLeft) / (axis_end_s > 0 ? axis_end_s : 1);
  const auto x_of = [&](double seconds) { return kPlotLeft + seconds * pixels_per_s; };

  // A row per recorded rank (an unrecorded one has no name: SimulationOptions's limit).
  const std::size_t ranks = timeline.rank_names.size();
  std::vector<std::size_t> drawn;
  for (std::size_t rank = 0; rank < ranks; ++rank) {
    if (!timeline.rank_names[rank].empty()) drawn.push_back(rank);
  }
  const double plot_bottom = kTop + static_cast<double>(drawn.size()) * (kRowHeight + kRowGap);
  std::string svg = fmt::format(
      "<svg class=\"timeline\" viewBox=\"0 0 {} {}\" width=\"100%\" role=\"img\" "
      "xmlns=\"http://www.w3.org/2000/svg\">\n"
      "<defs><pattern id=\"idle-hatch\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" "
      "patternTransform=\"rotate(45)\"><rect width=\"6\" height=\"6\" fill=\"#f2f2f2\"/>"
      "<rect width=\"2\" height=\"6\" fill=\"#cfcfcf\"/></pattern></defs>\n",
      svg_number(kWidth), svg_number(plot_bottom + kAxisHeight));
  for (const double tick : ticks_ms) {
    svg += fmt::format(
        "<line class=\"grid\" x1=\"{0}\" x2=\"{0}\" y1=\"{1}\" y2=\"{2}\"/>"
        "<text class=\"tick\" x=\"{0}\" y=\"{3}\">{4}</text>\n",
        svg_number(x_of(tick / 1e3)), svg_number(kTop - 4), svg_number(plot_bottom),
        svg_number(plot_bottom + 14), tick_label(tick));
  }
  svg += fmt::format("<text class=\"axis-title\" x=\"{}\" y=\"{}\">time in the step (ms)</text>\n",
                     svg_number((kPlotLeft + kPlotRight) / 2), svg_number(plot_bottom + 30));

  // Slices by rank, each rank's in the order recorded (per stream, in time).
  std::vector<std::vector<const simulator::TimelineSlice*>> by_rank(ranks);
  for (const simulator::TimelineSlice& slice : timeline.slices) {
    if (slice.rank >= 0 && static_cast<std::size_t>(slice.rank) < ranks) {
      by_rank[static_cast<std::size_t>(slice.rank)].push_back(&slice);
    }
  }
  // Collectives are recorded when their group resolves them, not in time order.
  for (auto& slices : by_rank) {
    std::stable_sort(slices.begin(), slices.end(),
                     [](const auto* a, const auto* b) { return a->start_s < b->start_s; });
  }
  for (std::size_t row = 0; row < drawn.size(); ++row) {
    const std::size_t rank = drawn[row];
    const double y = kTop + static_cast<double>(row) * (kRowHeight + kRowGap);
    const double pipeline_y = y + kComputeLane + kLaneGap;
    const double collective_y = pipeline_y + kSideLane + kLaneGap;
    svg += fmt::format(
        "<g class=\"rank-row\" data-rank=\"{}\">\n<text class=\"row-label\" x=\"{}\" "
        "y=\"{}\">{}</text>\n",
        rank, svg_number(kPlotLeft - 8), svg_number(y + kComputeLane / 2 + 4),
        html_escape(timeline.rank_names[rank]));
    const auto what = [&](const simulator::TimelineSlice& slice) {
      return fmt::format("{}: {}", timeline.rank_names[rank], slice.name);
    };
    {
      LaneRects compute(svg, y, kComputeLane);
      double free_s = 0;  // where the last compute slice ended
      const auto idle_until = [&](double until_s) {
        if ((until_s - free_s) * pixels_per_s >= kMinIdlePixels) {
          compute.add(kIdleStyle, x_of(free_s), x_of(until_s), "idle", free_s, until_s);
        }
      };
      for (const simulator::TimelineSlice* slice : by_rank[rank]) {
        if (slice->stream != simulator::Stream::compute) continue;
        idle_until(slice->start_s);
        Segments segments = compute_segments(*slice, simulation.costs);
        if (slice->duration_s * pixels_per_s < kMinSplitPixels) {
          // The kernels' part: the first, which every pass starts with (or its largest).
          const auto largest =
              std::max_element(segments.begin(), segments.end(),
                               [](const auto& a, const auto& b) { return a.second < b.second; });
          const TimePart main =
              segments.front().second > 0 ? segments.front().first : largest->first;
          segments = {{main, slice->duration_s}};
        }
        double start_s = slice->start_s;
        for (const auto& [part, seconds] : segments) {
          if (seconds <= 0) continue;
          compute.add(style_of(part), x_of(start_s), x_of(start_s + seconds), what(*slice), start_s,
                      start_s + seconds);
          start_s += seconds;
        }
        free_s = std::max(free_s, slice->start_s + slice->duration_s);
      }
      idle_until(end_s);
    }
    for (const simulator::Stream stream :
         {simulator::Stream::pipeline, simulator::Stream::data_parallel}) {
      LaneRects lane(svg, stream == simulator::Stream::pipeline ? pipeline_y : collective_y,
                     kSideLane);
      for (const simulator::TimelineSlice* slice : by_rank[rank]) {
        if (slice->stream != stream) continue;
        // A send of a few µs is still a mark a reader can find (LaneRects draws ≥ 0.5 px).
        lane.add(style_of(side_stream_part(*slice)), x_of(slice->start_s),
                 x_of(slice->start_s + slice->duration_s), what(*slice), slice->start_s,
                 slice->start_s + slice->duration_s);
      }
    }
    svg += "</g>\n";
  }
  return svg + "</svg>\n";
}

std::string timeline_legend_html() {
  std::vector<const PartStyle*> parts;
  for (const TimePart part :
       {TimePart::forward, TimePart::backward, TimePart::backward_weight, TimePart::recompute,
        TimePart::tp_comm, TimePart::cp_comm, TimePart::ep_comm, TimePart::host_issue,
        TimePart::pp_comm, TimePart::dp_comm, TimePart::optimizer}) {
    parts.push_back(&style_of(part));
  }
  std::string html = legend_html(parts);
  // Idle is drawn as a hatch, not a part's colour.
  html.insert(html.size() - std::string("</div>\n").size(),
              "<span class=\"item\"><span class=\"swatch idle-swatch\"></span>idle (pipeline "
              "bubble, waiting for data)</span>");
  return html;
}

}  // namespace strata::tools
