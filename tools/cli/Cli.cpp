// The shared CLI11 setup (see Cli.h).
#include "tools/cli/Cli.h"

#include <algorithm>
#include <cstdio>

#include "runtime/base/Error.h"
#include "runtime/base/Parse.h"

#ifndef SPMD_VERSION_TEXT
#error "SPMD_VERSION_TEXT comes from the project's version in CMakeLists.txt"
#endif

namespace spmd::cli {
namespace {

// A value our parser refused, as CLI11's own error so it is reported like any other bad flag.
template <typename Parse>
auto checked(Parse parse) {
  return [parse](const std::string& value) {
    try {
      parse(value);
    } catch (const spmd::Error& e) {
      throw CLI::ValidationError(e.what());
    }
  };
}


// CLI11's message, in the words the rest of spmd uses where they differ: the unknown flags by
// name, in the order given; a flag without its value.
std::string said(const CLI::App& app, const CLI::ParseError& e, int argc, char** argv) {
  const std::string what = e.what();
  if (what.rfind("The following argument", 0) == 0) {  // ExtrasError (its name is the app's)
    std::string out;
    for (int i = 1; i < argc; ++i) {
      std::string arg = argv[i], name = arg.substr(0, arg.find('='));
      if (arg.size() > 1 && arg[0] == '-' && !app.get_option_no_throw(name))
        out += (out.empty() ? "" : "; ") + std::string("unknown flag '") + name + "'";
    }
    return out.empty() ? what : out;
  }
  if (e.get_name() == "ArgumentMismatch" && what.find(" required ") != std::string::npos &&
      what.find(':') != std::string::npos)
    return what.substr(0, what.find(':')) + " needs a value";
  return what;
}

}  // namespace

const char* version() { return SPMD_VERSION_TEXT; }

void configure(CLI::App& app, const std::string& program) {
  app.name(program);
  app.set_version_flag("--version", program + " (spmd " + std::string(version()) + ")");
  app.get_formatter()->column_width(30);
  // A flag given twice: the last one counts, as with getopt and the parsers before CLI11.
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
}

// The three whole() overloads: a whole number in [min, max] stored into `target`.
template <typename T>
CLI::Option* wholeInto(CLI::App& app, const std::string& flag, T& target, int64_t min, int64_t max,
                       const std::string& help) {
  return app
      .add_option_function<std::string>(
          flag, checked([&target, flag, min, max](const std::string& v) { target = T(runtime::parseWhole(v, flag, min, max)); }),
          help)
      ->type_name("N")
      ->default_str(std::to_string(target));
}

CLI::Option* whole(CLI::App& app, const std::string& flag, int64_t& target, int64_t min, int64_t max,
                   const std::string& help) {
  return wholeInto(app, flag, target, min, max, help);
}

CLI::Option* whole(CLI::App& app, const std::string& flag, int& target, int min, int max, const std::string& help) {
  return wholeInto(app, flag, target, min, max, help);
}

CLI::Option* whole(CLI::App& app, const std::string& flag, uint64_t& target, uint64_t max, const std::string& help) {
  return wholeInto(app, flag, target, 0, int64_t(std::min<uint64_t>(max, uint64_t(INT64_MAX))), help);
}

CLI::Option* number(CLI::App& app, const std::string& flag, double& target, double min, double max,
                    const std::string& help) {
  char shown[32];
  std::snprintf(shown, sizeof shown, "%g", target);
  return app
      .add_option_function<std::string>(
          flag, checked([&target, flag, min, max](const std::string& v) { target = runtime::parseNumber(v, flag, min, max); }),
          help)
      ->type_name("X")
      ->default_str(shown);
}

CLI::Option* oneOf(CLI::App& app, const std::string& flag, std::string& target, const std::vector<std::string>& words,
                   const std::string& help) {
  std::string names;
  for (const std::string& w : words) names += (names.empty() ? "" : "|") + w;
  return app
      .add_option_function<std::string>(
          flag, checked([&target, flag, words, names](const std::string& v) {
            if (std::find(words.begin(), words.end(), v) == words.end())
              throw spmd::Error(flag + " must be one of " + names + ", got '" + v + "'");
            target = v;
          }),
          help)
      ->type_name(names)
      ->default_str(target);
}

CLI::Option* text(CLI::App& app, const std::string& flag, std::string& target, const std::string& help,
                  const std::string& typeName) {
  CLI::Option* option = app.add_option(flag, target, help)->type_name(typeName);
  if (!target.empty()) option->default_str(target);
  return option;
}

std::optional<int> parse(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
    return std::nullopt;
  } catch (const CLI::CallForHelp&) {
    std::fputs(app.help().c_str(), stdout);
    return 0;
  } catch (const CLI::CallForAllHelp&) {
    std::fputs(app.help("", CLI::AppFormatMode::All).c_str(), stdout);
    return 0;
  } catch (const CLI::CallForVersion& e) {
    std::printf("%s\n", e.what());
    return 0;
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "%s: error: %s (see --help)\n", app.get_name().c_str(), said(app, e, argc, argv).c_str());
    return 2;
  }
}

}  // namespace spmd::cli
