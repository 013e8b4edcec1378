// Reading the files of a model directory or plan, which may hold anything an
// operator put there: a FIFO in place of a file blocks open() and read()
// forever (`run` hung, `serve` ignored SIGTERM during the load), and a
// directory or device is no model file either.
#pragma once

#include <time.h>

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "bertrt/status.h"

namespace bertrt {

// The regular file at `path`, opened read-only (close-on-exec, and without
// blocking on a FIFO, which is then refused): its descriptor, which the
// caller closes, its size and modification time. NotFound when it is
// missing; InvalidArgument when it is not a regular file.
struct RegularFile {
  int fd;
  size_t size;
  timespec mtime;
};
StatusOr<RegularFile> OpenRegularFile(const std::string& path);

// Closes a descriptor (OpenRegularFile's) when it goes out of scope.
struct FdCloser {
  explicit FdCloser(int descriptor) : fd(descriptor) {}
  FdCloser(const FdCloser&) = delete;
  FdCloser& operator=(const FdCloser&) = delete;
  ~FdCloser();
  int fd;
};

// Reads exactly `n` bytes at `offset` of the open file `fd` (named `path` in
// messages) into `out`: a file that ends before them is Unavailable (being
// replaced), a read error DataLoss.
Status ReadFileRange(int fd, uint64_t offset, size_t n, char* out, const std::string& path);

// The whole of the regular file at `path` (errors as OpenRegularFile's).
StatusOr<std::string> ReadRegularFile(const std::string& path);

// The whole of the regular file at `path`, copied into page-aligned memory
// this process owns (freed when the last copy of `owner` goes), for weights
// and plans. Not mmap: a served model's weights were views of a mapping, and
// an operator overwriting the file in place (`cp new model.safetensors`)
// truncated it under the server, which died of SIGBUS at the next access to
// a page it no longer had (issue 29). Read with pread, so a file cut short
// while it is read is an error, not a signal; one whose size or modification
// time changed meanwhile is refused as Unavailable, to be read again.
struct FileBytes {
  std::string_view bytes;
  std::shared_ptr<const void> owner;
};
StatusOr<FileBytes> ReadRegularFileIntoMemory(const std::string& path);

}  // namespace bertrt
