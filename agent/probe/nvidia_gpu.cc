#include "agent/probe/nvidia_gpu.h"

namespace weightpath::probe {

NvidiaQuery QueryNvidiaGpus(const GpuLibraryNames& libraries) {
  NvidiaQuery cuda = QueryWithCuda(libraries.cuda);
  if (!cuda.gpus.empty()) return cuda;
  NvidiaQuery nvml = QueryWithNvml(libraries.nvml);
  nvml.notes.insert(nvml.notes.begin(), cuda.notes.begin(), cuda.notes.end());
  return nvml;
}

}  // namespace weightpath::probe
