#include <clocale>
#include <iostream>

#include "commands.h"

int main(int argc, char** argv) {
  // Text is handled as UTF-8 bytes throughout; never depend on the locale
  // (the seeds' servers crashed on Chinese text under an ASCII locale).
  std::setlocale(LC_ALL, "C");
  CLI::App app{"bertrt: serve fine-tuned BERT-family encoders fast (CPU and CUDA)", "bertrt"};
  // Every option's --help shows its default (subcommands inherit this).
  app.option_defaults()->always_capture_default();
  app.set_version_flag("--version", std::string("bertrt ") + BERTRT_VERSION);
  app.require_subcommand(1);
  int exit_code = bertrt::cli::kExitOk;
  bertrt::cli::RegisterTokenizeCommand(app, exit_code);
  bertrt::cli::RegisterRunCommand(app, exit_code);
  bertrt::cli::RegisterInspectCommand(app, exit_code);
  bertrt::cli::RegisterBenchCommand(app, exit_code);
  bertrt::cli::RegisterBuildCommand(app, exit_code);
  bertrt::cli::RegisterServeCommand(app, exit_code);
  app.footer(bertrt::cli::kExitCodesHelp);
  for (CLI::App* cmd : app.get_subcommands({})) cmd->footer(bertrt::cli::kExitCodesHelp);
  // A first word that names no command: say which there are (CLI11 would
  // only say that one is required).
  if (argc > 1 && argv[1][0] != '-') {
    std::string commands;
    bool known = false;
    for (const CLI::App* cmd : app.get_subcommands({})) {
      known |= cmd->get_name() == argv[1];
      commands += (commands.empty() ? "" : ", ") + cmd->get_name();
    }
    if (!known) {
      std::cerr << "error: unknown command \"" << argv[1] << "\"; the commands are " << commands
                << " (bertrt --help says what each does)\n";
      return bertrt::cli::kExitUsage;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version exit 0; every other parse error is a usage error
    // (exit 2, as commands.h documents), not CLI11's own numbering.
    const int code = app.exit(e);
    return code == 0 ? bertrt::cli::kExitOk : bertrt::cli::kExitUsage;
  }
  return exit_code;
}
