// bertrt serve MODEL | --model-repository DIR: the HTTP server (KServe v2,
// text-embeddings-inference and OpenAI-compatible endpoints, /metrics) and the
// KServe v2 gRPC server, over a dynamic batcher per model.
#include <malloc.h>
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "cli_util.h"
#include "commands.h"
#include "server/grpc/grpc_server.h"
#include "server/http/http_server.h"

namespace bertrt::cli {
namespace {

struct ServeFlags {
  std::vector<std::string> models;        // MODEL ...
  std::vector<std::string> named_models;  // --model NAME=PATH
  ImportFlags import;
  std::string model_name;
  std::string repository;
  // Defaults: HttpOptions' own, in one place.
  std::string host = server::HttpOptions{}.host;
  int port = server::HttpOptions{}.port;
  // -1: the HTTP port + 1 (Triton's 8000/8001 pair, and a second server
  // moved to another HTTP port moves its gRPC port too); 0: no gRPC.
  int grpc_port = -1;
  // The gRPC limits; host, port, key, TLS and logging come from the flags above.
  server::GrpcOptions grpc;
  double grpc_stream_idle_timeout_s = server::GrpcOptions{}.stream_idle_timeout.count() / 1000.0;
  int http_threads = server::HttpOptions{}.handler_threads;
  int http_max_threads = 0;  // 0: the larger of HttpOptions' max_handler_threads and http_threads
  int http_io_threads = server::HttpOptions{}.io_threads;
  double http_header_timeout_s = server::HttpOptions{}.header_timeout.count() / 1000.0;
  double http_body_timeout_s = server::HttpOptions{}.body_timeout.count() / 1000.0;
  bool http_cancel_on_close = server::HttpOptions{}.cancel_on_close;
  EngineFlags engine;
  ServingFlags serving;
  std::string model_control = "none";
  double poll_seconds = 5;
  std::vector<std::string> load_models;
  size_t max_payload_bytes = server::HttpOptions{}.max_payload_bytes;
  std::string api_key;
  server::TlsFiles tls;
  bool log_requests = false;
  bool strict_readiness = true;
  std::string default_model;  // the bare TEI/OpenAI routes' model; "": the first by name
  double drain_seconds = 30;
};

// The models given on the command line, each with the name it is served as:
// MODEL arguments (named after their folder, or --model-name for one) and
// --model NAME=PATH.
StatusOr<std::vector<std::pair<std::string, std::string>>> CommandLineModels(const ServeFlags& f) {
  if (!f.model_name.empty() && f.models.size() != 1)
    return InvalidArgument("--model-name names the one MODEL; to name several, give each as "
                           "--model NAME=PATH");
  std::vector<std::pair<std::string, std::string>> out;  // name, path
  for (const std::string& path : f.models)
    out.push_back({f.model_name.empty() ? serving::DefaultModelName(path) : f.model_name, path});
  for (const std::string& named : f.named_models) {
    const size_t eq = named.find('=');
    if (eq == 0 || eq == std::string::npos || eq + 1 == named.size())
      return InvalidArgument("--model " + named + ": expected NAME=PATH");
    out.push_back({named.substr(0, eq), named.substr(eq + 1)});
  }
  std::set<std::string> names;
  for (const auto& [name, path] : out)
    if (!names.insert(name).second)
      return InvalidArgument("two models would be served as \"" + name +
                             "\"; name them with --model NAME=PATH");
  if (out.size() > 1 && (!f.import.tokenizer.empty() || !f.import.labels.empty()))
    return InvalidArgument("--tokenizer and --labels apply to a single MODEL");
  return out;
}

int Serve(const ServeFlags& flags) {
  auto singles = CommandLineModels(flags);
  if (!singles.ok()) return Fail(singles.status(), kExitUsage);
  if (singles->empty() == flags.repository.empty())
    return Fail(InvalidArgument("give the models to serve: MODEL (one or more), --model NAME=PATH, "
                                "or --model-repository DIR"),
                kExitUsage);
  if (!flags.repository.empty() && (!flags.import.tokenizer.empty() || !flags.import.labels.empty()))
    return Fail(InvalidArgument("--tokenizer and --labels apply to MODEL; in a repository, keep "
                                "each model's tokenizer and config.json (id2label) in its folder"),
                kExitUsage);
  // Blocks of 256 KiB and more (request bodies, large answers, a long text's
  // tokens) are mapped on their own and given back to the system when freed.
  // glibc otherwise raises this threshold to the largest block freed so far
  // (up to 32 MB), after which large requests' memory stayed in the heap for
  // good (issue 44, D5: RSS 178 MB -> 2 GB, kept).
  mallopt(M_MMAP_THRESHOLD, 256 << 10);
  // Blocked before any thread exists, so only the waiter below receives them.
  // SIGHUP too: by default it ends a process at once, dropping what is in
  // flight (issue 44, D10); here it rescans a polled repository, and is
  // otherwise logged and ignored.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  if (flags.engine.device != "cpu" && flags.engine.device != "cuda")
    return Fail(InvalidArgument("--device " + flags.engine.device + ": expected cpu or cuda"),
                kExitUsage);
  auto control = serving::ParseModelControl(flags.model_control);
  if (!control.ok()) return Fail(control.status(), kExitUsage);
  if (flags.repository.empty() && *control != serving::ModelControl::kNone)
    return Fail(InvalidArgument("--model-control-mode " + flags.model_control +
                                " needs --model-repository DIR"),
                kExitUsage);
  if (!flags.load_models.empty() && *control != serving::ModelControl::kExplicit)
    return Fail(InvalidArgument("--load-model needs --model-control-mode explicit"), kExitUsage);
  if (flags.http_max_threads != 0 && flags.http_max_threads < flags.http_threads)
    return Fail(
        InvalidArgument("--http-max-threads " + std::to_string(flags.http_max_threads) +
                        " is below --http-thread-count " + std::to_string(flags.http_threads) +
                        ": the threads kept ready cannot exceed the most allowed; raise "
                        "--http-max-threads or lower --http-thread-count"),
        kExitUsage);
  const int http_max_threads =
      flags.http_max_threads != 0
          ? flags.http_max_threads
          : std::max(server::HttpOptions{}.max_handler_threads, flags.http_threads);

  // TLS files are checked before any model loads: a typo fails in a second.
  server::TlsPem tls;
  if (flags.tls.enabled() || !flags.tls.key_path.empty()) {
    auto loaded_tls = server::LoadTls(flags.tls);
    if (!loaded_tls.ok()) return Fail(loaded_tls.status(), kExitUsage);
    tls = std::move(*loaded_tls);
  }

  const auto warmup = WarmUpGpus(flags.engine, flags.serving.gpus);
  server::Metrics metrics;
  serving::ModelRegistry registry(MakeServeDefaults(flags.engine, flags.serving, &metrics));
  registry.set_strict_readiness(flags.strict_readiness);
  Status loaded = Status::Ok();
  for (const auto& [name, path] : *singles)
    if (loaded.ok()) loaded = registry.LoadSingle(path, name, MakeImportOptions(flags.import));
  if (!flags.repository.empty())
    loaded = registry.OpenRepository(flags.repository, *control, flags.load_models);
  if (!loaded.ok()) return Fail(loaded, kExitModelError);
  if (!flags.default_model.empty()) {
    if (auto found = registry.Find(flags.default_model); !found.ok())
      return Fail(InvalidArgument("--default-model: " + found.status().message()), kExitUsage);
    registry.set_default_model(flags.default_model);
  }
  for (const auto& m : registry.Served())
    std::fprintf(stderr, "[serve] model %s version %s (%s, head %s, max input %d tokens) on %s\n",
                 m->name().c_str(), m->version().c_str(), m->source().c_str(),
                 HeadKindName(m->config().head), m->max_input_length(), m->placement().c_str());
  if (*control == serving::ModelControl::kPoll) registry.StartPolling(flags.poll_seconds);

  auto ms = [](double s) { return std::chrono::milliseconds(static_cast<long>(s * 1000)); };
  server::HttpServer http(
      registry, metrics,
      {flags.host, flags.port, flags.max_payload_bytes, flags.http_threads, http_max_threads,
       flags.api_key, tls, flags.log_requests, ms(flags.http_header_timeout_s),
       ms(flags.http_body_timeout_s), flags.http_io_threads, flags.http_cancel_on_close});
  if (Status st = http.Bind(); !st.ok()) return Fail(st, kExitUnavailable);
  std::unique_ptr<server::GrpcServer> grpc;
  const int grpc_port =
      flags.grpc_port >= 0 ? flags.grpc_port : (flags.port > 0 && flags.port < 65535 ? flags.port + 1 : 0);
  if (grpc_port != 0) {
    server::GrpcOptions options = flags.grpc;
    options.host = flags.host;
    options.port = grpc_port;
    options.max_message_bytes = flags.max_payload_bytes;
    options.api_key = flags.api_key;
    options.tls = tls;
    options.log_requests = flags.log_requests;
    options.stream_idle_timeout = ms(flags.grpc_stream_idle_timeout_s);
    grpc = std::make_unique<server::GrpcServer>(registry, metrics, std::move(options));
    if (Status st = grpc->Start(); !st.ok()) return Fail(st, kExitUnavailable);
  }
  std::atomic<bool> signalled{false};
  // Set by the main thread once both front ends have stopped and the models
  // are drained.
  std::mutex drained_mu;
  std::condition_variable drained_cv;
  bool drained = false;
  const auto drain = std::chrono::milliseconds(static_cast<long>(flags.drain_seconds * 1000));
  const bool polled = *control == serving::ModelControl::kPoll;
  std::thread waiter([&] {
    int sig = 0;
    while (sigwait(&signals, &sig) == 0 && sig == SIGHUP) {
      if (polled) {
        std::fprintf(stderr, "[serve] SIGHUP: rescanning the model repository now\n");
        registry.PollNow();
      } else {
        std::fprintf(stderr,
                     "[serve] SIGHUP ignored: nothing to reload (only --model-control-mode poll "
                     "rescans on SIGHUP); SIGTERM or SIGINT stops the server\n");
      }
    }
    signalled = true;
    std::fprintf(stderr, "[serve] signal %d: stopping (finishing in-flight requests, up to %g s)\n",
                 sig, flags.drain_seconds);
    http.Stop();
    if (grpc) grpc->Stop(drain);  // calls still running at the deadline are cancelled
    // The same deadline for HTTP: what is still queued then is given up on
    // (503), so that its handlers answer and the process can exit.
    std::unique_lock lock(drained_mu);
    if (!drained_cv.wait_for(lock, drain, [&] { return drained; })) {
      std::fprintf(stderr,
                   "[serve] --drain-timeout (%g s) passed: cancelling the requests still "
                   "queued\n",
                   flags.drain_seconds);
      registry.CancelQueued(
          Unavailable("the server is shutting down and its --drain-timeout passed"));
    }
  });
  const std::string grpc_address =
      grpc ? flags.host + ":" + std::to_string(grpc_port) : "off";
  std::fprintf(stderr,
               "[serve] listening on %s://%s:%d (KServe v2 /v2, TEI /embed /predict /rerank, "
               "OpenAI /v1/embeddings, /metrics) and grpc %s (KServe v2%s); API key auth %s\n",
               tls.cert.empty() ? "http" : "https", flags.host.c_str(), flags.port,
               grpc_address.c_str(), tls.cert.empty() ? "" : ", TLS",
               flags.api_key.empty() ? "off" : "on (Bearer; health routes open)");
  std::fflush(stderr);
  http.Run();
  if (grpc) grpc->Wait();
  registry.Shutdown();
  {
    std::lock_guard lock(drained_mu);
    drained = true;
  }
  drained_cv.notify_all();
  // Run also returns when listening fails; wake the waiter then.
  if (!signalled) pthread_kill(waiter.native_handle(), SIGTERM);
  waiter.join();
  std::fprintf(stderr, "[serve] stopped\n");
  return kExitOk;
}

}  // namespace

void RegisterServeCommand(CLI::App& app, int& exit_code) {
  auto f = std::make_shared<ServeFlags>();
  CLI::App* cmd = app.add_subcommand(
      "serve",
      "Serve models over HTTP (KServe v2, text-embeddings-inference and OpenAI-compatible "
      "endpoints, Prometheus /metrics) and gRPC (KServe v2), with dynamic batching.");
  cmd->add_option("MODEL", f->models,
                  std::string(kModelHelp) + "; several MODELs are served side by side, each "
                  "under its own name");
  cmd->add_option("--model", f->named_models,
                  "NAME=PATH: one more model, served as NAME (repeatable)")
      ->allow_extra_args(false);  // one value per --model: a MODEL after it stays a MODEL
  AddImportOptions(cmd, &f->import);
  cmd->add_option("--model-name", f->model_name,
                  "Name to serve the one MODEL as (default: its folder's name; a Hugging Face "
                  "cache snapshot's model name, not its commit hash; a plan's file stem)");
  cmd->add_option("--model-repository", f->repository,
                  "DIR/<model>/<version>/ holding model.plan or HF files, and an optional "
                  "DIR/<model>/config.pbtxt (Triton's format); the highest version is served "
                  "unless its version_policy says otherwise");
  cmd->add_option("--model-control-mode", f->model_control,
                  "none: load the repository at start; poll: also reload what changes on disk; "
                  "explicit: load only --load-model and what POST "
                  "/v2/repository/models/NAME/load asks for")
      ->check(CLI::IsMember({"none", "poll", "explicit"}));
  cmd->add_option("--repository-poll-secs", f->poll_seconds,
                  "Seconds between rescans of the repository in poll mode")
      ->check(CLI::Range(0.05, 86400.0));
  cmd->add_option("--load-model", f->load_models,
                  "In explicit mode, a model to load at start (repeatable)");
  cmd->add_option("--host", f->host,
                  "Address to listen on: this machine only by default; 0.0.0.0 for every "
                  "interface (the container image and the Helm chart pass it)");
  cmd->add_option("--http-port", f->port, "HTTP port")->check(CLI::Range(0, 65535));
  cmd->add_option("--grpc-port", f->grpc_port, "KServe v2 gRPC port (0: no gRPC)")
      ->default_str("the HTTP port + 1")
      ->check(CLI::Range(0, 65535));
  cmd->add_option("--grpc-max-threads", f->grpc.max_threads,
                  "Most gRPC handler threads, i.e. gRPC calls computed at once; more wait for "
                  "one. A call waiting for its client's message holds none")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  cmd->add_option("--grpc-io-threads", f->grpc.io_threads,
                  "Threads that read, frame and write the gRPC connections")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  cmd->add_option("--grpc-max-concurrent-streams", f->grpc.max_concurrent_streams,
                  "Calls one gRPC connection may have open at once "
                  "(SETTINGS_MAX_CONCURRENT_STREAMS; clients queue the rest)")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  cmd->add_option("--grpc-max-streams", f->grpc.max_streams,
                  "Calls open across all gRPC connections; beyond, a new call gets "
                  "RESOURCE_EXHAUSTED")
      ->check(CLI::Range(1, 1 << 24))
      ->capture_default_str();
  cmd->add_option("--grpc-max-connections", f->grpc.max_connections,
                  "gRPC connections open at once; beyond, a new one is closed at accept")
      ->check(CLI::Range(1, 1 << 24))
      ->capture_default_str();
  cmd->add_option("--grpc-stream-idle-timeout", f->grpc_stream_idle_timeout_s,
                  "Seconds an open gRPC call (a ModelStreamInfer stream, or a unary call's "
                  "message) may wait for its client's next message, then it ends with "
                  "DEADLINE_EXCEEDED (health Watch calls are exempt); or for its client to "
                  "read its answer, then the answer is dropped and the call reset")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--grpc-max-resets-per-second", f->grpc.max_resets_per_second,
                  "A gRPC connection whose client cancels calls before their answer (RST_STREAM, "
                  "or frames that make the server reset them) faster than this (beyond a burst "
                  "of as many), or this many more calls than it lets finish within 10 s, gets "
                  "GOAWAY ENHANCE_YOUR_CALM and is closed (HTTP/2 rapid reset)")
      ->check(CLI::Range(1, 1 << 24))
      ->capture_default_str();
  cmd->add_option("--http-thread-count", f->http_threads,
                  "HTTP handler threads kept ready: a request holds one while it is computed "
                  "(idle and slow connections hold none); a request that finds none free "
                  "starts another, up to --http-max-threads")
      ->check(CLI::Range(1, 65536))
      ->capture_default_str();
  cmd->add_option("--http-max-threads", f->http_max_threads,
                  "Most HTTP handler threads, i.e. HTTP requests computed or queued at once; "
                  "more wait for one (default: 8192, or --http-thread-count if more). Threads "
                  "beyond --http-thread-count end after 30 s idle")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--http-io-threads", f->http_io_threads,
                  "Threads that read, parse and write the HTTP connections")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  cmd->add_option("--http-header-timeout", f->http_header_timeout_s,
                  "Seconds from a connection's accept, or its last answer, to the end of the "
                  "next request's header; past it the connection closes (slow or idle clients)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_flag("--http-cancel-on-close", f->http_cancel_on_close,
                "Drop a request whose HTTP client closes its connection (FIN) before the answer, "
                "as one that resets it always is. Off: a close is a half-close to the server, "
                "and HTTP lets such a client still read its answer");
  cmd->add_option("--http-body-timeout", f->http_body_timeout_s,
                  "Seconds from the end of a request's header to the end of its body, and to "
                  "write an answer; past it the connection closes")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  AddEngineOptions(cmd, &f->engine, "CPU threads per instance (0: all cores)");
  AddServingOptions(cmd, &f->serving);
  cmd->add_option("--max-payload-bytes", f->max_payload_bytes,
                  "Largest request body or gRPC message; beyond: 413 / RESOURCE_EXHAUSTED")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--strict-readiness", f->strict_readiness,
                  "true (Triton's default): /v2/health/ready and gRPC ServerReady say ready "
                  "only while a model is served and none failed to load; false: ready once "
                  "listening")
      ->default_str("true");
  cmd->add_option("--default-model", f->default_model,
                  "The model the bare TEI and OpenAI routes (/embed, /v1/embeddings, ...) "
                  "serve; each model is also reachable under /models/NAME/... (default: "
                  "the first by name)");
  cmd->add_option("--drain-timeout", f->drain_seconds,
                  "On SIGTERM/SIGINT, how long in-flight and queued requests (HTTP and gRPC) "
                  "may take to finish; then gRPC calls still running are cancelled and "
                  "requests still queued get 503 / UNAVAILABLE")
      ->check(CLI::NonNegativeNumber);
  cmd->add_flag("--log-requests", f->log_requests,
                "Log one JSON line per HTTP request and gRPC inference on stderr (request id, "
                "method, path or model, status, latency); HTTP responses carry X-Request-Id "
                "either way");
  cmd->add_option("--tls-cert", f->tls.cert_path,
                  "PEM certificate (chain): serve HTTPS and gRPC over TLS (with --tls-key)");
  cmd->add_option("--tls-key", f->tls.key_path, "PEM private key of --tls-cert");
  cmd->add_option("--api-key", f->api_key,
                  "Require 'Authorization: Bearer KEY' on every endpoint but the health "
                  "routes (/v2/health/*, /health, /ping, GET /), /metrics included (gRPC: "
                  "but ServerLive, ServerReady and grpc.health.v1 of the whole server)")
      ->envname("BERTRT_API_KEY");
  cmd->callback([f, &exit_code]() { exit_code = Serve(*f); });
}

}  // namespace bertrt::cli
