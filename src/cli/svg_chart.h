// A self-contained SVG bar chart: one or more panels side by side, one bar per category, each
// with its value written above it, an optional error bar (low–high) and an optional marker (a
// dashed tick across the bar, e.g. a predicted value); unavailable categories show "n/a" instead
// of a bar. No external fonts, scripts or styles: generic font families only, so any viewer
// (browser, rsvg-convert, GitHub) draws the same picture.
//
// Invariants a reader (or the unit test that parses the SVG back) can rely on:
//  - every bar is one <rect class="bar" data-panel=P data-category=C data-value=V ...> (C: the
//    category with its line break as a space), its
//    height proportional to V on the panel's linear axis that starts at 0;
//  - every y-axis tick is a <text class="tick" data-panel=P data-value=V y=...> whose y is the
//    tick's baseline + kTickTextDy, so two ticks give the axis mapping;
//  - error bars are <line class="errorbar" data-panel=P data-category=C y1=low-y y2=high-y>;
//  - markers are <line class="marker" data-panel=P data-category=C y1=y2=marker-y>;
//  - the written value of a bar is <text class="value" data-panel=P data-category=C>, just
//    above the bar's top, with a white halo so an error bar or marker crossing it stays legible.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace lj::cli {

// The tick labels' text baseline sits this far below the tick line (centres the label on it).
inline constexpr double kTickTextDy = 4.0;

struct ChartBar {
  std::string category;  // the x label, e.g. "+compile"; may hold one '\n' for two lines
  bool available = true;
  std::string unavailable_text = "n/a";
  double value = 0;                 // in the panel's unit
  std::optional<double> low, high;  // error bar ends (spread), same unit
  std::optional<double> marker;     // e.g. predicted value, same unit
  std::string value_text;           // written above the bar ("1474")
  bool highlight = false;           // drawn in the second colour (e.g. a peer)
};

struct ChartPanel {
  std::string title;          // "Throughput"
  std::string axis_label;     // "tokens/s (median; bars: min–max)"
  std::string marker_legend;  // "predicted" ("" when no bar has a marker)
  std::vector<ChartBar> bars;
};

struct BarChart {
  std::string title;
  std::vector<std::string> subtitle_lines;  // under the title, smaller
  std::string highlight_legend;             // what the second colour means ("" when unused)
  std::vector<ChartPanel> panels;
};

// A "nice" axis top for data reaching `max_value` (1, 2, 2.5 or 5 × 10^k, at or above it) and
// the tick step; max_value <= 0 gives an axis of 0..1.
struct Axis {
  double top = 1;
  double step = 0.2;
};
Axis nice_axis(double max_value);

std::string render_bar_chart_svg(const BarChart& chart);

// Escapes &, <, >, " and ' for SVG/XML text and attribute values.
std::string xml_escape(const std::string& s);

}  // namespace lj::cli
