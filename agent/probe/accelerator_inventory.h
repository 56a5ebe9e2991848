// Everything that could accelerate inference besides NVIDIA's CUDA GPUs
// (which nvidia_gpu.h finds through the driver) and Qualcomm phone NPUs
// (qualcomm_npu.h): GPU render nodes, compute-accelerator nodes, and known
// NPUs on the PCI bus whether or not a driver is bound. An NPU without its
// driver is reported, unusable, with the reason, so an operator can tell
// "no NPU" from "NPU, driver missing".
#pragma once

#include <string>
#include <vector>

#include "agent/probe/filesystem.h"
#include "weightpath/v1/weightpath.pb.h"

namespace weightpath::probe {

struct InventoryOptions {
  // NVIDIA GPUs the driver libraries already described: their render nodes
  // are then not listed twice. When none were, an NVIDIA render node is
  // listed as unusable (the driver libraries did not answer).
  bool nvidia_gpus_described = false;
};

// /dev/dri/renderD*, /dev/accel/accel* and the PCI sweep, in that order.
std::vector<v1::AcceleratorInfo> InventoryAccelerators(const Filesystem& filesystem,
                                                       const InventoryOptions& options);

}  // namespace weightpath::probe
