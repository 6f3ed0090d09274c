// The tables in docs/operations.md that restate the code, held to it:
//   docs.metrics          every series the services register (the names
//                         and literal label values passed to the metrics
//                         registry) has its row in the Metrics table with
//                         those labels, and every row and label value there
//                         is registered in the code;
//   docs.schema_versions  the payment.db and accounting.db tables list
//                         every migration of PaymentDbSchema() and
//                         AccountingDbSchema(), in order, by what each
//                         changes;
//   docs.alerts           the alert table names every Prometheus rule and
//                         every alert recovery_service raises, with its
//                         owner and severities;
//   docs.log_events       the table of log events names every warning and
//                         error the services log, and only events they log;
//   docs.defaults         no page but docs/configuration.md quotes a flag's
//                         default next to the flag's name.
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <SQLiteCpp/SQLiteCpp.h>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "accounting_service/accounting_db_schema.h"
#include "gtest/gtest.h"
#include "service_kit/payment_db_schema.h"
#include "shared/sqlite/schema.h"

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

// The lines of `doc` from the heading `heading` (a whole line) to the next
// heading of the same or a higher level.
std::vector<std::string> Section(const std::string& doc, const std::string& heading) {
  std::vector<std::string> lines;
  const size_t level = heading.find(' ');
  bool in = false, in_code = false;
  std::istringstream text(doc);
  for (std::string line; std::getline(text, line);) {
    if (absl::StartsWith(absl::StripLeadingAsciiWhitespace(line), "```")) in_code = !in_code;
    if (line == heading && !in_code) {
      in = true;
      continue;
    }
    if (in && !in_code && line.rfind('#', 0) == 0) {
      const size_t hashes = line.find_first_not_of('#');
      if (hashes != std::string::npos && hashes <= level && line[hashes] == ' ') break;
    }
    if (in) lines.push_back(line);
  }
  return lines;
}

// The cells of a Markdown table row ("| a | b |"), trimmed; {} for other
// lines and for the header's separator.
std::vector<std::string> Cells(const std::string& line) {
  if (line.rfind("|", 0) != 0 || absl::StartsWith(line, "|---")) return {};
  std::vector<std::string> cells;
  for (absl::string_view cell : absl::StrSplit(line, '|')) {
    cells.emplace_back(absl::StripAsciiWhitespace(cell));
  }
  // The empty strings before the first and after the last '|'.
  cells.erase(cells.begin());
  if (!cells.empty() && cells.back().empty()) cells.pop_back();
  return cells;
}

// The `code spans` of a Markdown cell, in order.
std::vector<std::string> CodeSpans(const std::string& text) {
  static const std::regex kSpan("`([^`]+)`");
  std::vector<std::string> spans;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), kSpan);
       it != std::sregex_iterator(); ++it) {
    spans.push_back((*it)[1].str());
  }
  return spans;
}

// --- Metrics: what the code registers -------------------------------------

// A label of a series: its value when the code gives it as a literal, ""
// when it comes from a variable (a queue's name, a database's).
using LabelValues = std::map<std::string, std::set<std::string>>;  // key -> literal values

struct Registered {
  std::map<std::string, LabelValues> series;  // name -> its labels
  std::map<std::string, std::string> where;   // name -> the file that registers it
  std::set<std::string> renamed;              // library default names the services replace
};

// The folders whose code the three services run (bench/ and the tools serve
// no /metrics).
const char* const kServiceFolders[] = {"shared", "service_kit", "payment_service",
                                       "accounting_service", "recovery_service"};

std::vector<fs::path> ServiceSources() {
  std::vector<fs::path> files;
  for (const char* folder : kServiceFolders) {
    for (const auto& entry : fs::recursive_directory_iterator(kRoot / folder)) {
      const fs::path& p = entry.path();
      const std::string name = p.filename().string();
      if (p.extension() != ".cc" && p.extension() != ".h") continue;
      if (absl::EndsWith(name, "_test.cc") || absl::StrContains(p.string(), "/testing/")) continue;
      files.push_back(p);
    }
  }
  return files;
}

// `code` without its comments; string and character literals kept.
std::string StripComments(const std::string& code) {
  std::string out;
  for (size_t i = 0; i < code.size(); ++i) {
    const char c = code[i];
    const char next = i + 1 < code.size() ? code[i + 1] : '\0';
    if (c == '/' && next == '/') {
      while (i < code.size() && code[i] != '\n') ++i;
      out += '\n';
    } else if (c == '/' && next == '*') {
      const size_t end = code.find("*/", i + 2);
      i = end == std::string::npos ? code.size() : end + 1;
      out += ' ';
    } else if (c == '"' || (c == '\'' && (out.empty() || !absl::ascii_isalnum(out.back())))) {
      // A literal (a ' after a digit is a digit separator): copied whole.
      out += c;
      for (++i; i < code.size() && code[i] != c; ++i) {
        if (code[i] == '\\') out += code[i++];
        out += code[i];
      }
      if (i < code.size()) out += c;
    } else {
      out += c;
    }
  }
  return out;
}

// `text` with every string literal emptied.
std::string WithoutStrings(const std::string& text) {
  static const std::regex kString(R"re("(?:[^"\\]|\\.)*")re");
  return std::regex_replace(text, kString, "\"\"");
}

// The argument text of the call whose '(' is at `open`, up to its matching
// ')' (strings and nested brackets skipped).
std::string CallArguments(const std::string& code, size_t open) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = open; i < code.size(); ++i) {
    const char c = code[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"')
      in_string = true;
    else if (c == '(' || c == '{' || c == '[')
      ++depth;
    else if (c == ')' || c == '}' || c == ']') {
      if (--depth == 0) return code.substr(open + 1, i - open - 1);
    }
  }
  return code.substr(open + 1);
}

void AddLabels(const std::string& args, const std::map<std::string, std::string>& label_vars,
               LabelValues& labels) {
  static const std::regex kLiteral(R"re(\{\s*"(\w+)"\s*,\s*"([^"]*)"\s*\})re");
  static const std::regex kVariable(R"re(\{\s*"(\w+)"\s*,\s*[A-Za-z_])re");
  for (auto it = std::sregex_iterator(args.begin(), args.end(), kLiteral);
       it != std::sregex_iterator(); ++it) {
    labels[(*it)[1].str()].insert((*it)[2].str());
  }
  for (auto it = std::sregex_iterator(args.begin(), args.end(), kVariable);
       it != std::sregex_iterator(); ++it) {
    labels[(*it)[1].str()];
  }
  // Labels built before the call: `const Labels queue = {{"queue", ...}};`.
  const std::string code = WithoutStrings(args);
  for (const auto& [var, key] : label_vars) {
    if (std::regex_search(code, std::regex(absl::StrCat(R"(\b)", var, R"(\b)")))) labels[key];
  }
}

// Helpers that register a series with a label value their callers give as
// a literal: the helper's name, its series, and the label.
struct LabelHelper {
  const char* function;
  std::vector<std::string> series;
  const char* key;
};
const LabelHelper kHelpers[] = {
    {"StoreWriteFailures", {"outbox_store_write_failures_total"}, "write"},
    {"RegisterLinkMetrics",
     {"outbox_amqp_connected", "outbox_amqp_connection_drops_total"},
     "connection"},
};

Registered RegisteredInCode() {
  Registered r;
  static const std::regex kAdd(
      R"(\b(AddCounter|AddCounterReader|AddGauge|AddGaugeFamily|AddDurationHistogram)\()");
  static const std::regex kName(R"re(^\s*"([a-z_:]+)")re");
  static const std::regex kLabelsVar(R"re(Labels\s+(\w+)\s*=\s*\{\s*\{\s*"(\w+)")re");
  // ConsumerOptions' names: a default in the header, a service's own name.
  static const std::regex kDefaultName(R"re(std::string\s+(\w+_metric)\s*=\s*"([a-z_]+)")re");
  static const std::regex kRename(R"re(\.(\w+_metric)\s*=\s*"([a-z_]+)")re");
  std::map<std::string, std::string> defaults, renames;  // option -> name
  std::map<std::string, int> helper_calls;
  for (const fs::path& file : ServiceSources()) {
    const std::string code = StripComments(Read(file));
    const std::string rel = fs::relative(file, kRoot).string();
    std::map<std::string, std::string> label_vars;
    for (auto it = std::sregex_iterator(code.begin(), code.end(), kLabelsVar);
         it != std::sregex_iterator(); ++it) {
      label_vars[(*it)[1].str()] = (*it)[2].str();
    }
    for (auto it = std::sregex_iterator(code.begin(), code.end(), kAdd);
         it != std::sregex_iterator(); ++it) {
      const size_t open = it->position() + it->length() - 1;
      const std::string args = CallArguments(code, open);
      std::smatch name;
      // The registry's own definitions, and names held in options (below).
      if (!std::regex_search(args, name, kName)) continue;
      AddLabels(args, label_vars, r.series[name[1].str()]);
      r.where[name[1].str()] = rel;
    }
    for (const LabelHelper& helper : kHelpers) {
      const std::regex call(absl::StrCat(R"(\b)", helper.function,
                                         R"re(\(\s*\w+\s*,\s*(?:[\w*.]+\s*,\s*)?"(\w+)"\s*\))re"));
      for (auto it = std::sregex_iterator(code.begin(), code.end(), call);
           it != std::sregex_iterator(); ++it) {
        ++helper_calls[helper.function];
        for (const std::string& series : helper.series) {
          r.series[series][helper.key].insert((*it)[1].str());
          r.where[series] = rel;
        }
      }
    }
    for (auto it = std::sregex_iterator(code.begin(), code.end(), kDefaultName);
         it != std::sregex_iterator(); ++it) {
      defaults[(*it)[1].str()] = (*it)[2].str();
      r.where[(*it)[2].str()] = rel;
    }
    for (auto it = std::sregex_iterator(code.begin(), code.end(), kRename);
         it != std::sregex_iterator(); ++it) {
      renames[(*it)[1].str()] = (*it)[2].str();
      r.where[(*it)[2].str()] = rel;
    }
  }
  for (const LabelHelper& helper : kHelpers) {
    EXPECT_GT(helper_calls[helper.function], 0)
        << helper.function << " is no longer called with a literal label: update kHelpers";
  }
  for (const auto& [option, name] : defaults) {
    auto renamed = renames.find(option);
    if (renamed == renames.end()) {
      r.series[name];
    } else {
      r.series[renamed->second];
      r.renamed.insert(name);
    }
  }
  return r;
}

// --- Metrics: what docs/operations.md says --------------------------------

struct Row {
  std::vector<std::string> names;  // the first column's series
  LabelValues labels;              // the labels column
  std::string text;                // the whole row
};

// A labels cell: `key="a"`, `"b"`, `other`: key -> {a, b}, other -> {}.
LabelValues ParseLabels(const std::string& cell) {
  static const std::regex kKeyValue(R"re(^(\w+)="([^"]*)"$)re");
  static const std::regex kValue(R"re(^"([^"]*)"$)re");
  static const std::regex kKey(R"(^\w+$)");
  LabelValues labels;
  std::string key;
  for (const std::string& span : CodeSpans(cell)) {
    std::smatch m;
    if (std::regex_match(span, m, kKeyValue)) {
      key = m[1].str();
      labels[key].insert(m[2].str());
    } else if (std::regex_match(span, m, kValue) && !key.empty()) {
      labels[key].insert(m[1].str());
    } else if (std::regex_match(span, kKey)) {
      key = span;
      labels[key];
    } else {
      ADD_FAILURE() << "operations.md, Metrics: cannot read the label `" << span
                    << "` in: " << cell;
    }
  }
  return labels;
}

std::vector<Row> MetricsTable() {
  std::vector<Row> rows;
  const auto section = Section(Read(kRoot / "docs" / "operations.md"), "## Metrics");
  bool in_table = false;
  for (const std::string& line : section) {
    const std::vector<std::string> cells = Cells(line);
    if (cells.empty()) {
      if (in_table && line.rfind("|", 0) != 0) break;  // the first table only
      continue;
    }
    if (cells[0] == "series") {
      in_table = true;
      continue;
    }
    if (!in_table) continue;
    EXPECT_EQ(cells.size(), 4u) << "operations.md, Metrics: a row of four cells: " << line;
    if (cells.size() < 3) continue;
    rows.push_back({CodeSpans(cells[0]), ParseLabels(cells[2]), line});
  }
  return rows;
}

std::string Describe(const LabelValues& labels) {
  std::vector<std::string> out;
  for (const auto& [key, values] : labels) {
    out.push_back(values.empty() ? key : absl::StrCat(key, "={", absl::StrJoin(values, ","), "}"));
  }
  return absl::StrJoin(out, " ");
}

TEST(DocsMetricsTest, EverySeriesInTheCodeHasItsRowAndLabels) {
  const Registered code = RegisteredInCode();
  ASSERT_GE(code.series.size(), 30u) << "the registry calls were not found in the sources";
  std::map<std::string, const Row*> rows;
  std::set<std::string> mentioned;  // every code span of the table
  const std::vector<Row> table = MetricsTable();
  for (const Row& row : table) {
    for (const std::string& name : row.names) rows[name] = &row;
    for (const std::string& span : CodeSpans(row.text)) mentioned.insert(span);
  }
  for (const std::string& name : code.renamed) {
    EXPECT_TRUE(mentioned.count(name))
        << name << " (" << code.where.at(name)
        << "): a library default the services rename; name it in the row of the name they use";
  }
  for (const auto& [name, labels] : code.series) {
    auto row = rows.find(name);
    if (row == rows.end()) {
      ADD_FAILURE() << name << " (registered in " << code.where.at(name)
                    << ") has no row in docs/operations.md's Metrics table";
      continue;
    }
    const LabelValues& doc = row->second->labels;
    for (const auto& [key, values] : labels) {
      auto documented = doc.find(key);
      if (documented == doc.end()) {
        ADD_FAILURE() << name << ": label `" << key << "` (" << code.where.at(name)
                      << ") is not in its row's labels (" << Describe(doc) << ")";
        continue;
      }
      for (const std::string& value : values) {
        EXPECT_TRUE(documented->second.count(value))
            << name << ": label " << key << "=\"" << value << "\" (" << code.where.at(name)
            << ") is not in its row's labels (" << Describe(doc) << ")";
      }
    }
  }
}

TEST(DocsMetricsTest, EveryRowAndLabelIsInTheCode) {
  const Registered code = RegisteredInCode();
  const std::vector<Row> table = MetricsTable();
  ASSERT_GE(table.size(), 30u) << "the Metrics table of docs/operations.md was not found";
  for (const Row& row : table) {
    for (const std::string& name : row.names) {
      if (!absl::StartsWith(name, "outbox_")) continue;  // prometheus-cpp's exposer_*
      auto series = code.series.find(name);
      if (series == code.series.end()) {
        ADD_FAILURE() << "operations.md lists " << name << ", which no service registers";
        continue;
      }
      for (const auto& [key, values] : row.labels) {
        auto registered = series->second.find(key);
        if (registered == series->second.end()) {
          ADD_FAILURE() << name << ": operations.md gives it the label `" << key
                        << "`, which the code does not (" << Describe(series->second) << ")";
          continue;
        }
        // A value the code takes from a variable (a queue, a database)
        // cannot be checked here.
        if (registered->second.empty()) continue;
        for (const std::string& value : values) {
          EXPECT_TRUE(registered->second.count(value))
              << name << ": operations.md lists " << key << "=\"" << value
              << "\", which the code never sets (" << Describe(series->second) << ")";
        }
      }
    }
  }
}

// --- Schema versions --------------------------------------------------------

// The rows of the table whose header's second cell starts with `db`.
std::vector<std::vector<std::string>> VersionTable(const std::string& db) {
  std::vector<std::vector<std::string>> rows;
  const auto section =
      Section(Read(kRoot / "docs" / "operations.md"), "## Schema versions and upgrades");
  bool in_table = false;
  for (const std::string& line : section) {
    const std::vector<std::string> cells = Cells(line);
    if (line.rfind("|", 0) != 0) {
      if (in_table) break;
      continue;
    }
    if (cells.size() == 2 && cells[0] == "version") {
      in_table = absl::StartsWith(cells[1], db);
      continue;
    }
    if (in_table && !cells.empty()) rows.push_back(cells);
  }
  return rows;
}

void ExpectVersionTable(const std::string& db, const DbSchema& schema) {
  const auto rows = VersionTable(db);
  EXPECT_EQ(static_cast<int>(rows.size()), schema.latest())
      << "operations.md's " << db << " table has " << rows.size() << " versions; the code "
      << schema.latest();
  for (size_t i = 0; i < rows.size() && i < schema.migrations.size(); ++i) {
    const std::string& what = schema.migrations[i].what;
    EXPECT_EQ(rows[i][0], std::to_string(i + 1)) << db << " row " << i + 1;
    // The cell begins with what the migration logs (schema_upgraded
    // change="..."), code spans unmarked; more may follow.
    const std::string cell = absl::StrReplaceAll(rows[i].size() > 1 ? rows[i][1] : "", {{"`", ""}});
    EXPECT_TRUE(absl::StartsWith(cell, what))
        << db << " version " << i + 1 << ": the row should begin with \"" << what
        << "\" (the migration's change), not: " << cell;
  }
}

TEST(DocsSchemaVersionsTest, PaymentDbTableListsEveryMigration) {
  ExpectVersionTable("payment.db", PaymentDbSchema());
}

TEST(DocsSchemaVersionsTest, AccountingDbTableListsEveryMigration) {
  ExpectVersionTable("accounting.db", accounting::AccountingDbSchema());
}

TEST(DocsSchemaVersionsTest, TheRefusalExampleIsTodays) {
  const auto section =
      Section(Read(kRoot / "docs" / "operations.md"), "## Schema versions and upgrades");
  static const std::regex kRefusal(
      R"(has schema version (\d+); this payment_service knows up to (\d+))");
  int seen = 0;
  for (const std::string& line : section) {
    std::smatch m;
    if (!std::regex_search(line, m, kRefusal)) continue;
    ++seen;
    EXPECT_EQ(std::stoi(m[2].str()), PaymentDbSchema().latest()) << line;
    EXPECT_EQ(std::stoi(m[1].str()), PaymentDbSchema().latest() + 1) << line;
  }
  EXPECT_EQ(seen, 1) << "the example of a refused newer payment.db was not found";
}

// Every column of payment.db's `outbox`, as its migrations make it, is
// named in design.md's description of the row.
TEST(DocsSchemaVersionsTest, DesignNamesEveryOutboxColumn) {
  SQLite::Database db(":memory:", SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
  for (const Migration& m : PaymentDbSchema().migrations) m.apply(db);
  std::vector<std::string> columns;
  SQLite::Statement info(db, "PRAGMA table_info(outbox)");
  while (info.executeStep()) columns.push_back(info.getColumn(1).getString());
  ASSERT_GE(columns.size(), 10u);
  std::set<std::string> named;
  for (const std::string& line : Section(Read(kRoot / "docs" / "design.md"), "## The outbox row")) {
    for (const std::string& span : CodeSpans(line)) named.insert(span);
  }
  for (const std::string& column : columns) {
    EXPECT_TRUE(named.count(column))
        << "design.md, The outbox row: the column `" << column << "` is not described";
  }
}

// --- Alerts ------------------------------------------------------------------

struct AlertSource {
  std::string raised_by;
  std::set<std::string> severities;
};

std::map<std::string, AlertSource> AlertsInCode() {
  std::map<std::string, AlertSource> alerts;
  const std::string rules = Read(kRoot / "docker" / "prometheus" / "rules.yml");
  static const std::regex kRule(R"(- alert: (\w+))");
  static const std::regex kSeverity(R"(severity: (\w+))");
  for (auto it = std::sregex_iterator(rules.begin(), rules.end(), kRule);
       it != std::sregex_iterator(); ++it) {
    const std::string rest = it->suffix().str();
    std::smatch severity;
    const size_t next = rest.find("- alert:");
    const std::string body = rest.substr(0, next);
    AlertSource& a = alerts[(*it)[1].str()];
    a.raised_by = "Prometheus rule";
    if (std::regex_search(body, severity, kSeverity)) a.severities.insert(severity[1].str());
  }
  // recovery_service: `alert.name = "X";` (or `down ? "X" : "Y"`), then its
  // severity the same way, "critical" when not set (shared/observability/internal/alerts.h).
  static const std::regex kName(
      R"re(alert\.name = (?:[a-z ?]*)"(Outbox\w+)"(?: : "(Outbox\w+)")?;)re");
  static const std::regex kRecoverySeverity(
      R"re(^\s*alert\.severity = (?:[a-z ?]*)"(\w+)"(?: : "(\w+)")?;)re");
  for (const char* source :
       {"shared/outbox/internal/recovery_alerts.cc", "shared/outbox/internal/republish_hold.cc"}) {
    const std::string code = Read(kRoot / source);
    for (auto it = std::sregex_iterator(code.begin(), code.end(), kName);
         it != std::sregex_iterator(); ++it) {
      std::smatch severity;
      const std::string rest = it->suffix().str();
      const std::string next_line = rest.substr(0, rest.find('\n', 1) + 1);
      const bool set = std::regex_search(next_line, severity, kRecoverySeverity);
      for (int group : {1, 2}) {
        if (!(*it)[group].matched) continue;
        AlertSource& a = alerts[(*it)[group].str()];
        a.raised_by = "recovery_service";
        a.severities.insert(set && severity[group].matched ? severity[group].str()
                            : set                          ? severity[1].str()
                                                           : "critical");
      }
    }
  }
  return alerts;
}

TEST(DocsAlertsTest, TheTableIsEveryAlertWithItsOwnerAndSeverity) {
  const std::map<std::string, AlertSource> code = AlertsInCode();
  ASSERT_GE(code.size(), 10u) << "the alerts were not found in rules.yml and recovery's code";
  std::map<std::string, AlertSource> doc;
  static const std::regex kAlertCell(R"(^\[(\w+)\]\(#[a-z]+\)$)");
  static const std::regex kSeverityWord(R"(\b(critical|warning|info)\b)");
  for (const std::string& line :
       Section(Read(kRoot / "docs" / "operations.md"), "## Alerts and runbooks")) {
    const std::vector<std::string> cells = Cells(line);
    std::smatch name;
    if (cells.size() != 3 || !std::regex_match(cells[0], name, kAlertCell)) continue;
    AlertSource& a = doc[name[1].str()];
    a.raised_by = cells[1];
    for (auto it = std::sregex_iterator(cells[2].begin(), cells[2].end(), kSeverityWord);
         it != std::sregex_iterator(); ++it) {
      a.severities.insert((*it)[1].str());
    }
  }
  for (const auto& [name, source] : code) {
    auto row = doc.find(name);
    if (row == doc.end()) {
      ADD_FAILURE() << name << " (" << source.raised_by
                    << ") is not in the alert table of docs/operations.md";
      continue;
    }
    EXPECT_EQ(row->second.raised_by, source.raised_by) << name;
    EXPECT_EQ(absl::StrJoin(row->second.severities, ","), absl::StrJoin(source.severities, ","))
        << name << ": severities";
  }
  for (const auto& [name, row] : doc) {
    EXPECT_TRUE(code.count(name)) << "operations.md lists " << name << ", which nothing raises";
  }
}

TEST(DocsAlertsTest, RulesYmlNamesRecoverysAlertsAsTheirOwner) {
  // Its opening comment says which conditions it leaves to recovery_service.
  const std::string rules = Read(kRoot / "docker" / "prometheus" / "rules.yml");
  const std::string header = rules.substr(0, rules.find("groups:"));
  for (const auto& [name, source] : AlertsInCode()) {
    if (source.raised_by != "recovery_service") continue;
    EXPECT_TRUE(absl::StrContains(header, name))
        << "rules.yml's opening comment does not name " << name << " among recovery's alerts";
  }
}

// --- Log events -------------------------------------------------------------

// The events the services log (the literal name given to LogDebug,
// LogInfo, LogWarning or LogError, or to Log with a level computed at run
// time: level "Any"), by level; `cond ? "a" : "b"` gives both names.
std::map<std::string, std::set<std::string>> LogEventsInCode() {
  std::map<std::string, std::set<std::string>> events;  // level -> names
  static const std::regex kLog(
      R"re(\bLog(Debug|Info|Warning|Error|)\(([^";{}]*?,)?\s*(?:[^",;{}]*\?\s*)?"([a-z_]+)"(?:\s*:\s*"([a-z_]+)")?)re");
  for (const fs::path& file : ServiceSources()) {
    const std::string code = StripComments(Read(file));
    for (auto it = std::sregex_iterator(code.begin(), code.end(), kLog);
         it != std::sregex_iterator(); ++it) {
      const std::string level = (*it)[1].str();
      // Log(level, ...) needs its level; LogX(...) has none before the name.
      if (level.empty() != (*it)[2].matched) continue;
      for (int name : {3, 4}) {
        if ((*it)[name].matched) events[level.empty() ? "Any" : level].insert((*it)[name].str());
      }
    }
  }
  return events;
}

TEST(DocsLogEventsTest, EveryWarningAndErrorIsInTheTableAndEveryRowIsLogged) {
  const auto code = LogEventsInCode();
  std::set<std::string> logged;
  for (const auto& [level, names] : code) logged.insert(names.begin(), names.end());
  ASSERT_GE(logged.size(), 40u) << "the log calls were not found in the sources";
  std::set<std::string> table;
  bool in_table = false;
  for (const std::string& line :
       Section(Read(kRoot / "docs" / "operations.md"), "### Logs and trace ids")) {
    const std::vector<std::string> cells = Cells(line);
    if (cells.empty()) {
      if (in_table && line.rfind("|", 0) != 0) break;  // the first table only
      continue;
    }
    if (cells[0] == "event") {
      in_table = true;
      continue;
    }
    if (!in_table) continue;
    for (const std::string& span : CodeSpans(cells[0])) {
      if (std::regex_match(span, std::regex("[a-z_]+")))
        table.insert(span);  // not <service>_failed
    }
  }
  ASSERT_GE(table.size(), 20u) << "the event table of operations.md was not found";
  for (const char* level : {"Warning", "Error", "Any"}) {
    auto names = code.find(level);
    if (names == code.end()) continue;
    for (const std::string& name : names->second) {
      EXPECT_TRUE(table.count(name)) << "the " << level << " line `" << name
                                     << "` is not in operations.md's table of log events";
    }
  }
  for (const std::string& name : table) {
    EXPECT_TRUE(logged.count(name))
        << "operations.md lists the log event `" << name << "`, which no service logs";
  }
}

// --- Defaults ---------------------------------------------------------------

// A flag's default is written once, in docs/configuration.md (generated from
// --help); other pages name the flag and link there, so a changed default
// leaves no stale copy behind.

// Each flag of configuration.md, by `--name` and by its environment
// variable: the numbers its defaults read as ("10s": 10, "720h": 720 and 30
// days, "127.0.0.1:50053": 50053).
std::map<std::string, std::set<double>> FlagDefaults() {
  std::map<std::string, std::set<double>> defaults;
  static const std::regex kFlag(R"re(^\s+--(\w+) \(default "(.*)"\)$)re");
  static const std::regex kEnv(R"(\[env\s+([A-Z][A-Z0-9_]+))");
  static const std::regex kNumber(R"(^\d+(\.\d+)?$)");
  static const std::regex kDuration(R"(^(\d+)(ms|s|m|h)$)");
  static const std::regex kPort(R"(^[\w.-]*:(\d+)$)");
  std::istringstream text(Read(kRoot / "docs" / "configuration.md"));
  std::string name, help;
  std::set<double> numbers;
  auto flush = [&] {
    if (name.empty()) return;
    defaults["--" + name].insert(numbers.begin(), numbers.end());
    const std::string joined = std::regex_replace(help, std::regex(R"(\s+)"), " ");
    std::smatch env;
    if (std::regex_search(joined, env, kEnv)) {
      defaults[env[1].str()].insert(numbers.begin(), numbers.end());
    }
    name.clear();
  };
  for (std::string line; std::getline(text, line);) {
    std::smatch m;
    if (std::regex_match(line, m, kFlag)) {
      flush();
      name = m[1].str();
      help.clear();
      numbers.clear();
      const std::string value = m[2].str();
      std::smatch part;
      if (std::regex_match(value, kNumber)) {
        numbers.insert(std::stod(value));
      } else if (std::regex_match(value, part, kDuration)) {
        const double n = std::stod(part[1].str());
        numbers.insert(n);
        if (part[2] == "h" && static_cast<int64_t>(n) % 24 == 0) numbers.insert(n / 24);
      } else if (std::regex_match(value, part, kPort)) {
        numbers.insert(std::stod(part[1].str()));
      }
    } else if (!name.empty() && absl::StartsWith(line, "      ")) {
      absl::StrAppend(&help, " ", line);
    } else {
      flush();
    }
  }
  flush();
  return defaults;
}

// The numbers in `text`: "1,024" is 1024, "10^12" is 1e12.
std::set<double> NumbersIn(const std::string& text) {
  std::set<double> numbers;
  static const std::regex kPower(R"((\d+)\^(\d+))");
  static const std::regex kNumber(R"(\d[\d,]*(\.\d+)?)");
  std::string rest = text;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), kPower);
       it != std::sregex_iterator(); ++it) {
    numbers.insert(std::pow(std::stod((*it)[1].str()), std::stod((*it)[2].str())));
  }
  rest = std::regex_replace(rest, kPower, " ");
  for (auto it = std::sregex_iterator(rest.begin(), rest.end(), kNumber);
       it != std::sregex_iterator(); ++it) {
    std::string digits = absl::StrReplaceAll((*it)[0].str(), {{",", ""}});
    if (!digits.empty()) numbers.insert(std::stod(digits));
  }
  return numbers;
}

std::vector<fs::path> ProsePages() {
  std::vector<fs::path> pages = {kRoot / "README.md", kRoot / "bench" / "README.md"};
  for (const char* folder : {"docs", "examples"}) {
    for (const auto& entry : fs::recursive_directory_iterator(kRoot / folder)) {
      const fs::path& p = entry.path();
      if (p.extension() == ".md" && p.filename() != "configuration.md") pages.push_back(p);
    }
  }
  return pages;
}

TEST(DocsDefaultsTest, ProseQuotesNoFlagDefault) {
  const std::map<std::string, std::set<double>> defaults = FlagDefaults();
  ASSERT_GE(defaults.size(), 50u) << "the flags of docs/configuration.md were not found";
  // `NAME` or `--name` (perhaps bold), then " (...)" or ", <number>...".
  static const std::regex kMention(
      R"re((?:\*\*)?`(--[a-z_]+|[A-Z][A-Z0-9_]+)`(?:\*\*)? ?(\((?:[^()]|\([^()]*\))*\)|, \d[^,.;)]*))re");
  int mentions = 0;
  for (const fs::path& page : ProsePages()) {
    std::istringstream text(Read(page));
    bool in_code = false;
    int number = 0;
    for (std::string line; std::getline(text, line);) {
      ++number;
      if (absl::StartsWith(absl::StripLeadingAsciiWhitespace(line), "```")) in_code = !in_code;
      if (in_code) continue;
      for (auto it = std::sregex_iterator(line.begin(), line.end(), kMention);
           it != std::sregex_iterator(); ++it) {
        auto flag = defaults.find((*it)[1].str());
        if (flag == defaults.end()) continue;
        ++mentions;
        for (double n : NumbersIn((*it)[2].str())) {
          EXPECT_FALSE(flag->second.count(n))
              << fs::relative(page, kRoot).string() << ":" << number << ": \"" << (*it)[0]
              << "\" quotes the default of " << flag->first
              << "; name the flag and link docs/configuration.md instead";
        }
      }
    }
  }
  EXPECT_GT(mentions, 0) << "no flag is named in the docs: the pattern no longer matches";
}

}  // namespace
}  // namespace outbox
