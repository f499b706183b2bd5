// `packoracle verify --html OUT`: one self-contained HTML page for a whole audit (jobs::AuditResult): the
// verdict, the policy and its differences, the notes, the per-step table, and every violation with its
// location, expected vs actual, the drawn row (the terminal text) and the row's picture (draw's SVG, inline).
// No external resource: inline CSS and SVG, no script. Links both ways: a step's row in the table links to
// its violations (#violation-N), a violation links back to its step (#step-S); a violation on a row drawn
// for an earlier one links to that picture.
//
//   const jobs::AuditResult result = jobs::VerifyFiles(options);
//   jobs::WriteAuditHtml("audit.html", jobs::RenderAuditHtml(result));
//
// Pictures are drawn from the files (jobs::Draw with the violation's line and row, under the policy the audit
// required), so a result built from in-memory readers gets its rows' text but no pictures. Every text from
// the dump (file names, uids, messages) is escaped.
#pragma once

#include <string>

#include "packoracle/jobs/verify.h"

namespace packoracle::jobs {

struct AuditHtmlOptions {
  int max_pictures = 20;  // rows drawn as SVG (each re-reads its file); later violations keep their text
};

std::string RenderAuditHtml(const AuditResult& result, const AuditHtmlOptions& options = {});

// Writes the page; InputError naming `path` when it cannot.
void WriteAuditHtml(const std::string& path, const std::string& html);

}  // namespace packoracle::jobs
