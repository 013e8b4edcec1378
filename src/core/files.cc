#include "core/files.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace bertrt {
namespace {

const char* KindOf(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
  return "something else";
}

}  // namespace

StatusOr<RegularFile> OpenRegularFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0)
    return Status(errno == ENOENT ? StatusCode::kNotFound : StatusCode::kInvalidArgument,
                  "cannot open " + path + ": " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return DataLoss("cannot stat " + path + ": " + std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return InvalidArgument(path + " is " + KindOf(st.st_mode) +
                           ", not a regular file; model files must be regular files (copy the "
                           "file itself there)");
  }
  // Reads of a regular file never block; clear the flag all the same.
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return RegularFile{fd, static_cast<size_t>(st.st_size), st.st_mtim};
}

StatusOr<std::string> ReadRegularFile(const std::string& path) {
  ASSIGN_OR_RETURN(const RegularFile file, OpenRegularFile(path));
  const int fd = file.fd;
  std::string out;
  out.reserve(file.size);
  char buf[1 << 16];
  while (true) {
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      return DataLoss("error reading " + path + ": " + std::strerror(err));
    }
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

FdCloser::~FdCloser() {
  if (fd >= 0) ::close(fd);
}

Status ReadFileRange(int fd, uint64_t offset, size_t n, char* out, const std::string& path) {
  size_t done = 0;
  while (done < n) {
    const ssize_t got = ::pread(fd, out + done, n - done, static_cast<off_t>(offset + done));
    if (got < 0 && errno == EINTR) continue;
    if (got == 0)
      return Unavailable(path + " shrank while it was read (" + std::to_string(done) + " of " +
                         std::to_string(n) +
                         " bytes): it is being replaced; load it again once it is whole");
    if (got < 0) return DataLoss("error reading " + path + ": " + std::strerror(errno));
    done += static_cast<size_t>(got);
  }
  return Status::Ok();
}

StatusOr<FileBytes> ReadRegularFileIntoMemory(const std::string& path) {
  ASSIGN_OR_RETURN(const RegularFile file, OpenRegularFile(path));
  const int fd = file.fd;
  const size_t size = file.size;
  // Anonymous pages: zero-filled only as read into, page-aligned as a
  // mapping of the file was (views of the weights keep their alignment).
  void* mem =
      size ? ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
           : nullptr;
  if (mem == MAP_FAILED) {
    const int err = errno;
    ::close(fd);
    return ResourceExhausted("cannot allocate " + std::to_string(size) + " bytes for " + path +
                             ": " + std::strerror(err));
  }
  std::shared_ptr<const void> owner(mem, [size](const void* p) {
    if (p) ::munmap(const_cast<void*>(p), size);
  });
  if (Status st = ReadFileRange(fd, 0, size, static_cast<char*>(mem), path); !st.ok()) {
    ::close(fd);
    return st;
  }
  struct stat after {};
  ::fstat(fd, &after);
  ::close(fd);
  if (static_cast<size_t>(after.st_size) != size || after.st_mtim.tv_sec != file.mtime.tv_sec ||
      after.st_mtim.tv_nsec != file.mtime.tv_nsec)
    return Unavailable(path +
                       " changed while it was read: it is being replaced; load it "
                       "again once it is whole");
  return FileBytes{std::string_view(static_cast<const char*>(mem), size), std::move(owner)};
}

}  // namespace bertrt
