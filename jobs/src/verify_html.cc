// `packoracle verify --html OUT` (verify_html.h): the audit as one self-contained page.
#include "packoracle/jobs/verify_html.h"

#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "packoracle/jobs/draw.h"
#include "packoracle/jobs/svg.h"
#include "packoracle/oracle.h"

namespace packoracle::jobs {
namespace {

// The entities of SvgEscape (& < > " ') are HTML's too: one escape for text and attribute values.
std::string Esc(const std::string& text) { return SvgEscape(text); }

std::string Fixed(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

constexpr const char* kStyle = R"(
body { font-family: DejaVu Sans, Helvetica, Arial, sans-serif; margin: 24px; color: #222; }
h1 { font-size: 20px; } h2 { font-size: 17px; margin-top: 28px; } h3 { font-size: 15px; margin: 0 0 6px; }
.verdict.clean { color: #2ca02c; } .verdict.violations { color: #d62728; }
table.steps { border-collapse: collapse; font-family: DejaVu Sans Mono, monospace; font-size: 13px; }
table.steps th, table.steps td { border: 1px solid #ccc; padding: 3px 8px; text-align: right; }
table.steps tr.has-violations td { background: #fde0e0; }
tr:target, section:target { outline: 3px solid #1f77b4; }
section.violation { border: 1px solid #ddd; border-left: 4px solid #d62728; padding: 10px 14px; margin: 14px 0; width: max-content; min-width: 90%; }
pre { font-family: DejaVu Sans Mono, monospace; font-size: 12px; background: #f7f7f7; padding: 8px; overflow-x: auto; }
section.violation p { max-width: 120ch; overflow-wrap: anywhere; }  /* a 4,096-slot "expected" list wraps */
.picture { margin: 8px 0; } .picture svg { display: block; }  /* the page widens: the whole picture on it */
.where { font-family: DejaVu Sans Mono, monospace; font-size: 13px; }
)";

// Where each violation's row is drawn: the first violation of each (file, line, row) holds its picture.
using RowKey = std::tuple<std::string, std::int64_t, std::int64_t>;

// The pictures of the first `max_pictures` rows that have violations, each file read once: RowKey → the SVG
// inline (without its XML declaration), or a paragraph saying why there is none.
std::map<RowKey, std::string> DrawPictures(const AuditResult& result, int max_pictures) {
  std::map<std::string, std::vector<RowAt>> wanted;  // per file, in violation order
  std::map<RowKey, std::string> out;
  for (const AuditViolation& v : result.violations) {
    if (v.row < 0 || v.line <= 0 || static_cast<int>(out.size()) >= max_pictures) continue;
    if (out.emplace(RowKey{v.file, v.line, v.row}, "").second) wanted[v.file].push_back({v.line, v.row});
  }
  for (const auto& [file, rows] : wanted) {
    DrawOptions o;
    o.file = file;
    o.policy = result.required_policy;
    std::vector<DrawnRow> drawn;
    try {
      drawn = DrawRowsAt(o, rows);
    } catch (const std::exception& e) {  // the file cannot be read (again): no picture, the audit stands
      drawn.assign(rows.size(), DrawnRow{"", e.what()});
    }
    for (std::size_t k = 0; k < rows.size(); ++k) {
      const std::string& svg = drawn[k].svg;
      const auto root = svg.find("<svg");
      out[{file, rows[k].line, rows[k].row}] =
          root != std::string::npos ? svg.substr(root) : "<p class=\"no-picture\">no picture: " + Esc(drawn[k].problem) + "</p>\n";
    }
  }
  return out;
}

void RenderHead(const AuditResult& r, std::ostream& out) {
  out << "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>packoracle verify: "
      << (r.clean() ? "clean" : std::to_string(r.violations.size()) + " violations") << "</title>\n<style>" << kStyle
      << "</style>\n</head>\n<body>\n";
  out << "<h1>packoracle verify</h1>\n<p class=\"verdict " << (r.clean() ? "clean\">clean" : "violations\">")
      << (r.clean() ? "" : std::to_string(r.violations.size()) + " violation" + (r.violations.size() == 1 ? "" : "s"))
      << "</p>\n<ul class=\"files\">\n";
  for (const auto& f : r.files) out << "<li class=\"file\">" << Esc(f) << "</li>\n";
  out << "</ul>\n<p class=\"policy\">policy: " << Esc(r.required_policy.preset.empty() ? "(custom)" : r.required_policy.preset)
      << "</p>\n";
  for (const auto& d : r.policy_differences) out << "<p class=\"policy-difference\">" << Esc(d) << "</p>\n";
  for (const auto& n : r.notes)
    out << "<p class=\"note\">note: " << Esc(n.text) << " (" << n.steps << " step" << (n.steps == 1 ? "" : "s") << ")</p>\n";
  const AuditTotals& t = r.totals;
  out << "<p class=\"totals\">" << t.rows << " rows, " << t.slots << " slots, " << t.tokens << " tokens, "
      << Fixed(t.valid_targets) << " valid targets, utilization " << Fixed(t.utilization) << ", " << t.documents
      << " documents</p>\n";
}

void RenderSteps(const AuditResult& r, std::ostream& out) {
  std::map<std::int64_t, std::vector<std::size_t>> of_step;  // step → its violations' indices
  for (std::size_t i = 0; i < r.violations.size(); ++i) of_step[r.violations[i].step].push_back(i);
  out << "<h2 id=\"steps\">Steps</h2>\n<table class=\"steps\">\n<tr><th>step</th><th>micro-batches</th><th>rows</th>"
         "<th>slots</th><th>valid targets</th><th>reported denominators</th><th>declared objective</th>"
         "<th>global token mean</th><th>violations</th></tr>\n";
  for (const auto& s : r.steps) {
    const auto& mine = of_step[s.step];
    std::string dens;
    for (double d : s.reported_denominators) dens += (dens.empty() ? "" : " ") + Fixed(d);
    out << "<tr class=\"step" << (mine.empty() ? "" : " has-violations") << "\" id=\"step-" << s.step << "\"><td>"
        << s.step << "</td><td>" << s.microbatches << "</td><td>" << s.rows << "</td><td>" << s.slots << "</td><td>"
        << Fixed(s.valid_targets) << "</td><td>" << (dens.empty() ? "-" : dens) << "</td><td>"
        << (s.declared_objective ? Fixed(*s.declared_objective) : "-") << "</td><td>"
        << (s.token_mean ? Fixed(*s.token_mean) : "-") << "</td><td>";
    for (std::size_t k = 0; k < mine.size() && k < 12; ++k)
      out << "<a class=\"to-violation\" href=\"#violation-" << mine[k] << "\">#" << mine[k] << "</a> ";
    if (mine.size() > 12) out << "… " << mine.size() - 12 << " more";
    out << "</td></tr>\n";
  }
  out << "</table>\n";
}

// Expected vs actual; a long one (a whole row's positions) shortened, the full text folded under it.
void RenderExpected(const AuditViolation& v, std::ostream& out) {
  constexpr std::size_t kShown = 240;
  auto shorten = [](const std::string& s) { return s.size() <= kShown ? s : s.substr(0, kShown) + " …"; };
  out << "<p class=\"expected\">expected " << Esc(shorten(v.expected)) << ", actual " << Esc(shorten(v.actual)) << "</p>\n";
  if (v.expected.size() > kShown || v.actual.size() > kShown) {
    out << "<details class=\"expected-full\"><summary>expected and actual in full</summary><p>expected "
        << Esc(v.expected) << "</p><p>actual " << Esc(v.actual) << "</p></details>\n";
  }
}

void RenderViolation(const AuditResult& r, std::size_t i, const std::map<RowKey, std::string>& pictures,
                     std::map<RowKey, std::size_t>& drawn, const AuditHtmlOptions& o, std::ostream& out) {
  const AuditViolation& v = r.violations[i];
  out << "<section class=\"violation\" id=\"violation-" << i << "\" data-invariant=\"" << Name(v.invariant) << "\">\n"
      << "<h3>#" << i << " " << Name(v.invariant) << "</h3>\n<p class=\"where\">" << Esc(v.file) << ":" << v.line << " ";
  if (v.step >= 0) {
    out << "<a class=\"to-step\" href=\"#step-" << v.step << "\">step " << v.step << "</a>";
  } else {
    out << "(no step)";
  }
  if (v.micro_step >= 0) out << ", micro_step " << v.micro_step << ", rank " << v.rank;
  if (v.row >= 0) out << ", row " << v.row;
  if (v.slot >= 0) out << ", slot " << v.slot;
  out << "</p>\n<p class=\"message\">" << Esc(v.message) << "</p>\n";
  if (!v.expected.empty() || !v.actual.empty()) RenderExpected(v, out);
  if (!v.drawing.empty()) out << "<pre class=\"drawn-row\">" << Esc(v.drawing) << "</pre>\n";
  if (v.row >= 0 && v.line > 0) {
    const RowKey key{v.file, v.line, v.row};
    if (auto it = drawn.find(key); it != drawn.end()) {
      out << "<p class=\"same-row\">the row is drawn under <a class=\"to-picture\" href=\"#violation-" << it->second
          << "\">#" << it->second << "</a></p>\n";
    } else if (auto picture = pictures.find(key); picture != pictures.end()) {
      drawn[key] = i;
      out << "<div class=\"picture\">\n" << picture->second << "</div>\n";
    } else {
      out << "<p class=\"no-picture\">not drawn: the page draws the first " << o.max_pictures << " rows</p>\n";
    }
  }
  out << "</section>\n";
}

}  // namespace

std::string RenderAuditHtml(const AuditResult& result, const AuditHtmlOptions& options) {
  std::ostringstream out;
  RenderHead(result, out);
  RenderSteps(result, out);
  out << "<h2 id=\"violations\">Violations</h2>\n";
  if (result.clean()) out << "<p class=\"clean\">none: every step agrees with the policy</p>\n";
  const std::map<RowKey, std::string> pictures = DrawPictures(result, options.max_pictures);
  std::map<RowKey, std::size_t> drawn;
  for (std::size_t i = 0; i < result.violations.size(); ++i) RenderViolation(result, i, pictures, drawn, options, out);
  out << "</body>\n</html>\n";
  return out.str();
}

void WriteAuditHtml(const std::string& path, const std::string& html) {
  std::ofstream file(path, std::ios::binary);
  if (!file || !(file << html) || !file.flush()) throw InputError(path + ": cannot write the HTML page");
}

}  // namespace packoracle::jobs
