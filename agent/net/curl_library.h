// libcurl, loaded with dlopen the first time a download needs it.
//
// Why: libcurl drags in about 27 more shared libraries (GnuTLS, Kerberos,
// LDAP, libssh2, ...). Linked at build time, every boot maps and relocates
// them, although a boot with its artifact cached never downloads. Loading
// on demand keeps that cost on the rare boot that fetches.
#pragma once

#include <curl/curl.h>

#include "absl/status/statusor.h"

namespace weightpath::agent {

// The handful of libcurl entry points the fetcher uses, as typed pointers.
struct CurlApi {
  CURL* (*easy_init)();
  CURLcode (*easy_setopt)(CURL* handle, CURLoption option, ...);
  CURLcode (*easy_perform)(CURL* handle);
  CURLcode (*easy_getinfo)(CURL* handle, CURLINFO info, ...);
  void (*easy_cleanup)(CURL* handle);
  const char* (*easy_strerror)(CURLcode code);
};

// The soname loaded; named in the error when it cannot be.
inline constexpr char kCurlLibraryName[] = "libcurl.so.4";

// Loads libcurl and runs curl_global_init, once per process; later calls
// return the same answer. Callable from several threads: the first call runs
// the set-up while the others wait (a function-local static), so no curl
// call runs beside curl_global_init, which libcurl before 7.84 did not make
// thread-safe. After it, each thread may use its own easy handle
// (CURLOPT_NOSIGNAL set: no SIGALRM for name resolution); the TLS backend
// (OpenSSL 3 in Debian 12's libcurl 7.88) needs no locking callbacks. FAILED_PRECONDITION naming the library (and the
// missing symbol, if that is what failed) when it cannot be loaded.
absl::StatusOr<const CurlApi*> LoadCurl();

// LoadCurl()'s error once some download in this process asked for libcurl
// and it could not be loaded; OK when none asked (a boot from the cache
// never does) or it loaded. Boot tells an install that cannot download at
// all (libcurl4 missing: no retry fixes it) from a server or mirror that is
// away, which the unit must not count alike.
absl::Status CurlLoadFailure();

}  // namespace weightpath::agent
