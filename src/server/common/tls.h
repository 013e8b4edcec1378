// TLS for both front ends: one certificate chain and private key (PEM files),
// read and checked once at start so that a wrong path or a key that does not
// match the certificate is a clear error, not a server that refuses every
// handshake.
#pragma once

#include <string>

#include "bertrt/status.h"

namespace bertrt::server {

struct TlsFiles {
  std::string cert_path;  // PEM certificate chain; empty: no TLS
  std::string key_path;   // PEM private key
  bool enabled() const { return !cert_path.empty(); }
};

struct TlsPem {
  std::string cert, key;
};

// Reads both files; InvalidArgument naming the flag when one is missing,
// unreadable, not PEM, or the key does not belong to the certificate.
StatusOr<TlsPem> LoadTls(const TlsFiles& files);

}  // namespace bertrt::server
