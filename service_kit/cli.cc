#include "service_kit/cli.h"

#include <algorithm>
#include <iostream>
#include <vector>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/reflection.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

#ifndef OUTBOX_VERSION
#define OUTBOX_VERSION "unknown"
#endif
#ifndef OUTBOX_COMMIT
#define OUTBOX_COMMIT ""
#endif
#ifndef OUTBOX_BUILD_TYPE
#define OUTBOX_BUILD_TYPE ""
#endif

namespace outbox {
namespace {

constexpr absl::string_view kSynopsis = "[flags]";

// The binary's own flags: those defined in main.cc and the shared *_flags.cc,
// not Abseil's built-in ones (--flagfile, --fromenv, ...), which are not
// supported here.
bool IsOwnFlag(const absl::CommandLineFlag& flag) {
  const std::string file = flag.Filename();
  return !flag.IsRetired() &&
         (absl::EndsWith(file, "main.cc") || absl::EndsWith(file, "_flags.cc"));
}

absl::CommandLineFlag* FindOwnFlag(absl::string_view name) {
  absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
  return flag != nullptr && IsOwnFlag(*flag) ? flag : nullptr;
}

// Word-wraps `text` to lines of at most `width` characters after `indent`.
std::string Wrap(absl::string_view text, size_t indent, size_t width) {
  std::string out, line;
  for (absl::string_view word : absl::StrSplit(text, ' ', absl::SkipEmpty())) {
    if (!line.empty() && indent + line.size() + 1 + word.size() > width) {
      absl::StrAppend(&out, std::string(indent, ' '), line, "\n");
      line.clear();
    }
    absl::StrAppend(&line, line.empty() ? "" : " ", word);
  }
  if (!line.empty()) absl::StrAppend(&out, std::string(indent, ' '), line, "\n");
  return out;
}

std::string ServiceHelp(absl::string_view program, absl::string_view description) {
  std::vector<absl::CommandLineFlag*> flags;
  for (const auto& [name, flag] : absl::GetAllFlags()) {
    if (IsOwnFlag(*flag)) flags.push_back(flag);
  }
  std::sort(flags.begin(), flags.end(),
            [](const auto* a, const auto* b) { return a->Name() < b->Name(); });
  std::string out = absl::StrCat(UsageLine(program, kSynopsis), "\n", description, "\n",
                                 "Every flag defaults from the environment variable named in its\n"
                                 "help; the defaults shown are this environment's.\n\nflags:\n");
  for (const absl::CommandLineFlag* f : flags) {
    absl::StrAppend(&out, "  --", f->Name(), " (default \"", RedactUserinfo(f->DefaultValue()),
                    "\")\n", Wrap(f->Help(), 6, 80));
  }
  absl::StrAppend(&out, "  --help\n      this text, then exit\n  --version\n",
                  "      the version, the commit built and the build type, then exit\n");
  return out;
}

int UsageError(absl::string_view program, absl::string_view message) {
  std::cerr << program << ": " << message << "\n"
            << UsageLine(program, kSynopsis) << " (--help lists the flags)\n";
  return kExitUsage;
}

}  // namespace

std::string VersionLine(absl::string_view program) {
  const absl::string_view build_type = OUTBOX_BUILD_TYPE;
  const absl::string_view commit = OUTBOX_COMMIT;
  return absl::StrCat(program, " ", OUTBOX_VERSION, " (",
                      commit.empty() ? "" : absl::StrCat("commit ", commit, ", "),
                      build_type.empty() ? "unspecified" : build_type, " build)");
}

std::string UsageLine(absl::string_view program, absl::string_view synopsis) {
  return absl::StrCat("usage: ", program, " ", synopsis);
}

std::string RedactUserinfo(absl::string_view value) {
  const size_t scheme = value.find("://");
  if (scheme == absl::string_view::npos) return std::string(value);
  std::string out(value);
  const size_t start = scheme + 3;
  const size_t at = out.find('@', start);
  const size_t colon = out.find(':', start);
  if (at != std::string::npos && colon != std::string::npos && colon < at) {
    out = absl::StrCat(out.substr(0, colon + 1), "***", out.substr(at));
  }
  // libpq's URIs may also carry the password as a query parameter.
  for (size_t key = out.find("password=", start); key != std::string::npos;
       key = out.find("password=", key + 1)) {
    if (out[key - 1] != '?' && out[key - 1] != '&') continue;
    const size_t begin = key + 9;
    const size_t end = std::min(out.find('&', begin), out.size());
    out.replace(begin, end - begin, "***");
  }
  return out;
}

std::optional<int> ParseServiceCommandLine(int argc, char** argv, absl::string_view program,
                                           absl::string_view description) {
  std::vector<absl::string_view> args(argv + 1, argv + argc);
  // --help and --version win over anything else on the line.
  for (absl::string_view arg : args) {
    if (arg == "--") break;
    if (arg == "-h" || arg == "-help" || arg == "--help" || arg == "--helpfull" ||
        arg == "--helpshort") {
      std::cout << ServiceHelp(program, description);
      return kExitOk;
    }
    if (arg == "-version" || arg == "--version") {
      std::cout << VersionLine(program) << "\n";
      return kExitOk;
    }
  }
  for (size_t i = 0; i < args.size(); ++i) {
    absl::string_view arg = args[i];
    if (arg == "--") {
      if (i + 1 < args.size())
        return UsageError(program, absl::StrCat("unexpected argument '", args[i + 1], "'"));
      break;
    }
    if (arg.size() < 2 || arg[0] != '-') {
      return UsageError(program, absl::StrCat("unexpected argument '", arg, "'"));
    }
    arg.remove_prefix(absl::StartsWith(arg, "--") ? 2 : 1);
    const size_t eq = arg.find('=');
    const absl::string_view name = arg.substr(0, eq);
    std::optional<std::string> value;
    if (eq != absl::string_view::npos) value = std::string(arg.substr(eq + 1));
    absl::CommandLineFlag* flag = FindOwnFlag(name);
    if (flag == nullptr && absl::StartsWith(name, "no") && !value.has_value()) {
      flag = FindOwnFlag(name.substr(2));  // --nofoo for a boolean foo
      if (flag != nullptr && flag->IsOfType<bool>()) {
        value = "false";
      } else {
        flag = nullptr;
      }
    }
    if (flag == nullptr) return UsageError(program, absl::StrCat("unknown flag --", name));
    if (!value.has_value()) {
      if (flag->IsOfType<bool>()) {
        value = "true";
      } else if (i + 1 < args.size()) {
        value = std::string(args[++i]);
      } else {
        return UsageError(program, absl::StrCat("flag --", name, " needs a value"));
      }
    }
    std::string error;
    if (!flag->ParseFrom(*value, &error)) {
      return UsageError(program,
                        absl::StrCat("bad value '", *value, "' for --", name, ": ", error));
    }
  }
  return std::nullopt;
}

}  // namespace outbox
