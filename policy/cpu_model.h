// Which CPU a figure was measured on, as devices name theirs. /proc/cpuinfo
// writes "Intel(R) Xeon(R) Platinum 8480+", "AMD EPYC 9654 96-Core
// Processor" or "Intel(R) Core(TM) i7-8700 CPU @ 3.20GHz"; a policy writes
// "Intel Xeon Platinum 8480C". Names are compared once normalised, and an
// expected figure may list further names or patterns of the same part
// (`cpu_model_aliases`, policy/README.md "Expected figures"). Pure.
#pragma once

#include <string>
#include <string_view>

#include "policy/policy_types.h"

namespace weightpath::policy {

// Lower case; "(R)", "(TM)", the words "CPU" and "Processor", an
// "@ <clock>" suffix and a trailing clock ("3.20GHz") dropped; whitespace
// collapsed to single spaces.
std::string NormalizeCpuModel(std::string_view cpu_model);

// True when `glob` (normalised) matches `name` (normalised): each '*'
// stands for any run of characters, everything else for itself.
bool CpuModelGlobMatches(std::string_view glob, std::string_view name);

// Whether `figures` were measured on the CPU a device names
// `normalized_cpu` (NormalizeCpuModel of it): their cpu_model, or one of
// their cpu_model_aliases (a pattern where it holds '*').
bool FiguresMatchCpu(const ExpectedFigures& figures, std::string_view normalized_cpu);

}  // namespace weightpath::policy
