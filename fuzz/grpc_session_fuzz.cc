// libFuzzer target for the gRPC port's HTTP/2 session (server/grpc/
// grpc_session.h): whatever a client sends after the connection preface,
// with every handler answering at once and every timer run out. Nothing may
// crash, hang or trip the sanitizers, and the server-wide count of open calls
// must return to zero when the connection goes.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "server/grpc/grpc_session.h"

namespace {

using bertrt::server::GrpcMethod;
using bertrt::server::GrpcReply;

const GrpcMethod* Method(std::string_view path) {
  static const auto echo = [](const bertrt::server::GrpcCallInfo&, const std::string& request) {
    return request.size() % 3 ? GrpcReply::Ok(request)
                              : GrpcReply::Error(bertrt::server::GrpcCode::kInternal, "no");
  };
  static const GrpcMethod unary{GrpcMethod::Kind::kUnary, false, {}, echo};
  static const GrpcMethod stream{GrpcMethod::Kind::kBidiStream, false, {}, echo};
  static const GrpcMethod watch{GrpcMethod::Kind::kWatch, true, {}, echo};
  if (path == "/a/U") return &unary;
  if (path == "/a/S") return &stream;
  if (path == "/a/W") return &watch;
  return nullptr;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bertrt::server::GrpcOptions options = [] {
    bertrt::server::GrpcOptions o;
    o.max_message_bytes = 4096;
    o.max_concurrent_streams = 8;
    o.max_streams = 6;
    o.max_resets_per_second = 4;
    return o;
  }();
  std::atomic<int> open_streams{0};
  {
    std::vector<bertrt::server::GrpcWork> work;
    bertrt::server::GrpcSession session(
        options, Method, [&](bertrt::server::GrpcWork w) { work.push_back(std::move(w)); },
        open_streams, "fuzz");
    if (!session.Start().ok()) __builtin_trap();
    // The preface and an empty SETTINGS, so that the input is read as frames.
    static const std::string preface =
        std::string("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n") + std::string("\0\0\0\x04\0\0\0\0\0", 9);
    std::string out;
    if (!session.Receive(reinterpret_cast<const uint8_t*>(preface.data()), preface.size()).ok())
      __builtin_trap();
    // The input in two halves, answering what was dispatched in between.
    for (size_t half = 0; half < 2; ++half) {
      const size_t from = half * size / 2, to = half ? size : size / 2;
      if (!session.Receive(data + from, to - from).ok()) break;
      for (size_t i = 0; i < work.size(); ++i)
        session.Complete(work[i].stream_id, work[i].method->handle(*work[i].info, work[i].request));
      work.clear();
      if (auto wake = session.NextWake()) session.Expire(*wake);
      if (!session.Send(out, 1 << 20).ok()) break;
      if (open_streams < 0 || open_streams > options.max_streams) __builtin_trap();
    }
  }
  if (open_streams != 0) __builtin_trap();
  return 0;
}
