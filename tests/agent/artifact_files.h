// Artifact files for the download tests: deterministic bytes, with the
// size and digest a catalog entry would carry.
#pragma once

#include <cstdint>
#include <string>

#include "agent/fetch/sha256_file.h"
#include "tests/agent/temp_dir.h"
#include "weightpath/v1/weightpath.pb.h"

namespace weightpath::agent::testing {

// `size` pseudo-random bytes (a fixed generator seeded by `seed`), so two
// artifacts differ and a truncation or bit flip changes the digest.
inline std::string ArtifactBytes(size_t size, uint32_t seed) {
  std::string bytes(size, '\0');
  uint32_t state = seed * 2654435761u + 1;
  for (char& byte : bytes) {
    state = state * 1664525u + 1013904223u;
    byte = static_cast<char>(state >> 24);
  }
  return bytes;
}

// Writes `bytes` to `path` and describes it as a catalog entry served at `uri`.
inline v1::Artifact WriteArtifact(const std::string& path, const std::string& bytes,
                                  const std::string& uri) {
  WriteTextFile(path, bytes);
  v1::Artifact artifact;
  artifact.set_uri(uri);
  artifact.set_sha256(Sha256OfFile(path).value());
  artifact.set_size_bytes(bytes.size());
  artifact.set_version("test-1");
  return artifact;
}

}  // namespace weightpath::agent::testing
