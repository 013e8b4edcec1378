// Each `bertrt` subcommand lives in its own tools/cmd_<name>.cc and registers
// itself here. A command's callback returns the process exit code.
#pragma once

#include <CLI/CLI.hpp>

#include "bertrt/status.h"

namespace bertrt::cli {

// Exit codes that mean something to scripts.
enum ExitCode : int {
  kExitOk = 0,
  kExitSomeInputsFailed = 1,  // the command ran; some input lines got error records
  kExitUsage = 2,             // bad command line (CLI11's own code for this too)
  kExitModelError = 3,        // the model or plan could not be loaded
  kExitRuntimeError = 4,      // the engine failed (device, memory)
  kExitVerifyFailed = 5,      // build's verification or run's GPU self-check failed
  kExitUnavailable = 6,       // a port to listen on, or a file to write, could not be had
};

// The codes above as `--help` lists them (every command's footer).
inline constexpr const char* kExitCodesHelp =
    "Exit codes: 0 success; 1 some input lines failed (their records say why); 2 bad command "
    "line (an unknown option, fp16 on the CPU, ...); 3 the model could not be loaded; 4 the "
    "engine failed (device, memory) or a server could not be reached; 5 a plan's verification "
    "or the GPU self-check failed; 6 a port to listen on (in use) or a file to write could not "
    "be had.";

// kExitUsage for an engine refused its options (fp16 on the CPU: the user's
// to change), kExitRuntimeError for one that failed (no GPU, no memory).
inline int EngineFailureCode(StatusCode code) {
  return code == StatusCode::kInvalidArgument ? kExitUsage : kExitRuntimeError;
}

void RegisterTokenizeCommand(CLI::App& app, int& exit_code);
void RegisterRunCommand(CLI::App& app, int& exit_code);
void RegisterInspectCommand(CLI::App& app, int& exit_code);
void RegisterBenchCommand(CLI::App& app, int& exit_code);
void RegisterBuildCommand(CLI::App& app, int& exit_code);
void RegisterServeCommand(CLI::App& app, int& exit_code);

}  // namespace bertrt::cli
