// Normalises raw CPU flags (x86 "flags", ARM "Features") into the short list
// the weight-path rules and the engines look at.
//
// Kept from x86: avx2 avx512f avx512_bf16 avx512_vnni amx_bf16 amx_tile
// amx_int8 fma f16c; avx512f also adds the alias "avx512".
// Kept from ARM: asimd asimdhp asimddp i8mm bf16 sve sve2 sme; asimd also adds
// "neon", asimdhp adds "fp16_arith", asimddp adds "dotprod".
//
// The raw kernel name is kept beside its alias on purpose: rules and the
// seed's profiles written against either vocabulary keep matching, and the
// profile still shows exactly what the kernel printed. Every other flag is
// dropped so profiles stay small and comparable across kernels.
#pragma once

#include <string>
#include <vector>

namespace weightpath::probe {

// `arm` says which vocabulary `raw_flags` is in: x86's "sme" (Secure Memory
// Encryption) must not turn into ARM's SME matrix extension.
std::vector<std::string> NormaliseCpuFlags(const std::vector<std::string>& raw_flags, bool arm);

// Precision support a CPU build can use, from normalised flags: bf16 from
// x86 avx512_bf16 or amx_bf16, or ARM bf16; fp16 from x86 f16c (conversion)
// or ARM fp16_arith (native half-precision arithmetic).
bool CpuFlagsSupportBf16(const std::vector<std::string>& normalised_flags);
bool CpuFlagsSupportFp16(const std::vector<std::string>& normalised_flags);

// Removes amx_tile, amx_bf16 and amx_int8; true when any was present.
bool DropAmxFlags(std::vector<std::string>* normalised_flags);

}  // namespace weightpath::probe
