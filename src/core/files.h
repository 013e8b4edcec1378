// Reading the files of a model directory or plan, which may hold anything an
// operator put there: a FIFO in place of a file blocks open() and read()
// forever (`run` hung, `serve` ignored SIGTERM during the load), and a
// directory or device is no model file either.
#pragma once

#include <cstddef>
#include <string>

#include "bertrt/status.h"

namespace bertrt {

// The regular file at `path`, opened read-only (close-on-exec, and without
// blocking on a FIFO, which is then refused): its descriptor, which the
// caller closes, and its size. NotFound when it is missing; InvalidArgument
// when it is not a regular file.
struct RegularFile {
  int fd;
  size_t size;
};
StatusOr<RegularFile> OpenRegularFile(const std::string& path);

// The whole of the regular file at `path` (errors as OpenRegularFile's).
StatusOr<std::string> ReadRegularFile(const std::string& path);

}  // namespace bertrt
