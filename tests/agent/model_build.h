// A model directory as vLLM loads one, for the directory-build tests:
// config.json with a quantization_config, tokenizer files, two safetensors
// shards with real headers (8-byte little-endian header length, JSON
// header, tensor bytes) and their index. Deterministic bytes per seed, so
// two builds can share or differ file by file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "agent/fetch/sha256_file.h"
#include "tests/agent/artifact_files.h"
#include "tests/agent/temp_dir.h"
#include "trust/build_manifest.h"
#include "weightpath/v1/weightpath.pb.h"

namespace weightpath::agent::testing {

// A safetensors file of one BF16 tensor of `data_bytes` bytes (even).
inline std::string SafetensorsBytes(const std::string& tensor, size_t data_bytes, uint32_t seed) {
  std::string header = absl::StrCat(R"({"__metadata__":{"format":"pt"},")", tensor,
                                    R"(":{"dtype":"BF16","shape":[)", data_bytes / 2,
                                    R"(],"data_offsets":[0,)", data_bytes, "]}}");
  // The format pads the header with spaces to a multiple of 8.
  header.append((8 - header.size() % 8) % 8, ' ');
  std::string bytes;
  uint64_t length = header.size();
  for (int i = 0; i < 8; ++i) bytes.push_back(static_cast<char>((length >> (8 * i)) & 0xff));
  bytes += header;
  bytes += ArtifactBytes(data_bytes, seed);
  return bytes;
}

struct ModelFileSpec {
  std::string path;
  std::string bytes;
};

// The five files of a small quantized model; `shard_seeds` picks each
// shard's tensor bytes (equal seeds: byte-identical shards).
inline std::vector<ModelFileSpec> ModelDirectoryFiles(size_t shard_bytes, uint32_t first_shard_seed,
                                                      uint32_t second_shard_seed) {
  const std::string index = absl::StrCat(
      R"({"metadata":{"total_size":)", 2 * shard_bytes,
      R"(},"weight_map":{"model.layers.0.weight":"model-00001-of-00002.safetensors",)",
      R"("model.layers.1.weight":"model-00002-of-00002.safetensors"}})", "\n");
  return {
      {"config.json",
       R"({"architectures":["Qwen3ForCausalLM"],"hidden_size":2048,"num_attention_heads":16,)"
       R"("num_key_value_heads":8,"quantization_config":{"quant_method":"gptq","bits":4,)"
       R"("group_size":128}})"
       "\n"},
      {"tokenizer.json", R"({"version":"1.0","model":{"type":"BPE","vocab":{"a":0,"b":1}}})" "\n"},
      {"tokenizer_config.json", R"({"model_max_length":32768,"eos_token":"<|im_end|>"})" "\n"},
      {"model-00001-of-00002.safetensors",
       SafetensorsBytes("model.layers.0.weight", shard_bytes, first_shard_seed)},
      {"model-00002-of-00002.safetensors",
       SafetensorsBytes("model.layers.1.weight", shard_bytes, second_shard_seed)},
      {"model.safetensors.index.json", index},
  };
}

// Writes `files` under `directory` and describes them as a directory build
// whose file i is served at `url_prefix` + its path.
inline v1::Artifact WriteModelBuild(const std::string& directory,
                                    const std::vector<ModelFileSpec>& files,
                                    const std::string& url_prefix, const std::string& version) {
  v1::Artifact artifact;
  for (const ModelFileSpec& spec : files) {
    const std::string path = directory + "/" + spec.path;
    WriteTextFile(path, spec.bytes);
    v1::BuildFile* file = artifact.add_files();
    file->set_path(spec.path);
    file->set_sha256(Sha256OfFile(path).value());
    file->set_size_bytes(spec.bytes.size());
    file->set_uri(url_prefix + spec.path);
  }
  const trust::BuildManifestDigest digest =
      trust::DigestBuildManifest(trust::ToBuildManifestFiles(artifact.files()));
  artifact.set_sha256(digest.sha256);
  artifact.set_size_bytes(digest.size_bytes);
  artifact.set_version(version);
  return artifact;
}

// The catalog YAML entry (6-space indented keys under a path name) for `artifact`.
inline std::string CatalogEntryYaml(const v1::Artifact& artifact) {
  std::string yaml = absl::StrCat("      version: \"", artifact.version(), "\"\n");
  if (artifact.files_size() == 0) {
    absl::StrAppend(&yaml, "      uri: \"", artifact.uri(), "\"\n      sha256: ", artifact.sha256(),
                    "\n      size_bytes: ", artifact.size_bytes(), "\n");
    return yaml;
  }
  absl::StrAppend(&yaml, "      files:\n");
  for (const v1::BuildFile& file : artifact.files()) {
    absl::StrAppend(&yaml, "        - path: \"", file.path(), "\"\n          sha256: ", file.sha256(),
                    "\n          size_bytes: ", file.size_bytes(), "\n          uri: \"", file.uri(),
                    "\"\n");
  }
  return yaml;
}

}  // namespace weightpath::agent::testing
