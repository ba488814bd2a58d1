// The SVG bar chart; see svg_chart.h for what the markup promises.
#include "cli/svg_chart.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace lj::cli {
namespace {

// Layout, in SVG pixels.
constexpr double kAxisW = 78;     // left of a plot: tick labels and the rotated axis label
constexpr double kSlotW = 118;    // one bar's slot
constexpr double kBarW = 64;      // the bar within its slot
constexpr double kPanelGap = 36;  // right of a plot
constexpr double kPlotH = 300;
constexpr double kTitleH = 34;
constexpr double kSubtitleLineH = 16;
constexpr double kPanelTitleH = 30;
constexpr double kXLabelH = 44;
constexpr double kLegendH = 26;
constexpr const char* kFont = "DejaVu Sans, Liberation Sans, Arial, Helvetica, sans-serif";
constexpr const char* kBarColour = "#4a7ab8";
constexpr const char* kHighlightColour = "#d9822b";

std::string num(double v) {
  return fmt::format("{:.2f}", v);
}

// Tick label: as few decimals as the step needs.
std::string tick_text(double v, double step) {
  int decimals = 0;
  while (decimals < 6) {
    const double scaled = step * std::pow(10.0, decimals);
    if (std::abs(scaled - std::round(scaled)) < 1e-9 * std::max(1.0, scaled)) break;
    ++decimals;
  }
  return fmt::format("{:.{}f}", v, decimals);
}

std::vector<std::string> split_lines(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    const size_t nl = s.find('\n', start);
    out.push_back(s.substr(start, nl == std::string::npos ? std::string::npos : nl - start));
    if (nl == std::string::npos) break;
    start = nl + 1;
  }
  return out;
}

double panel_width(const ChartPanel& p) {
  return kAxisW + kSlotW * static_cast<double>(std::max<size_t>(p.bars.size(), 1)) + kPanelGap;
}

// One panel at horizontal offset `x0`, its plot's top at `top`.
void render_panel(const ChartPanel& p, int index, double x0, double top, std::string* out) {
  std::string& s = *out;
  const std::string pid = std::to_string(index);
  double max_value = 0;
  for (const ChartBar& b : p.bars) {
    if (!b.available) continue;
    max_value = std::max({max_value, b.value, b.high.value_or(0), b.marker.value_or(0)});
  }
  const Axis axis = nice_axis(max_value * 1.08);  // headroom for the value written above
  const double plot_x = x0 + kAxisW;
  const double plot_w = kSlotW * static_cast<double>(std::max<size_t>(p.bars.size(), 1));
  const double base_y = top + kPlotH;
  const auto y_of = [&](double v) { return base_y - v / axis.top * kPlotH; };

  s += fmt::format(R"(<g class="panel" data-panel="{}">)"
                   "\n",
                   pid);
  s += fmt::format(
      R"(<text x="{}" y="{}" font-size="15" font-weight="bold" text-anchor="middle">{}</text>)"
      "\n",
      num(plot_x + plot_w / 2), num(top - 12), xml_escape(p.title));
  // Grid and ticks.
  const int n_ticks = static_cast<int>(std::lround(axis.top / axis.step));
  for (int i = 0; i <= n_ticks; ++i) {
    const double v = axis.step * i;
    const double y = y_of(v);
    s += fmt::format(R"(<line x1="{}" y1="{}" x2="{}" y2="{}" stroke="#dddddd"/>)"
                     "\n",
                     num(plot_x), num(y), num(plot_x + plot_w), num(y));
    s += fmt::format(
        R"(<text class="tick" data-panel="{}" data-value="{}" x="{}" y="{}" font-size="11" )"
        R"(text-anchor="end">{}</text>)"
        "\n",
        pid, v, num(plot_x - 6), num(y + kTickTextDy), tick_text(v, axis.step));
  }
  // Axes.
  s += fmt::format(R"(<line x1="{0}" y1="{1}" x2="{0}" y2="{2}" stroke="#333333"/>)"
                   "\n",
                   num(plot_x), num(top), num(base_y));
  s += fmt::format(R"(<line x1="{0}" y1="{2}" x2="{1}" y2="{2}" stroke="#333333"/>)"
                   "\n",
                   num(plot_x), num(plot_x + plot_w), num(base_y));
  const double label_x = x0 + 16;
  const double label_y = top + kPlotH / 2;
  s +=
      fmt::format(R"(<text class="axis-label" x="{0}" y="{1}" font-size="12" text-anchor="middle" )"
                  R"x(transform="rotate(-90 {0} {1})">{2}</text>)x"
                  "\n",
                  num(label_x), num(label_y), xml_escape(p.axis_label));
  // Bars.
  for (size_t i = 0; i < p.bars.size(); ++i) {
    const ChartBar& b = p.bars[i];
    std::string key = b.category;  // data-category: the label on one line
    std::replace(key.begin(), key.end(), '\n', ' ');
    const std::string cat = xml_escape(key);
    const double cx = plot_x + kSlotW * (static_cast<double>(i) + 0.5);
    const double bx = cx - kBarW / 2;
    double text_y = base_y - 6;
    if (b.available) {
      const double y = y_of(b.value);
      s += fmt::format(
          R"(<rect class="bar" data-panel="{}" data-category="{}" data-value="{}" x="{}" y="{}" )"
          R"(width="{}" height="{}" fill="{}"/>)"
          "\n",
          pid, cat, b.value, num(bx), num(y), num(kBarW), num(base_y - y),
          b.highlight ? kHighlightColour : kBarColour);
      text_y = y - 6;
      if (b.low && b.high) {
        const double ylo = y_of(*b.low), yhi = y_of(*b.high);
        s += fmt::format(
            R"(<line class="errorbar" data-panel="{0}" data-category="{1}" x1="{2}" y1="{3}" )"
            R"(x2="{2}" y2="{4}" stroke="#222222" stroke-width="1.5"/>)"
            "\n",
            pid, cat, num(cx), num(ylo), num(yhi));
        for (const double ye : {ylo, yhi}) {
          s += fmt::format(
              R"(<line class="errorcap" x1="{0}" y1="{2}" x2="{1}" y2="{2}" stroke="#222222" )"
              R"(stroke-width="1.5"/>)"
              "\n",
              num(cx - 7), num(cx + 7), num(ye));
        }
      }
      if (b.marker) {
        const double ym = y_of(*b.marker);
        s += fmt::format(
            R"(<line class="marker" data-panel="{0}" data-category="{1}" x1="{2}" y1="{4}" x2="{3}" )"
            R"(y2="{4}" stroke="#c0392b" stroke-width="2" stroke-dasharray="5,3"/>)"
            "\n",
            pid, cat, num(bx - 6), num(bx + kBarW + 6), num(ym));
      }
      s += fmt::format(R"(<text class="value" data-panel="{}" data-category="{}" x="{}" y="{}" )"
                       R"(font-size="12" font-weight="bold" text-anchor="middle" stroke="#ffffff" )"
                       R"(stroke-width="3" paint-order="stroke">{}</text>)"
                       "\n",
                       pid, cat, num(cx), num(text_y), xml_escape(b.value_text));
    } else {
      s += fmt::format(
          R"(<text class="unavailable" data-panel="{}" data-category="{}" x="{}" y="{}" )"
          R"(font-size="12" font-style="italic" fill="#777777" text-anchor="middle">{}</text>)"
          "\n",
          pid, cat, num(cx), num(text_y), xml_escape(b.unavailable_text));
    }
    const auto lines = split_lines(b.category);
    for (size_t l = 0; l < lines.size(); ++l) {
      s += fmt::format(
          R"(<text class="category" x="{}" y="{}" font-size="12" text-anchor="middle">{}</text>)"
          "\n",
          num(cx), num(base_y + 18 + 15 * static_cast<double>(l)), xml_escape(lines[l]));
    }
  }
  if (!p.marker_legend.empty()) {
    const double ly = base_y + kXLabelH + 12;
    s += fmt::format(
        R"(<line x1="{0}" y1="{2}" x2="{1}" y2="{2}" stroke="#c0392b" stroke-width="2" )"
        R"(stroke-dasharray="5,3"/>)"
        "\n",
        num(plot_x), num(plot_x + 24), num(ly));
    s += fmt::format(R"(<text x="{}" y="{}" font-size="11">{}</text>)"
                     "\n",
                     num(plot_x + 30), num(ly + 4), xml_escape(p.marker_legend));
  }
  s += "</g>\n";
}

}  // namespace

Axis nice_axis(double max_value) {
  if (!(max_value > 0)) return Axis{};
  const double mag = std::pow(10.0, std::floor(std::log10(max_value)));
  // Tops (x 10^k) and their steps: four to six intervals each.
  constexpr double kTops[][2] = {{1, 0.2}, {1.5, 0.25}, {2, 0.5}, {2.5, 0.5}, {3, 0.5},
                                 {4, 1},   {5, 1},      {6, 1},   {8, 2},     {10, 2}};
  for (const auto& t : kTops) {
    if (t[0] * mag >= max_value * (1 - 1e-12)) return Axis{t[0] * mag, t[1] * mag};
  }
  return Axis{10 * mag, 2 * mag};
}

std::string xml_escape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (const char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string render_bar_chart_svg(const BarChart& chart) {
  double width = 0;
  for (const ChartPanel& p : chart.panels) width += panel_width(p);
  width = std::max(width, 480.0);
  const double header_h =
      kTitleH + kSubtitleLineH * static_cast<double>(chart.subtitle_lines.size()) + kPanelTitleH;
  const bool legend = !chart.highlight_legend.empty();
  const double height = header_h + kPlotH + kXLabelH + kLegendH + (legend ? kLegendH : 0) + 8;
  std::string s;
  s += fmt::format(
      R"(<svg xmlns="http://www.w3.org/2000/svg" width="{0}" height="{1}" viewBox="0 0 {0} {1}" )"
      R"(font-family="{2}">)"
      "\n",
      num(width), num(height), kFont);
  s += fmt::format(R"(<rect x="0" y="0" width="{}" height="{}" fill="#ffffff"/>)"
                   "\n",
                   num(width), num(height));
  s +=
      fmt::format(R"(<text class="title" x="16" y="24" font-size="17" font-weight="bold">{}</text>)"
                  "\n",
                  xml_escape(chart.title));
  for (size_t i = 0; i < chart.subtitle_lines.size(); ++i) {
    s += fmt::format(
        R"(<text class="subtitle" x="16" y="{}" font-size="12" fill="#444444">{}</text>)"
        "\n",
        num(kTitleH + 10 + kSubtitleLineH * static_cast<double>(i)),
        xml_escape(chart.subtitle_lines[i]));
  }
  double x0 = 0;
  for (size_t i = 0; i < chart.panels.size(); ++i) {
    render_panel(chart.panels[i], static_cast<int>(i), x0, header_h, &s);
    x0 += panel_width(chart.panels[i]);
  }
  if (legend) {
    const double ly = height - kLegendH + 4;
    s += fmt::format(R"(<rect x="16" y="{}" width="14" height="14" fill="{}"/>)"
                     "\n",
                     num(ly - 11), kBarColour);
    s += fmt::format(R"(<text x="36" y="{}" font-size="11">ljperf</text>)"
                     "\n",
                     num(ly));
    s += fmt::format(R"(<rect x="90" y="{}" width="14" height="14" fill="{}"/>)"
                     "\n",
                     num(ly - 11), kHighlightColour);
    s += fmt::format(R"(<text x="110" y="{}" font-size="11">{}</text>)"
                     "\n",
                     num(ly), xml_escape(chart.highlight_legend));
  }
  s += "</svg>\n";
  return s;
}

}  // namespace lj::cli
