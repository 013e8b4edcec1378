// bertrt run MODEL [INPUT]: texts in (JSON Lines or plain lines), one result
// per input out, in input order (JSON Lines, or an .npy file of vectors).
//
// The server's request path (ServedModel: its tokenization, truncation,
// prompt and empty-text rules, and its dynamic batcher), in a pipeline so
// that the engine never waits for the host: the main thread reads lines into
// chunks; worker threads parse and encode a chunk, submit it to the batcher
// (which joins the chunks in flight into the engine's batches) and format its
// results; a writer thread writes the chunks back in order.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cli_util.h"
#include "commands.h"
#include "core/json_float.h"
#include "core/startup_trace.h"
#include "server/common/task_request.h"

namespace bertrt::cli {
namespace {

struct RunFlags {
  std::string model;
  ImportFlags import;
  std::string input = "-";
  std::string input_format = "jsonl";
  EngineFlags engine;
  std::string truncation = "longest_first";
  std::string output = "default";
  std::string output_npy;
  int max_length = 0;
  size_t max_normalized_chars = serving::ServeDefaults{}.max_normalized_chars;
  int batch_size = 0;  // 0: by device
  int workers = 0;     // 0: by cores
  bool skip_verify = false;
  bool quiet = false;
  std::string prompt_name;  // "": the model's default prompt, if any
  std::string task;         // "": the head's outputs as they are
  std::string parameters;   // --parameters: the task's, as JSON
};

// One key of a result's JSON record: an output's values, or (`label`) the
// name of the label its row's largest value scores.
struct RecordKey {
  std::string key;
  const OutputDescription* output;
  bool label = false;
};

// What every chunk needs to turn lines into results.
struct RunContext {
  serving::ServedModel* model;
  const ModelConfig* config;
  serving::EncodeOptions encode;  // always truncate; --max-length, --truncation, --prompt-name
  bool text_lines = false;     // --input-format text
  bool hidden_states = false;  // --output last_hidden_state
  std::vector<OutputDescription> outputs;  // the model's; what the pointers below point into
  std::vector<RecordKey> record;           // the keys of each JSON record, in order
  // --output-npy: the per-sequence output written as rows.
  const OutputDescription* npy_output = nullptr;
  // --task: each line is a task request (TaskRequest) answered as HF's pipeline would.
  bool task = false;
  // Set once the first line cut to max_length is noted on stderr.
  std::atomic<bool>* noted_cut = nullptr;
  nlohmann::json task_parameters = nlohmann::json::object();
};

// Consecutive input lines, from reading to writing.
struct Chunk {
  size_t first_line = 0;  // 1-based number of lines[0]
  std::vector<std::string> lines;
  // Filled by a worker.
  std::string json;              // the records, one line each (JSON Lines output)
  std::vector<float> npy_rows;   // lines x npy width (.npy output; NaN for failed lines)
  std::string errors;            // "line N: ..." lines for stderr (.npy output)
  bool all_ok = true;            // no line failed
  Status fatal;                  // the engine failed: the run stops here
};

void AppendRows(std::string& out, const float* v, int rows, int width) {
  out.push_back('[');
  for (int r = 0; r < rows; ++r) {
    if (r) out.push_back(',');
    AppendJsonFloats(out, v + static_cast<size_t>(r) * width, width);
  }
  out.push_back(']');
}

void AppendKey(std::string& out, const char* key, bool first) {
  out += first ? "{\"" : ",\"";
  out += key;
  out += "\":";
}

// The JSON record of sequence `seq` of a result, written straight to text:
// with nlohmann's tree, each number cost more than the model did.
void AppendRecord(const RunContext& ctx, const InferResult& r, int seq, std::string& out) {
  const int begin = r.cu_seqlens[seq], len = r.cu_seqlens[seq + 1] - begin;
  auto per_seq = [&](const NamedOutput& o) {
    AppendJsonFloats(out, o.data.data() + static_cast<size_t>(seq) * o.width, o.width);
  };
  auto per_token = [&](const NamedOutput& o) {
    if (o.width == 1)
      AppendJsonFloats(out, o.data.data() + begin, len);
    else
      AppendRows(out, o.data.data() + static_cast<size_t>(begin) * o.width, len, o.width);
  };
  for (const RecordKey& k : ctx.record) {
    AppendKey(out, k.key.c_str(), &k == &ctx.record.front());
    const NamedOutput& o = *r.outputs.Find(k.output->name);
    if (k.label) {
      const float* row = o.data.data() + static_cast<size_t>(seq) * o.width;
      const int best = static_cast<int>(std::max_element(row, row + o.width) - row);
      out += nlohmann::json(ctx.config->LabelName(best))
                 .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    } else if (o.per_token) {
      per_token(o);
    } else if (k.output->sparse) {
      // SPLADE's vocabulary-wide vector: its non-zero entries, as the
      // indices/values pairs sparse vector stores take.
      const float* row = o.data.data() + static_cast<size_t>(seq) * o.width;
      std::vector<float> values;
      std::string indices;
      for (int v = 0; v < o.width; ++v) {
        if (row[v] == 0.0f) continue;
        indices += (values.empty() ? "" : ",") + std::to_string(v);
        values.push_back(row[v]);
      }
      out += "{\"indices\":[" + indices + "],\"values\":";
      AppendJsonFloats(out, values.data(), values.size());
      out += "}";
    } else {
      per_seq(o);
    }
  }
  out += "}\n";
}

// The keys of each record: the outputs a run returns (with --output
// last_hidden_state the hidden states alone), and a per-sequence label
// score's label, in name order (as the records were when written through
// nlohmann's sorted objects: "end_logits" before "start_logits").
std::vector<RecordKey> RecordKeys(const std::vector<OutputDescription>& outputs,
                                  bool hidden_states) {
  std::vector<RecordKey> keys;
  for (const OutputDescription& o : outputs) {
    if (o.on_request != hidden_states) continue;
    keys.push_back({o.name, &o});
    if (o.scores_labels && !o.per_token) keys.push_back({"label", &o, true});
  }
  std::sort(keys.begin(), keys.end(),
            [](const RecordKey& a, const RecordKey& b) { return a.key < b.key; });
  return keys;
}

void AppendError(const Status& error, Chunk& chunk, const RunContext& ctx) {
  chunk.all_ok = false;
  if (ctx.npy_output) {
    chunk.npy_rows.insert(chunk.npy_rows.end(), ctx.npy_output->width,
                          std::numeric_limits<float>::quiet_NaN());
    chunk.errors += "error: " + error.message() + "\n";
    return;
  }
  chunk.json += ErrorRecord(error).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  chunk.json.push_back('\n');
}

// Line `number` as an input: its tokens, or why it has none.
StatusOr<SequenceInput> EncodeLine(const RunContext& ctx, const std::string& line, size_t number) {
  const std::string where = "line " + std::to_string(number) + ": ";
  TextInput input;
  if (ctx.text_lines) {
    input.text = line;
  } else {
    auto parsed = ParseTextLine(line, number);
    // Plain text piped in: say on its first line how to read it as such.
    if (!parsed.ok() && number == 1 && !line.empty() && line.front() != '{' && line.front() != '[')
      return InvalidArgument(parsed.status().message() +
                             "; if INPUT holds one text per line, add --input-format text");
    ASSIGN_OR_RETURN(input, std::move(parsed));
  }
  bool cut = false;
  auto seq = ctx.model->Encode(input, ctx.encode, &cut);
  if (!seq.ok()) return InvalidArgument(where + seq.status().message());
  if (cut && !ctx.noted_cut->exchange(true))
    std::fprintf(stderr,
                 "run: %sits tokens past the first %d were left out, as they are of every "
                 "longer input (the model's max_seq_length, or --max-length); split long "
                 "texts to read all of them\n",
                 where.c_str(), ctx.encode.max_length);
  return seq;
}

// Runs `op` (an operation of serving::Infer, through the serving core as the
// server's requests are) into `result`; false when the engine failed, which
// stops the run (chunk.fatal).
template <typename Result, typename Op>
bool RunChunk(const RunContext& ctx, Chunk& chunk, Result& result, Op&& op) {
  serving::RequestTimer timer(*ctx.model, nullptr);
  serving::Infer infer(*ctx.model, timer);
  auto done = op(infer);
  timer.Finish(done.status());
  if (!done.ok()) {
    chunk.fatal = done.status();
    return false;
  }
  result = std::move(*done);
  return true;
}

// A chunk of --task lines: each line's request, every task of the chunk in
// one batcher request.
void ProcessTaskChunk(const RunContext& ctx, Chunk& chunk) {
  std::vector<StatusOr<server::TaskRequest>> requests;
  std::vector<const serving::Task*> tasks;
  for (size_t i = 0; i < chunk.lines.size(); ++i) {
    const std::string& line = chunk.lines[i];
    const std::string where = "line " + std::to_string(chunk.first_line + i) + ": ";
    nlohmann::json body = nlohmann::json{{"text", line}};
    if (!ctx.text_lines) {
      body = nlohmann::json::parse(line, nullptr, false);
      if (body.is_discarded()) {
        requests.push_back(InvalidArgument(where + "not JSON" +
                                           (i == 0 && !line.empty() && line.front() != '{'
                                                ? "; if INPUT holds one text per line, add "
                                                  "--input-format text"
                                                : "")));
        continue;
      }
    }
    auto parsed = server::TaskRequest::Parse(*ctx.model, body, 0, ctx.task_parameters);
    if (!parsed.ok()) {
      requests.push_back(InvalidArgument(where + parsed.status().message()));
      continue;
    }
    requests.push_back(std::move(parsed));
  }
  chunk.lines = {};
  // The tasks point into `requests`, complete now.
  for (const auto& r : requests)
    if (r.ok()) r->AppendTasks(tasks);
  std::vector<serving::TaskAnswer> answers;
  if (!tasks.empty() &&
      !RunChunk(ctx, chunk, answers, [&](serving::Infer& infer) { return infer.RunTasks(tasks); }))
    return;
  size_t first = 0;
  for (const auto& r : requests) {
    if (!r.ok()) {
      AppendError(r.status(), chunk, ctx);
      continue;
    }
    chunk.json += r->Answer(answers, first).dump(-1, ' ', false,
                                                 nlohmann::json::error_handler_t::replace);
    chunk.json.push_back('\n');
    first += r->tasks();
  }
}

// A worker's whole job on one chunk.
void ProcessChunk(const RunContext& ctx, Chunk& chunk) {
  if (ctx.task) return ProcessTaskChunk(ctx, chunk);
  std::vector<Status> encoded;  // per line: Ok, or why it has no result
  std::vector<SequenceInput> sequences;
  for (size_t i = 0; i < chunk.lines.size(); ++i) {
    auto seq = EncodeLine(ctx, chunk.lines[i], chunk.first_line + i);
    encoded.push_back(seq.status());
    if (seq.ok()) sequences.push_back(std::move(*seq));
  }
  chunk.lines = {};
  InferResult result;
  if (!sequences.empty() && !RunChunk(ctx, chunk, result, [&](serving::Infer& infer) {
        return infer.Run(std::move(sequences), {.last_hidden_state = ctx.hidden_states});
      }))
    return;
  int seq = 0;
  for (const Status& e : encoded) {
    if (!e.ok()) {
      AppendError(e, chunk, ctx);
      continue;
    }
    if (ctx.npy_output) {
      const NamedOutput& o = *result.outputs.Find(ctx.npy_output->name);
      const float* row = o.data.data() + static_cast<size_t>(seq) * o.width;
      chunk.npy_rows.insert(chunk.npy_rows.end(), row, row + o.width);
    } else {
      AppendRecord(ctx, result, seq, chunk.json);
    }
    ++seq;
  }
}

// A float32 [rows, width] .npy file (format 1.0) whose row count is written
// at the end, when it is known: the header is padded to a fixed size so that
// it can be rewritten in place.
class NpyWriter {
 public:
  Status Open(const std::string& path, int width) {
    width_ = width;
    file_ = std::fopen(path.c_str(), "wb");
    if (!file_) return InvalidArgument("--output-npy " + path + ": cannot write it");
    return WriteHeader();
  }
  ~NpyWriter() {
    if (file_) std::fclose(file_);
  }
  bool Append(const std::vector<float>& rows) {
    rows_ += rows.size() / width_;
    return std::fwrite(rows.data(), sizeof(float), rows.size(), file_) == rows.size();
  }
  Status Close() {
    Status st = std::fseek(file_, 0, SEEK_SET) == 0 ? WriteHeader()
                                                    : Internal("--output-npy: cannot seek");
    if (std::fclose(file_) != 0 && st.ok()) st = Internal("--output-npy: write failed");
    file_ = nullptr;
    return st;
  }

 private:
  static constexpr size_t kHeaderBytes = 128;  // magic, version, length, dict, padding
  Status WriteHeader() {
    std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (" +
                       std::to_string(rows_) + ", " + std::to_string(width_) + "), }";
    std::string header = "\x93NUMPY\x01";
    header.push_back('\0');
    const size_t dict_bytes = kHeaderBytes - 10;
    header.push_back(static_cast<char>(dict_bytes & 0xff));
    header.push_back(static_cast<char>(dict_bytes >> 8));
    dict.resize(dict_bytes - 1, ' ');
    header += dict + "\n";
    if (std::fwrite(header.data(), 1, header.size(), file_) != header.size())
      return Internal("--output-npy: write failed");
    return Status::Ok();
  }
  std::FILE* file_ = nullptr;
  size_t rows_ = 0;
  int width_ = 0;
};

// "run: 120,000 texts, 15,210 texts/s, 63%, 0:42 left" on stderr, ten times
// a second at most; the share and time left when the input's size is known.
class RunProgress {
 public:
  RunProgress(bool enabled, size_t input_bytes)
      : enabled_(enabled), input_bytes_(input_bytes), start_(Clock::now()) {}
  void Update(size_t texts, size_t bytes_read, bool final) {
    if (!enabled_) return;
    const auto now = Clock::now();
    if (!final && now - last_ < std::chrono::milliseconds(100)) return;
    last_ = now;
    const double seconds = std::chrono::duration<double>(now - start_).count();
    const double rate = seconds > 0 ? texts / seconds : 0;
    std::string line = "\rrun: " + Thousands(texts) + " texts, " +
                       Thousands(static_cast<size_t>(rate)) + " texts/s";
    if (input_bytes_ > 0 && !final) {
      const double share = std::min(1.0, double(bytes_read) / input_bytes_);
      const int left = share > 0 ? static_cast<int>(seconds * (1 - share) / share) : 0;
      char buf[64];
      std::snprintf(buf, sizeof(buf), ", %d%%, %d:%02d left", static_cast<int>(share * 100),
                    left / 60, left % 60);
      line += buf;
    }
    line += final ? "\n" : "   ";
    std::fputs(line.c_str(), stderr);
    std::fflush(stderr);
  }

 private:
  using Clock = std::chrono::steady_clock;
  static std::string Thousands(size_t n) {
    std::string s = std::to_string(n);
    for (int i = static_cast<int>(s.size()) - 3; i > 0; i -= 3) s.insert(i, ",");
    return s;
  }
  bool enabled_;
  size_t input_bytes_;
  Clock::time_point start_, last_{};
};

// The per-sequence output an .npy file takes (a row per input), or why the
// run has none.
StatusOr<const OutputDescription*> NpyOutput(const std::vector<OutputDescription>& outputs,
                                             bool hidden_states) {
  for (const OutputDescription& o : outputs)
    if (o.on_request == hidden_states && !o.per_token) return &o;
  return InvalidArgument("--output-npy writes one vector per input (embeddings, pooler "
                         "outputs or sequence logits); this run's outputs are per token: "
                         "use JSON Lines");
}

int Run(const RunFlags& flags) {
  TraceStartup("bertrt run: started");
  const auto warmup = WarmUpGpus(flags.engine, {0});
  auto loaded = LoadForCli(flags.model, flags.import);
  if (!loaded.ok()) return Fail(loaded.status(), kExitModelError);
  TraceStartup("bertrt run: model read and checked");
  const ModelConfig& config = loaded->model->config;
  RunContext ctx;
  ctx.config = &config;
  ctx.text_lines = flags.input_format == "text";
  ctx.hidden_states = flags.output == kLastHiddenState;
  // run cuts what is too long (the server refuses it unless asked).
  ctx.encode.truncate = true;
  auto truncation = ParseTruncation(flags.truncation);
  if (!truncation.ok()) return Fail(truncation.status(), kExitUsage);
  ctx.encode.truncation = *truncation;
  if (!flags.prompt_name.empty()) {
    ctx.encode.prompt_name = flags.prompt_name;
    if (auto prompt = config.PromptText(flags.prompt_name); !prompt.ok())
      return Fail(prompt.status(), kExitUsage);
  }
  const int max_length = flags.max_length > 0 ? flags.max_length : config.max_seq_length;
  ctx.encode.max_length = max_length;
  if (max_length > config.max_positions())
    return Fail(InvalidArgument("--max-length " + std::to_string(max_length) +
                                " is more than the model's " +
                                std::to_string(config.max_positions()) +
                                " position embeddings"),
                kExitUsage);
  if (!flags.task.empty()) {
    const std::string served = server::PipelineTask(config);
    if (flags.task != served)
      return Fail(InvalidArgument("--task " + flags.task + " needs a model with that head; this "
                                  "one's is " + HeadKindName(config.head) +
                                  (served.empty() ? ": leave --task out for its outputs"
                                                  : ": use --task " + served)),
                  kExitUsage);
    if (!flags.output_npy.empty() || ctx.hidden_states)
      return Fail(InvalidArgument("--task writes entities or answers as JSON Lines: leave out "
                                  "--output-npy and --output"),
                  kExitUsage);
    ctx.task = true;
    ctx.task_parameters = nlohmann::json::parse(flags.parameters, nullptr, false);
    if (!ctx.task_parameters.is_object())
      return Fail(InvalidArgument("--parameters must be a JSON object, e.g. "
                                  "'{\"aggregation_strategy\": \"simple\"}'"),
                  kExitUsage);
  }
  ctx.outputs = DescribeOutputs(*loaded->model);
  ctx.record = RecordKeys(ctx.outputs, ctx.hidden_states);
  // Only a BertModel saved without its pooler has no output but the hidden states.
  if (ctx.record.empty())
    return Fail(InvalidArgument("this BertModel has no pooler (saved without its pooling "
                                "layer), so its only output is per token: add --output "
                                "last_hidden_state"),
                kExitUsage);
  NpyWriter npy;
  if (!flags.output_npy.empty()) {
    auto out = NpyOutput(ctx.outputs, ctx.hidden_states);
    if (!out.ok()) return Fail(out.status(), kExitUsage);
    ctx.npy_output = *out;
  }

  std::ifstream file;
  size_t input_bytes = 0;
  if (flags.input != "-") {
    file.open(flags.input, std::ios::binary);
    if (!file)
      return Fail(InvalidArgument("INPUT " + flags.input + ": cannot read it"), kExitUsage);
    struct stat st {};
    if (stat(flags.input.c_str(), &st) == 0 && S_ISREG(st.st_mode)) input_bytes = st.st_size;
  }
  std::istream& in = flags.input == "-" ? std::cin : file;
  if (!flags.output_npy.empty()) {
    if (Status st = npy.Open(flags.output_npy, ctx.npy_output->width); !st.ok())
      return Fail(st, kExitUsage);
  }

  auto engine = CreateEngine(loaded->model, *loaded->tokenizer, flags.engine);
  if (!engine.ok()) return Fail(engine.status(), EngineFailureCode(engine.status().code()));
  TraceStartup("bertrt run: engine created");
  if (flags.engine.device == "cuda" && !flags.skip_verify) {
    if (Status checked = SelfCheckGpuEngine(*loaded, flags.engine, **engine); !checked.ok())
      return Fail(checked, checked.code() == StatusCode::kFailedPrecondition ? kExitVerifyFailed
                                                                              : kExitRuntimeError);
    TraceStartup("bertrt run: self-check done");
  }
  // A GPU batch of a few hundred texts keeps it busy; the CPU engine too
  // gains up to ~128 (all-MiniLM-L6-v2 on 2 cores: 525 texts/s at 32, 613 at
  // 128, 624 at 256; bench/RESULTS.md 2026-12-02).
  const int batch_size = flags.batch_size > 0 ? flags.batch_size
                         : flags.engine.device == "cuda" ? 256
                                                         : 128;
  // Chunks smaller than a batch, so that the scheduler fills each batch from
  // several and a chunk's host work overlaps the engine's.
  const size_t chunk_lines = static_cast<size_t>(std::clamp(batch_size / 4, 1, 64));
  const int workers =
      flags.workers > 0 ? flags.workers
                        : std::clamp(static_cast<int>(std::thread::hardware_concurrency()), 2, 16);
  // The engine served as `bertrt serve` serves it, with batches of
  // batch_size texts of up to max_length tokens.
  serving::ModelServing serving;
  serving.instances.push_back(Instance(flags.engine));
  serving.scheduler.max_batch_size = batch_size;
  serving.scheduler.max_batch_tokens = batch_size * std::max(max_length, 1);
  // A --task line may take many windows: the batcher splits big requests.
  serving.scheduler.max_client_batch_size = ctx.task ? INT32_MAX : static_cast<int>(chunk_lines);
  serving.scheduler.max_queue_size = static_cast<size_t>(4 * workers + 4);
  std::vector<std::unique_ptr<Engine>> engines;
  engines.push_back(std::move(*engine));
  serving::ServeDefaults defaults;
  defaults.max_normalized_chars = flags.max_normalized_chars;
  auto served =
      serving::ServedModel::Create(serving::DefaultModelName(flags.model), "1", flags.model,
                                  std::move(*loaded), std::move(engines), serving, defaults);
  if (!served.ok()) return Fail(served.status(), kExitRuntimeError);
  ctx.model = served->get();
  std::atomic<bool> noted_cut{false};
  ctx.noted_cut = &noted_cut;

  // Chunks by index: read (queued for a worker), then done (for the writer).
  std::mutex mu;
  std::condition_variable cv;
  std::map<size_t, Chunk> chunks;
  std::deque<size_t> to_process;
  size_t read = 0, written = 0;
  bool reading_done = false, stop = false;
  const size_t max_in_flight = 4 * static_cast<size_t>(workers);
  std::map<size_t, bool> done;  // index -> processed
  std::atomic<size_t> bytes_read{0};

  std::vector<std::thread> pool;
  for (int w = 0; w < workers; ++w)
    pool.emplace_back([&] {
      for (;;) {
        size_t index;
        Chunk* chunk;
        {
          std::unique_lock lock(mu);
          cv.wait(lock, [&] { return !to_process.empty() || reading_done || stop; });
          if (to_process.empty() || stop) return;
          index = to_process.front();
          to_process.pop_front();
          chunk = &chunks.at(index);
        }
        ProcessChunk(ctx, *chunk);
        std::lock_guard lock(mu);
        done[index] = true;
        cv.notify_all();
      }
    });

  // The writer: chunks in input order, as each is done.
  RunProgress progress(isatty(STDERR_FILENO) && !flags.quiet, input_bytes);
  bool all_ok = true;
  Status fatal;
  size_t texts_written = 0;
  std::thread writer([&] {
    for (;;) {
      Chunk chunk;
      {
        std::unique_lock lock(mu);
        cv.wait(lock, [&] { return done.count(written) || (reading_done && written == read); });
        if (!done.count(written)) return;
        chunk = std::move(chunks.at(written));
        chunks.erase(written);
        done.erase(written);
      }
      if (!chunk.fatal.ok()) {
        std::lock_guard lock(mu);
        fatal = chunk.fatal;
        stop = true;
        cv.notify_all();
        return;
      }
      if (ctx.npy_output) {
        std::fputs(chunk.errors.c_str(), stderr);
        if (!npy.Append(chunk.npy_rows)) {
          std::lock_guard lock(mu);
          fatal = Internal("--output-npy " + flags.output_npy + ": write failed (disk full?)");
          stop = true;
          cv.notify_all();
          return;
        }
        texts_written += chunk.npy_rows.size() / ctx.npy_output->width;
      } else {
        std::fwrite(chunk.json.data(), 1, chunk.json.size(), stdout);
        texts_written += std::count(chunk.json.begin(), chunk.json.end(), '\n');
      }
      all_ok = all_ok && chunk.all_ok;
      if (written == 0) {
        std::fflush(stdout);
        TraceStartup("bertrt run: results of a chunk");
      }
      progress.Update(texts_written, bytes_read.load(), false);
      std::lock_guard lock(mu);
      ++written;
      cv.notify_all();
    }
  });

  std::ios::sync_with_stdio(false);
  std::string line;
  size_t line_number = 0;
  Chunk next;
  auto submit = [&] {
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return read - written < max_in_flight || stop; });
    if (stop) return false;
    chunks.emplace(read, std::move(next));
    to_process.push_back(read++);
    cv.notify_all();
    next = Chunk{};
    return true;
  };
  bool first = true;
  while (std::getline(in, line)) {
    bytes_read += line.size() + 1;
    if (ctx.text_lines && !line.empty() && line.back() == '\r') line.pop_back();
    if (next.lines.empty()) next.first_line = line_number + 1;
    ++line_number;
    next.lines.push_back(std::move(line));
    if (next.lines.size() >= (first ? 1 : chunk_lines)) {
      // The first chunk is one line, so that the first result (and the
      // startup trace's last step) comes as soon as the engine can give it.
      first = false;
      if (!submit()) break;
    }
  }
  if (!next.lines.empty()) submit();
  {
    std::lock_guard lock(mu);
    reading_done = true;
    cv.notify_all();
  }
  writer.join();
  {
    std::lock_guard lock(mu);
    stop = true;
    cv.notify_all();
  }
  for (std::thread& t : pool) t.join();
  ctx.model->scheduler().Shutdown();
  std::fflush(stdout);
  progress.Update(texts_written, bytes_read.load(), true);
  if (!fatal.ok()) return Fail(fatal, kExitRuntimeError);
  if (!flags.output_npy.empty()) {
    if (Status st = npy.Close(); !st.ok()) return Fail(st, kExitRuntimeError);
  }
  return all_ok ? kExitOk : kExitSomeInputsFailed;
}

}  // namespace

void RegisterRunCommand(CLI::App& app, int& exit_code) {
  auto flags = std::make_shared<RunFlags>();
  CLI::App* cmd = app.add_subcommand(
      "run",
      "Run the model on texts from INPUT (default stdin): JSON Lines ({\"text\": ..., "
      "\"text_pair\": ...}) or, with --input-format text, one text per line. Writes one JSON "
      "line of outputs per input to stdout, in input order, or with --output-npy the vectors "
      "to an .npy file. Output by head: logits + label (sequence classification), logits per "
      "token (token classification), start_logits/end_logits (question answering), embedding "
      "(sentence-transformers), pooler_output (BertModel). A bad line gets an error record in "
      "its place and exit code 1; the other lines still run.");
  cmd->add_option("MODEL", flags->model, kModelHelp)->required();
  AddImportOptions(cmd, &flags->import);
  cmd->add_option("INPUT", flags->input, "Input file (default -: stdin)");
  cmd->add_option("--task", flags->task,
                  "Answer as HF's pipeline does, one JSON line per input: token-classification "
                  "(entities; lines {\"text\": ...}) or question-answering (answers; lines "
                  "{\"question\": ..., \"context\": ...}). Lines may also be the HF Inference "
                  "API's {\"inputs\": ..., \"parameters\": {...}}")
      ->check(CLI::IsMember({"token-classification", "question-answering"}));
  cmd->add_option("--parameters", flags->parameters,
                  "With --task, the pipeline's parameters for every line, as JSON (a line's "
                  "own \"parameters\" win): aggregation_strategy, ignore_labels, stride; "
                  "top_k, max_answer_len, doc_stride, max_seq_len, handle_impossible_answer, "
                  "align_to_words")
      ->default_val("{}");
  cmd->add_option("--input-format", flags->input_format,
                  "jsonl (one JSON object per line) or text (each line is a text)")
      ->check(CLI::IsMember({"jsonl", "text"}));
  AddEngineOptions(cmd, &flags->engine);
  cmd->add_option(
         "--max-length", flags->max_length,
         "Truncate inputs to N tokens, special tokens included (default: the model's limit)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--truncation", flags->truncation, "longest_first, only_first or only_second")
      ->check(CLI::IsMember({"longest_first", "only_first", "only_second"}));
  AddMaxNormalizedChars(cmd, &flags->max_normalized_chars);
  cmd->add_option("--batch-size", flags->batch_size,
                  "Most inputs per engine call (default: 256 on cuda, 128 on cpu)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--workers", flags->workers,
                  "Threads that parse, tokenize and format (default: the cores, 2 to 16)")
      ->check(CLI::NonNegativeNumber);
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
      ->check(CLI::IsMember({"default", kLastHiddenState}));
  cmd->add_option("--output-npy", flags->output_npy,
                  "Write the vectors (embedding, pooler_output or sequence logits) to FILE as "
                  "a float32 [inputs, width] .npy array (numpy.load opens it) instead of JSON "
                  "Lines; a failed line gets a row of NaN and its error on stderr");
  cmd->add_flag("--quiet", flags->quiet, "No progress line on stderr");
  cmd->callback([flags, &exit_code]() { exit_code = Run(*flags); });
}

}  // namespace bertrt::cli
