// Every relative link in README.md, CHANGELOG.md and docs/*.md names a file
// that exists, and every #anchor a heading of that file (GitHub's slugs);
// every alert's runbook_url (docker/prometheus/rules.yml, and the anchors
// recovery_service derives from its alert names) is a runbook entry in
// docs/operations.md.
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace outbox {
namespace {

namespace fs = std::filesystem;

const fs::path kRoot = OUTBOX_SOURCE_DIR;

std::string Read(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

bool IsFence(const std::string& line) {
  const size_t start = line.find_first_not_of(' ');
  return start != std::string::npos && line.compare(start, 3, "```") == 0;
}

// GitHub's anchor of a heading: lower case, inline markup and punctuation
// dropped (letters, digits, '-', '_' and non-ASCII kept), spaces to '-'.
std::string Slug(const std::string& heading) {
  std::string slug;
  for (unsigned char c : heading) {
    if (c >= 0x80 || absl::ascii_isalnum(c) || c == '-' || c == '_') {
      slug += static_cast<char>(absl::ascii_tolower(c));
    } else if (c == ' ') {
      slug += '-';
    }
  }
  return slug;
}

// The anchors of a Markdown file: its headings' slugs (a repeated heading
// gets -1, -2, ...), outside code blocks.
std::set<std::string> Anchors(const fs::path& file) {
  std::set<std::string> anchors;
  std::map<std::string, int> seen;
  bool in_code = false;
  for (const std::string& line : Lines(Read(file))) {
    if (IsFence(line)) in_code = !in_code;
    if (in_code || line.empty() || line[0] != '#') continue;
    const size_t text = line.find_first_not_of('#');
    if (text == std::string::npos || line[text] != ' ') continue;
    std::string slug = Slug(std::string(absl::StripAsciiWhitespace(line.substr(text))));
    const int n = seen[slug]++;
    anchors.insert(n == 0 ? slug : absl::StrCat(slug, "-", n));
  }
  return anchors;
}

struct Link {
  std::string file;  // where it is written, relative to the root
  int line;
  std::string target;
};

// Inline links [text](target) outside code blocks and code spans.
std::vector<Link> LinksIn(const fs::path& file) {
  static const std::regex kLink(R"(\]\(([^()\s]+)(?:\s+"[^"]*")?\))");
  static const std::regex kCodeSpan("`[^`]*`");
  std::vector<Link> links;
  bool in_code = false;
  int number = 0;
  for (const std::string& raw : Lines(Read(file))) {
    ++number;
    if (IsFence(raw)) in_code = !in_code;
    if (in_code) continue;
    const std::string line = std::regex_replace(raw, kCodeSpan, "");
    for (auto it = std::sregex_iterator(line.begin(), line.end(), kLink);
         it != std::sregex_iterator(); ++it) {
      links.push_back({fs::relative(file, kRoot).string(), number, (*it)[1].str()});
    }
  }
  return links;
}

std::vector<fs::path> DocFiles() {
  std::vector<fs::path> files = {kRoot / "README.md", kRoot / "CHANGELOG.md"};
  for (const auto& entry : fs::directory_iterator(kRoot / "docs")) {
    if (entry.path().extension() == ".md") files.push_back(entry.path());
  }
  return files;
}

// "" when `target`, written in `from`, resolves; else why not.
std::string Check(const fs::path& from, const std::string& target) {
  const size_t hash = target.find('#');
  const std::string path = target.substr(0, hash);
  const fs::path file = path.empty() ? from : (from.parent_path() / path).lexically_normal();
  if (!fs::exists(file)) return absl::StrCat("no file ", file.string());
  if (hash == std::string::npos) return "";
  const std::string anchor = target.substr(hash + 1);
  if (file.extension() != ".md") return absl::StrCat("an anchor into a non-Markdown file");
  if (!Anchors(file).count(anchor)) {
    return absl::StrCat("no heading #", anchor, " in ", fs::relative(file, kRoot).string());
  }
  return "";
}

TEST(DocsLinksTest, TheSlugsAreGitHubs) {
  EXPECT_EQ(Slug("Alerts and runbooks"), "alerts-and-runbooks");
  EXPECT_EQ(Slug("`payment_service`"), "payment_service");
  EXPECT_EQ(Slug("The ops API and outboxctl"), "the-ops-api-and-outboxctl");
  EXPECT_EQ(Slug("Drain after an outage (60 s), and the claim"),
            "drain-after-an-outage-60-s-and-the-claim");
  EXPECT_EQ(Slug("OutboxMessageFailed"), "outboxmessagefailed");
}

TEST(DocsLinksTest, EveryRelativeLinkAndAnchorResolves) {
  ASSERT_TRUE(fs::is_directory(kRoot / "docs"));
  int checked = 0;
  for (const fs::path& file : DocFiles()) {
    for (const Link& link : LinksIn(file)) {
      if (absl::StartsWith(link.target, "http://") || absl::StartsWith(link.target, "https://") ||
          absl::StartsWith(link.target, "mailto:")) {
        continue;
      }
      ++checked;
      const std::string why = Check(file, link.target);
      EXPECT_EQ(why, "") << link.file << ":" << link.line << ": (" << link.target << ")";
    }
  }
  EXPECT_GT(checked, 20) << "the link pattern no longer matches the docs";
}

TEST(DocsLinksTest, EveryAlertHasARunbookEntry) {
  const std::set<std::string> runbooks = Anchors(kRoot / "docs" / "operations.md");
  // Prometheus's rules name their runbook_url; recovery_service derives it
  // from the alert's name (RunbookUrl in shared/observability/internal/alerts.h).
  static const std::regex kRunbook(
      R"re(runbook_url: '.*\{\{ else \}\}docs/operations\.md\{\{ end \}\}#([a-z0-9_-]+)')re");
  const std::string rules = Read(kRoot / "docker" / "prometheus" / "rules.yml");
  int rule_runbooks = 0;
  for (auto it = std::sregex_iterator(rules.begin(), rules.end(), kRunbook);
       it != std::sregex_iterator(); ++it, ++rule_runbooks) {
    EXPECT_TRUE(runbooks.count((*it)[1].str())) << "rules.yml: no runbook #" << (*it)[1];
  }
  EXPECT_GE(rule_runbooks, 4);

  static const std::regex kPushed(
      R"re(alert\.name = (?:[a-z ?]*)"(Outbox[A-Za-z]+)"(?: : "(Outbox[A-Za-z]+)")?)re");
  int pushed = 0;
  for (const char* source :
       {"shared/outbox/internal/recovery_alerts.cc", "shared/outbox/internal/republish_hold.cc"}) {
    const std::string code = Read(kRoot / source);
    for (auto it = std::sregex_iterator(code.begin(), code.end(), kPushed);
         it != std::sregex_iterator(); ++it) {
      for (int group : {1, 2}) {
        if (!(*it)[group].matched) continue;
        ++pushed;
        const std::string name = (*it)[group].str();
        EXPECT_TRUE(runbooks.count(absl::AsciiStrToLower(name)))
            << source << ": no runbook for " << name;
      }
    }
  }
  EXPECT_GE(pushed, 5) << "recovery_service's alert names were not found";
}

}  // namespace
}  // namespace outbox
