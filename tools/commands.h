// Each `bertrt` subcommand lives in its own tools/cmd_<name>.cc and registers
// itself here. A command's callback returns the process exit code.
#pragma once

#include <CLI/CLI.hpp>

namespace bertrt::cli {

// Exit codes that mean something to scripts.
enum ExitCode : int {
  kExitOk = 0,
  kExitSomeInputsFailed = 1,  // the command ran; some input lines got error records
  kExitUsage = 2,             // bad command line (CLI11's own code for this too)
  kExitModelError = 3,        // the model or plan could not be loaded
  kExitRuntimeError = 4,      // the engine failed (device, memory)
  kExitVerifyFailed = 5,      // build's verification or run's GPU self-check failed
};

void RegisterTokenizeCommand(CLI::App& app, int& exit_code);
void RegisterRunCommand(CLI::App& app, int& exit_code);
void RegisterInspectCommand(CLI::App& app, int& exit_code);
void RegisterBenchCommand(CLI::App& app, int& exit_code);
void RegisterBuildCommand(CLI::App& app, int& exit_code);
void RegisterServeCommand(CLI::App& app, int& exit_code);

}  // namespace bertrt::cli
