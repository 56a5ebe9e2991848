// A Qualcomm phone SoC's Hexagon DSP/NPU, reached through FastRPC. Mainline
// kernels expose /dev/fastrpc-cdsp (and -secure variants); Android's
// downstream kernels expose /dev/adsprpc-smd. The SoC itself is named under
// /sys/devices/soc0 (family "Snapdragon", machine "SM8550", soc_id).
#pragma once

#include <optional>

#include "agent/probe/filesystem.h"
#include "weightpath/v1/weightpath.pb.h"

namespace weightpath::probe {

// nullopt when no FastRPC node exists. With a node but no Qualcomm SoC
// under /sys/devices/soc0 the entry is returned unusable, with the reason:
// a DSP node alone does not say which NPU build the device can run.
std::optional<v1::AcceleratorInfo> DetectQualcommNpu(const Filesystem& filesystem);

}  // namespace weightpath::probe
