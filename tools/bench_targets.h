// The load generator's targets: a bertrt server over HTTP (KServe v2 infer
// with a BYTES "text" input, or TEI /embed), and the same serving stack
// in-process (ServedModel: tokenizer + Scheduler over the engines) with no
// network front end, so the two differ only by HTTP and JSON; and KServe v2
// over gRPC (ModelInfer with a BYTES "text" input in raw_input_contents).
#pragma once

#include <memory>
#include <string>

#include "loadgen/load_driver.h"
#include "serving/model_registry.h"

namespace bertrt::cli {

// Which HTTP route carries the texts (gRPC has KServe's only).
enum class HttpEndpoint { kKServe, kEmbed };

struct ServerTargetOptions {
  loadgen::Url url;  // its scheme picks the transport
  HttpEndpoint endpoint = HttpEndpoint::kKServe;
  std::string model;  // empty: the server's default model (from /info)
  double timeout_s = 60;
  // grpc:// only: where the server's /metrics is (http://HOST:PORT), for the
  // queue/compute split; empty: no split.
  std::string metrics_url;
};

// A server target by the URL's scheme: http(s) -> HttpTarget, grpc -> GrpcTarget.
// Checks the server answers (/info) and one request of `probe_text`
// succeeds, so a wrong URL, model or endpoint is one clear error up front:
// Unavailable when nothing answers, else the server's own message.
StatusOr<std::unique_ptr<loadgen::Target>> ConnectServerTarget(ServerTargetOptions options,
                                                               const std::string& probe_text);

// Loads `path` as `bertrt serve` would (one warm-up run included), as `name`.
StatusOr<std::unique_ptr<loadgen::Target>> LoadInProcessTarget(
    const std::string& name, const std::string& path, const serving::ServeDefaults& defaults,
    const ImportOptions& import = {});

}  // namespace bertrt::cli
