#include "pipeline_parallel/simulator.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <tuple>

namespace trident::pipeline_parallel {

double Simulation::bubble_fraction(int rank) const {
  return busy[rank] > 0 ? (makespan - busy[rank]) / busy[rank] : 0.0;
}

double analytic_bubble_fraction(const ScheduleConfig& c) {
  return analytic_bubble_fraction(c, 1.0, 1.0, 1.0);
}

double analytic_bubble_fraction(const ScheduleConfig& c, double tf, double tb, double tw) {
  if (c.kind == ScheduleKind::kZeroBubbleH1)
    return (c.stages - 1) * (tf + tb - tw) / (c.microbatches * (tf + tb + tw));
  double v = c.kind == ScheduleKind::kInterleaved ? c.chunks : 1;
  return (c.stages - 1) / (v * c.microbatches);
}

Simulation simulate(const ScheduleConfig& c, double forward_time, double backward_time,
                    double comm_time, double weight_time) {
  const double f = forward_time / c.chunks, w = weight_time / c.chunks;
  const double b = (c.splits_backward() ? backward_time : backward_time + weight_time) / c.chunks;
  OpTimes times;
  times.forward.assign(c.stages, std::vector<double>(c.chunks, f));
  times.backward.assign(c.stages, std::vector<double>(c.chunks, b));
  times.weight.assign(c.stages, std::vector<double>(c.chunks, w));
  times.comm = comm_time;
  Simulation sim = simulate(c, times);
  sim.forward_time = forward_time, sim.backward_time = backward_time;
  sim.weight_time = weight_time;
  return sim;
}

Simulation simulate(const ScheduleConfig& c, const OpTimes& times) {
  const int p = c.stages;
  std::vector<std::vector<PipelineOp>> lists(p);
  for (int s = 0; s < p; ++s) lists[s] = build_schedule(c, s);
  Simulation sim;
  sim.ranks.resize(p);
  sim.busy.assign(p, 0.0);
  std::vector<size_t> next(p, 0);
  std::vector<double> clock(p, 0.0);
  std::map<std::tuple<int, int, int>, double> sent;  // (from, to, tag) -> arrival time
  auto duration = [&](int s, const PipelineOp& op) {
    const auto& table = op.type == OpType::kForward    ? times.forward
                        : op.type == OpType::kBackward ? times.backward
                                                       : times.weight;
    return table[s][op.chunk];
  };
  bool progress = true;
  while (progress) {
    progress = false;
    for (int s = 0; s < p; ++s) {
      while (next[s] < lists[s].size()) {
        const PipelineOp& op = lists[s][next[s]];
        double start = clock[s], end = clock[s];
        if (op.is_compute()) {
          end = start + duration(s, op);
          sim.busy[s] += end - start;
        } else if (op.is_send()) {
          sent[{s, op.peer, message_tag(c, op, s)}] = start + times.comm;
        } else {
          auto it = sent.find({op.peer, s, message_tag(c, op, s)});
          if (it == sent.end()) break;  // the matching send has not happened yet
          end = std::max(start, it->second);
          sent.erase(it);
        }
        sim.ranks[s].push_back({op, start, end});
        clock[s] = end;
        ++next[s];
        progress = true;
      }
    }
  }
  for (int s = 0; s < p; ++s) {
    sim.makespan = std::max(sim.makespan, clock[s]);
    if (next[s] < lists[s].size()) {
      sim.deadlock = true;
      sim.deadlock_at +=
          "rank " + std::to_string(s) + " waits at " + to_string(lists[s][next[s]]) + "; ";
    }
  }
  if (!sent.empty() && !sim.deadlock) {
    sim.deadlock = true;
    sim.deadlock_at = std::to_string(sent.size()) + " messages were never received";
  }
  return sim;
}

namespace {

// Forward blue, backward orange, W green (shade = model chunk); communication grey.
const char* box_colour(const std::string& category, int chunk) {
  static const char* forward_colours[] = {"#9ecae1", "#c6dbef", "#6baed6", "#deebf7"};
  static const char* backward_colours[] = {"#fdae6b", "#fdd0a2", "#fd8d3c", "#feedde"};
  static const char* weight_colours[] = {"#a1d99b", "#c7e9c0", "#74c476", "#e5f5e0"};
  if (category == "forward") return forward_colours[chunk % 4];
  if (category == "backward") return backward_colours[chunk % 4];
  if (category == "weight") return weight_colours[chunk % 4];
  if (category == "optimizer") return "#bcbddc";
  if (category == "data-parallel") return "#fdd835";
  if (category == "step") return "#333333";
  return "#d9d9d9";  // send, recv, wait
}

}  // namespace

std::string escape_xml(const std::string& text) {
  std::string out;
  for (char ch : text) {
    if (ch == '<')
      out += "&lt;";
    else if (ch == '>')
      out += "&gt;";
    else if (ch == '&')
      out += "&amp;";
    else if (ch == '"')
      out += "&quot;";
    else
      out += ch;
  }
  return out;
}

std::string draw_boxes_svg(const BoxDrawing& d) {
  // The row names' column fits the longest (about 6.5 px a character at font size 12):
  // "rank 12 (t 1, c 1, d 0, p 3)" needs more than "rank 3".
  size_t longest = 0;
  for (const std::string& name : d.row_names) longest = std::max(longest, name.size());
  const double row = 34.0, left = std::max(70.0, 16 + 6.5 * longest), top = 30.0;
  const double width = left + d.span * d.unit + 20, rows = (double)d.row_names.size();
  const double height = top + rows * row + 40;
  std::string svg;
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
                "font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%%\" "
                "height=\"100%%\" fill=\"white\"/>\n<text x=\"%.0f\" y=\"18\">",
                width, height, left);
  svg += buf + escape_xml(d.title) + "</text>\n";
  for (size_t r = 0; r < d.row_names.size(); ++r) {
    std::snprintf(buf, sizeof buf, "<text x=\"8\" y=\"%.0f\">", top + r * row + row / 2 + 4);
    svg += buf + escape_xml(d.row_names[r]) + "</text>\n";
  }
  for (const DrawnBox& b : d.boxes) {
    const double x = left + b.start * d.unit, y = top + b.row * row;
    const double w = std::max(0.5, (b.end - b.start) * d.unit);
    std::snprintf(buf, sizeof buf,
                  "<rect class=\"op\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
                  "fill=\"%s\" stroke=\"#333\" stroke-width=\"0.5\">",
                  x, y + 2, w, row - 6, box_colour(b.category, b.chunk));
    svg += buf;
    if (!b.tooltip.empty()) svg += "<title>" + escape_xml(b.tooltip) + "</title>";
    svg += "</rect>";
    // A label wider than its box would cover the neighbours' (measured ops can be thin).
    if (!b.label.empty() && w >= 7.0 * b.label.size()) {
      std::snprintf(buf, sizeof buf, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">",
                    x + w / 2, y + row / 2 + 3);
      svg += buf + escape_xml(b.label) + "</text>";
    }
    svg += "\n";
  }
  std::snprintf(buf, sizeof buf, "<text x=\"%.0f\" y=\"%.0f\">", left, top + rows * row + 24);
  return svg + buf + escape_xml(d.legend) + "</text>\n</svg>\n";
}

std::string render_svg(const ScheduleConfig& c, const Simulation& sim) {
  BoxDrawing d;
  char buf[256];
  std::snprintf(buf, sizeof buf, "%s p=%d v=%d m=%d: bubble %.3f (analytic %.3f)",
                schedule_name(c.kind).c_str(), c.stages, c.chunks, c.microbatches,
                sim.bubble_fraction(0),
                analytic_bubble_fraction(c, sim.forward_time, sim.backward_time, sim.weight_time));
  d.title = buf;
  d.legend = std::string("blue: forward, orange: backward") +
             (c.splits_backward() ? " (input gradient), green: weight gradient" : "") +
             " (shade = model chunk); numbers are micro-batches; white gaps are the bubble";
  d.span = sim.makespan;
  for (int s = 0; s < c.stages; ++s) {
    d.row_names.push_back("rank " + std::to_string(s));
    for (const TimedOp& t : sim.ranks[s])
      if (t.op.is_compute())
        d.boxes.push_back({s, t.start, t.end, op_category(t.op), t.op.chunk,
                           std::to_string(t.op.microbatch + 1), ""});
  }
  return draw_boxes_svg(d);
}

}  // namespace trident::pipeline_parallel
