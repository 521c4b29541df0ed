// The shared CLI11 setup (see Cli.h): the one file that includes CLI11.
#include "tools/cli/Cli.h"

#include <CLI/CLI.hpp>

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

Flags::Flags(const std::string& program, const std::string& description)
    : owned_(std::make_unique<CLI::App>(description)), app_(owned_.get()) {
  app_->name(program);
  app_->set_version_flag("--version", program + " (spmd " + std::string(version()) + ")");
  app_->get_formatter()->column_width(30);
  // A flag given twice: the last one counts, as with getopt and the parsers before CLI11.
  app_->option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
}

Flags::Flags(CLI::App* subcommand) : app_(subcommand) {}

Flags::~Flags() = default;

// The three whole() overloads: a whole number in [min, max] stored into `target`.
template <typename T>
static void wholeInto(CLI::App& app, const std::string& flag, T& target, int64_t min, int64_t max,
                      const std::string& help) {
  app.add_option_function<std::string>(
         flag, checked([&target, flag, min, max](const std::string& v) { target = T(runtime::parseWhole(v, flag, min, max)); }),
         help)
      ->type_name("N")
      ->default_str(std::to_string(target));
}

Flags& Flags::whole(const std::string& flag, int64_t& target, int64_t min, int64_t max, const std::string& help) {
  wholeInto(*app_, flag, target, min, max, help);
  return *this;
}

Flags& Flags::whole(const std::string& flag, int& target, int min, int max, const std::string& help) {
  wholeInto(*app_, flag, target, min, max, help);
  return *this;
}

Flags& Flags::whole(const std::string& flag, uint64_t& target, uint64_t max, const std::string& help) {
  wholeInto(*app_, flag, target, 0, int64_t(std::min<uint64_t>(max, uint64_t(INT64_MAX))), help);
  return *this;
}

Flags& Flags::number(const std::string& flag, double& target, double min, double max, const std::string& help) {
  char shown[32];
  std::snprintf(shown, sizeof shown, "%g", target);
  app_->add_option_function<std::string>(
          flag, checked([&target, flag, min, max](const std::string& v) { target = runtime::parseNumber(v, flag, min, max); }),
          help)
      ->type_name("X")
      ->default_str(shown);
  return *this;
}

Flags& Flags::oneOf(const std::string& flag, std::string& target, const std::vector<std::string>& words,
                    const std::string& help) {
  std::string names;
  for (const std::string& w : words) names += (names.empty() ? "" : "|") + w;
  app_->add_option_function<std::string>(
          flag, checked([&target, flag, words, names](const std::string& v) {
            if (std::find(words.begin(), words.end(), v) == words.end())
              throw spmd::Error(flag + " must be one of " + names + ", got '" + v + "'");
            target = v;
          }),
          help)
      ->type_name(names)
      ->default_str(target);
  return *this;
}

Flags& Flags::text(const std::string& flag, std::string& target, const std::string& help, const std::string& typeName) {
  CLI::Option* option = app_->add_option(flag, target, help)->type_name(typeName);
  if (!target.empty()) option->default_str(target);
  return *this;
}

Flags& Flags::optionalText(const std::string& flag, std::string& target, bool& given, const std::string& help,
                           const std::string& typeName) {
  given = false;
  presence_.emplace_back(app_->add_option(flag, target, help)->type_name(typeName)->expected(0, 1), &given);
  return *this;
}

void Flags::notePresence() {
  for (auto& [option, given] : presence_) *given = option->count() > 0;
  for (auto& sub : subcommands_) sub->notePresence();
}

Flags& Flags::flag(const std::string& flag, bool& target, const std::string& help, bool value) {
  if (value)
    app_->add_flag(flag, target, help);
  else
    app_->add_flag_callback(flag, [&target] { target = false; }, help);
  return *this;
}

Flags& Flags::positional(const std::string& name, std::string& target, const std::string& help,
                         const std::string& typeName) {
  app_->add_option(name, target, help)->type_name(typeName);
  return *this;
}

Flags& Flags::footer(const std::string& text) {
  app_->footer(text);
  return *this;
}

Flags& Flags::subcommand(const std::string& name, const std::string& description) {
  app_->require_subcommand(1);
  subcommands_.push_back(std::unique_ptr<Flags>(new Flags(app_->add_subcommand(name, description))));
  return *subcommands_.back();
}

bool Flags::given() const { return app_->parsed(); }

std::optional<int> Flags::parse(int argc, char** argv) {
  CLI::App& app = *app_;
  try {
    app.parse(argc, argv);
    notePresence();
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
