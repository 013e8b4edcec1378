#include "server/common/tls.h"

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <fstream>
#include <memory>
#include <sstream>

namespace bertrt::server {
namespace {

StatusOr<std::string> ReadFile(const std::string& path, const char* flag) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return InvalidArgument(std::string(flag) + " " + path + ": cannot read");
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

StatusOr<TlsPem> LoadTls(const TlsFiles& files) {
  if (files.cert_path.empty() != files.key_path.empty())
    return InvalidArgument("TLS needs both --tls-cert and --tls-key");
  TlsPem pem;
  ASSIGN_OR_RETURN(pem.cert, ReadFile(files.cert_path, "--tls-cert"));
  ASSIGN_OR_RETURN(pem.key, ReadFile(files.key_path, "--tls-key"));
  auto bio = [](const std::string& s) {
    return std::unique_ptr<BIO, decltype(&BIO_free)>(
        BIO_new_mem_buf(s.data(), static_cast<int>(s.size())), &BIO_free);
  };
  auto cert_bio = bio(pem.cert);
  std::unique_ptr<X509, decltype(&X509_free)> cert(
      PEM_read_bio_X509(cert_bio.get(), nullptr, nullptr, nullptr), &X509_free);
  if (!cert) return InvalidArgument("--tls-cert " + files.cert_path + ": not a PEM certificate");
  auto key_bio = bio(pem.key);
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key(
      PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr), &EVP_PKEY_free);
  if (!key)
    return InvalidArgument("--tls-key " + files.key_path +
                           ": not a PEM private key (or it is encrypted)");
  if (X509_check_private_key(cert.get(), key.get()) != 1)
    return InvalidArgument("--tls-key " + files.key_path + " does not belong to --tls-cert " +
                           files.cert_path);
  return pem;
}

}  // namespace bertrt::server
