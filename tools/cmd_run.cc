// bertrt run MODEL: JSON Lines of texts in, one JSON line of outputs per input.
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "cli_util.h"
#include "commands.h"
#include "core/startup_trace.h"
#include "runtime/prompt.h"

namespace bertrt::cli {
namespace {

struct RunFlags {
  std::string model;
  EngineFlags engine;
  std::string truncation = "longest_first";
  std::string output = "default";
  int max_length = 0;
  int batch_size = 32;
  bool skip_verify = false;
  std::string prompt_name;  // "": the model's default prompt, if any
};

// One input line on its way through: either an error or an encoding.
struct Pending {
  Status error;
  Encoding encoding;
  int32_t pool_start = 0;
};

// Writes the JSON record of sequence `seq` of the batch.
nlohmann::json OutputRecord(const ModelConfig& config, const BatchOutputs& out,
                            const RaggedBatch& batch, int seq, bool hidden_states) {
  const int begin = batch.cu_seqlens[seq], len = batch.cu_seqlens[seq + 1] - begin;
  auto per_seq = [&](const NamedOutput& o) {
    return FloatArray(o.data.data() + static_cast<size_t>(seq) * o.width, o.width);
  };
  auto per_token_rows = [&](const NamedOutput& o) {
    nlohmann::json rows = nlohmann::json::array();
    for (int t = 0; t < len; ++t)
      rows.push_back(FloatArray(o.data.data() + static_cast<size_t>(begin + t) * o.width, o.width));
    return rows;
  };
  auto per_token_scalars = [&](const NamedOutput& o) {
    return FloatArray(o.data.data() + begin, len);
  };
  nlohmann::json record;
  if (hidden_states) {
    record["last_hidden_state"] = per_token_rows(*out.Find("last_hidden_state"));
    return record;
  }
  switch (config.head) {
    case HeadKind::kSequenceClassification: {
      const NamedOutput& logits = *out.Find("logits");
      const float* row = logits.data.data() + static_cast<size_t>(seq) * logits.width;
      int best = 0;
      for (int c = 1; c < logits.width; ++c)
        if (row[c] > row[best]) best = c;
      record["logits"] = per_seq(logits);
      record["label"] = best < static_cast<int>(config.labels.size())
                            ? config.labels[best]
                            : "LABEL_" + std::to_string(best);
      break;
    }
    case HeadKind::kTokenClassification:
      record["logits"] = per_token_rows(*out.Find("logits"));
      break;
    case HeadKind::kQuestionAnswering:
      record["start_logits"] = per_token_scalars(*out.Find("start_logits"));
      record["end_logits"] = per_token_scalars(*out.Find("end_logits"));
      break;
    case HeadKind::kSentenceEmbedding:
      record["embedding"] = per_seq(*out.Find("embedding"));
      break;
    case HeadKind::kBase:
      record["pooler_output"] = per_seq(*out.Find("pooler_output"));
      break;
  }
  return record;
}

void Emit(const nlohmann::json& record) {
  std::string line = record.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  line.push_back('\n');
  std::fwrite(line.data(), 1, line.size(), stdout);
}

// Runs one chunk of input lines and writes their records in input order.
// Returns false when any line failed.
StatusOr<bool> RunChunk(Engine& engine, std::vector<Pending>& chunk, bool hidden_states) {
  RaggedBatch batch;
  for (const Pending& p : chunk)
    if (p.error.ok()) batch.Add(p.encoding.input_ids, p.encoding.token_type_ids, p.pool_start);
  BatchOutputs out;
  if (batch.num_seqs() > 0) {
    RunOptions options;
    options.last_hidden_state = hidden_states;
    ASSIGN_OR_RETURN(out, engine.Run(batch, options));
  }
  bool all_ok = true;
  int seq = 0;
  for (const Pending& p : chunk) {
    if (!p.error.ok()) {
      all_ok = false;
      Emit(ErrorRecord(p.error));
      continue;
    }
    Emit(OutputRecord(engine.config(), out, batch, seq++, hidden_states));
  }
  std::fflush(stdout);
  return all_ok;
}

int Run(const RunFlags& flags) {
  TraceStartup("bertrt run: started");
  const auto warmup = WarmUpGpus(flags.engine, {0});
  auto loaded = LoadForCli(flags.model);
  if (!loaded.ok()) return Fail(loaded.status(), kExitModelError);
  TraceStartup("bertrt run: model read and checked");
  auto truncation = ParseTruncation(flags.truncation);
  if (!truncation.ok()) return Fail(truncation.status(), kExitUsage);
  auto prompt = loaded->model->config.PromptText(
      flags.prompt_name.empty() ? std::nullopt : std::optional<std::string>(flags.prompt_name));
  if (!prompt.ok()) return Fail(prompt.status(), kExitUsage);
  const ModelConfig& config = loaded->model->config;
  auto pool_start = PromptPoolStart(config, *loaded->tokenizer, *prompt);
  if (!pool_start.ok()) return Fail(pool_start.status(), kExitModelError);
  if (flags.output != "default" && flags.output != "last_hidden_state")
    return Fail(
        InvalidArgument("--output " + flags.output + ": expected default or last_hidden_state"),
        kExitUsage);
  const bool hidden_states = flags.output == "last_hidden_state";
  int max_length = flags.max_length > 0 ? flags.max_length : config.max_seq_length;
  if (max_length > config.max_position_embeddings)
    return Fail(InvalidArgument(
                    "--max-length " + std::to_string(max_length) + " is more than the model's " +
                    std::to_string(config.max_position_embeddings) + " position embeddings"),
                kExitUsage);
  auto engine = CreateEngine(loaded->model, flags.engine);
  if (!engine.ok()) return Fail(engine.status(), kExitRuntimeError);
  TraceStartup("bertrt run: engine created");
  if (flags.engine.device == "cuda" && !flags.skip_verify) {
    if (Status checked = SelfCheckGpuEngine(*loaded, flags.engine, **engine); !checked.ok())
      return Fail(checked, checked.code() == StatusCode::kFailedPrecondition ? kExitVerifyFailed
                                                                              : kExitRuntimeError);
    TraceStartup("bertrt run: self-check done");
  }

  ProgressBar progress("run");
  std::vector<Pending> chunk;
  std::string line;
  size_t line_number = 0;
  bool all_ok = true;
  bool first_chunk = true;  // the start ends with its results
  auto flush = [&]() -> bool {
    auto ok = RunChunk(**engine, chunk, hidden_states);
    if (first_chunk) TraceStartup("bertrt run: results of a chunk");
    first_chunk = false;
    progress.Advance(chunk.size());
    chunk.clear();
    if (!ok.ok()) {
      Fail(ok.status(), kExitRuntimeError);
      return false;
    }
    all_ok = all_ok && *ok;
    return true;
  };
  while (std::getline(std::cin, line)) {
    ++line_number;
    Pending p;
    auto input = ParseTextLine(line, line_number);
    if (!input.ok()) {
      p.error = input.status();
    } else if (Status text = CheckInputText(input->text); !text.ok()) {
      p.error = InvalidArgument("line " + std::to_string(line_number) + ": " + text.message());
    } else {
      auto enc = loaded->tokenizer->Encode(*prompt + input->text, input->text_pair, max_length,
                                           *truncation);
      const int tokens = enc.ok() ? static_cast<int>(enc->input_ids.size()) : 0;
      if (!enc.ok())
        p.error =
            InvalidArgument("line " + std::to_string(line_number) + ": " + enc.status().message());
      else if (*pool_start >= tokens)
        p.error = InvalidArgument("line " + std::to_string(line_number) + ": " +
                                  PromptFillsInput(*pool_start, tokens).message());
      else {
        p.encoding = std::move(*enc);
        p.pool_start = *pool_start;
      }
    }
    chunk.push_back(std::move(p));
    if (static_cast<int>(chunk.size()) >= flags.batch_size && !flush()) return kExitRuntimeError;
  }
  if (!chunk.empty() && !flush()) return kExitRuntimeError;
  return all_ok ? kExitOk : kExitSomeInputsFailed;
}

}  // namespace

void RegisterRunCommand(CLI::App& app, int& exit_code) {
  auto flags = std::make_shared<RunFlags>();
  CLI::App* cmd = app.add_subcommand(
      "run",
      "Run the model on JSON Lines from stdin ({\"text\": ..., \"text_pair\": ...}); writes one "
      "JSON line of outputs per input, in order. Output by head: logits + label (sequence "
      "classification), logits per token (token classification), start_logits/end_logits "
      "(question answering), embedding (sentence-transformers), pooler_output (BertModel).");
  cmd->add_option("MODEL", flags->model, "HF model directory or plan file")->required();
  AddEngineOptions(cmd, &flags->engine);
  cmd->add_option(
         "--max-length", flags->max_length,
         "Truncate inputs to N tokens, special tokens included (default: the model's limit)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--truncation", flags->truncation, "longest_first, only_first or only_second")
      ->check(CLI::IsMember({"longest_first", "only_first", "only_second"}));
  cmd->add_option("--batch-size", flags->batch_size, "Inputs per engine call")
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--skip-verify", flags->skip_verify,
                "With --device cuda, skip the self-check (built-in samples on the GPU "
                "against the CPU engine in fp32 before the first input; exit 5 when they "
                "disagree)");
  cmd->add_option("--prompt-name", flags->prompt_name,
                  "A prompt of the model's config_sentence_transformers.json to put before each "
                  "text, as sentence-transformers' encode(prompt_name=...) (default: its "
                  "default_prompt_name, if any)");
  cmd->add_option("--output", flags->output,
                  "default (the head's outputs) or last_hidden_state (per-token states)")
      ->check(CLI::IsMember({"default", "last_hidden_state"}));
  cmd->callback([flags, &exit_code]() { exit_code = Run(*flags); });
}

}  // namespace bertrt::cli
