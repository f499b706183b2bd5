// `packoracle verify --html` (jobs::RenderAuditHtml): the page of a dump with violations links its steps and
// violations both ways and draws the violating rows; a clean dump's page has none; text from the dump is
// escaped; a page that cannot be written names its path.
#include <gtest/gtest.h>

#include <string>

#include "packoracle/jobs/verify.h"
#include "packoracle/jobs/verify_html.h"
#include "packoracle/oracle.h"

namespace packoracle::jobs {
namespace {

const std::string kDumps = std::string(PACKORACLE_SOURCE_DIR) + "/examples/dumps/";

std::size_t Count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

AuditResult Audit(const std::string& file) {
  VerifyOptions options;
  options.files = {kDumps + file};
  return VerifyFiles(options);
}

TEST(VerifyHtml, ViolationsAndStepsLinkBothWaysAndTheRowsAreDrawn) {
  const AuditResult result = Audit("megatron_training_copy_buggy.jsonl");
  ASSERT_FALSE(result.clean());
  const std::string page = RenderAuditHtml(result);
  EXPECT_EQ(page.find("<!DOCTYPE html>"), 0u);
  const std::size_t n = result.violations.size();
  EXPECT_EQ(Count(page, "<section class=\"violation\" id=\"violation-"), n);
  for (std::size_t i = 0; i < n; ++i) {
    EXPECT_NE(page.find("href=\"#violation-" + std::to_string(i) + "\""), std::string::npos) << i;
  }
  EXPECT_EQ(Count(page, "<a class=\"to-step\" href=\"#step-0\">"), n);
  EXPECT_NE(page.find("<tr class=\"step has-violations\" id=\"step-0\">"), std::string::npos);
  // Each violating row drawn once (two rows here), inline, with the positions the policy wants marked.
  EXPECT_EQ(Count(page, "<div class=\"picture\">\n<svg "), 2u);
  EXPECT_EQ(page.find("<?xml"), std::string::npos);
  EXPECT_NE(page.find("class=\"position disagree\""), std::string::npos);
  EXPECT_NE(page.find("<pre class=\"drawn-row\">"), std::string::npos);
  // Self-contained: nothing fetched.
  EXPECT_EQ(page.find("<script"), std::string::npos);
  EXPECT_EQ(page.find("<link"), std::string::npos);
  EXPECT_EQ(page.find("src="), std::string::npos);
}

TEST(VerifyHtml, ACleanDumpHasNoViolations) {
  const std::string page = RenderAuditHtml(Audit("hf_flatten_clean.jsonl"));
  EXPECT_EQ(page.find("class=\"violation\""), std::string::npos);
  EXPECT_EQ(page.find("class=\"picture\""), std::string::npos);
  EXPECT_NE(page.find("<p class=\"clean\">"), std::string::npos);
  EXPECT_NE(page.find("id=\"step-0\""), std::string::npos);
}

TEST(VerifyHtml, TextFromTheDumpIsEscaped) {
  AuditResult result;
  result.exit_code = 1;
  result.files = {"rank<0>&.jsonl"};
  AuditViolation v;
  v.file = "rank<0>&.jsonl";
  v.step = 0;
  v.message = "document <script>alert(1)</script> \"x\"";
  v.drawing = "  uid <b>\n";
  result.violations.push_back(v);
  const std::string page = RenderAuditHtml(result);
  EXPECT_EQ(page.find("<script>"), std::string::npos);
  EXPECT_EQ(page.find("<b>"), std::string::npos);
  EXPECT_NE(page.find("document &lt;script&gt;alert(1)&lt;/script&gt; &quot;x&quot;"), std::string::npos);
  EXPECT_NE(page.find("rank&lt;0&gt;&amp;.jsonl"), std::string::npos);
}

TEST(VerifyHtml, AnUnwritablePathIsNamed) {
  try {
    WriteAuditHtml("/nonexistent-dir/page.html", "<p>x</p>");
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent-dir/page.html: cannot write the HTML page"), std::string::npos);
  }
}

}  // namespace
}  // namespace packoracle::jobs
