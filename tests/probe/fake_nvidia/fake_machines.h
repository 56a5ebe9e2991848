// The machines the fake NVIDIA libraries pretend to be, chosen by one
// FAKE_MACHINE_* compile definition (tests/probe/CMakeLists.txt). Figures are
// those the real machines report (the H200 from the lent GPU machine; the
// others from the products' specifications as nvidia-smi shows them).
#pragma once

struct FakeMig {
  const char* uuid;
  const char* profile;
  unsigned long long memory;
  unsigned long long free;
  unsigned int sms;
  unsigned int gpu_instance;
  unsigned int compute_instance;
};

struct FakeGpu {
  const char* uuid;
  const char* name;
  unsigned long long memory;
  unsigned long long free;
  int cc_major;
  int cc_minor;
  unsigned int sms;
  unsigned int cores;  // CUDA cores, what NVML reports
  int integrated;
  const char* pci_bus_id;
  int mig_enabled;
  int mig_count;
  FakeMig migs[7];
};

#define FAKE_NO_MIG 0, 0, {}

#if defined(FAKE_MACHINE_H200)
// One H200 (driver 580, CUDA 13.0): 139.8 GiB, capability 9.0, 132 SMs.
static const FakeGpu kGpus[] = {
    {"GPU-8e1a6f2c-3b4d-4c5e-9f60-7a8b9c0d1e2f", "NVIDIA H200", 150109716480ULL,
     149557313536ULL, 9, 0, 132, 16896, 0, "00000000:19:00.0", FAKE_NO_MIG}};
#elif defined(FAKE_MACHINE_DGX_H100)
// A DGX-style server: eight H100 SXM5 80GB. GPUs 6 and 7 share the UUID
// prefix "6", so "GPU-6" is ambiguous.
#define H100(uuid, bus)                                                                     \
  {uuid, "NVIDIA H100 80GB HBM3", 85520809984ULL, 84987084800ULL, 9, 0, 132, 16896, 0, bus, \
   FAKE_NO_MIG}
static const FakeGpu kGpus[] = {
    H100("GPU-0f3c9a10-5c2e-4b7d-8e11-3a5f2b9c7d01", "00000000:18:00.0"),
    H100("GPU-1a2b3c4d-5e6f-4a1b-8c2d-3e4f5a6b7c02", "00000000:2A:00.0"),
    H100("GPU-2b3c4d5e-6f7a-4b2c-9d3e-4f5a6b7c8d03", "00000000:3A:00.0"),
    H100("GPU-3c4d5e6f-7a8b-4c3d-ae4f-5a6b7c8d9e04", "00000000:5D:00.0"),
    H100("GPU-4d5e6f7a-8b9c-4d4e-bf5a-6b7c8d9eaf05", "00000000:9A:00.0"),
    H100("GPU-5e6f7a8b-9cad-4e5f-806b-7c8d9eafb006", "00000000:AB:00.0"),
    H100("GPU-6e7f8a9b-adbe-4f6a-917c-8d9eafb0c107", "00000000:BA:00.0"),
    H100("GPU-6f8a9bac-becf-4a7b-a28d-9eafb0c1d208", "00000000:DB:00.0")};
#elif defined(FAKE_MACHINE_A100_MIG)
// An A100 80GB in MIG mode with two 3g.40gb instances (42 SMs, 40192 MiB).
static const FakeGpu kGpus[] = {
    {"GPU-a1000000-1111-4222-8333-444455556666", "NVIDIA A100-SXM4-80GB", 85899345920ULL,
     85000000000ULL, 8, 0, 108, 6912, 0, "00000000:07:00.0", 1, 2,
     {{"MIG-c0ffee00-1111-5222-9333-444455556666", "3g.40gb", 42144366592ULL, 42000000000ULL,
       42, 1, 0},
      {"MIG-d00d0000-1111-5222-9333-444455556666", "3g.40gb", 42144366592ULL, 30000000000ULL,
       42, 2, 0}}}};
#elif defined(FAKE_MACHINE_RTX4090_BUSY)
// A workstation RTX 4090 with 90% of its memory in use by something else.
static const FakeGpu kGpus[] = {
    {"GPU-40904090-aaaa-4bbb-8ccc-ddddeeeeffff", "NVIDIA GeForce RTX 4090", 25757220864ULL,
     2575722086ULL, 8, 9, 128, 16384, 0, "00000000:01:00.0", FAKE_NO_MIG}};
#elif defined(FAKE_MACHINE_T4)
static const FakeGpu kGpus[] = {{"GPU-7e570000-0000-4000-8000-000000000004", "Tesla T4",
                                 15843721216ULL, 15500000000ULL, 7, 5, 40, 2560, 0,
                                 "00000000:00:1E.0", FAKE_NO_MIG}};
#elif defined(FAKE_MACHINE_GB10)
static const FakeGpu kGpus[] = {{"GPU-9b100000-0000-4000-8000-000000000010", "NVIDIA GB10",
                                 128849018880ULL, 120000000000ULL, 12, 1, 48, 6144, 1,
                                 "0000000F:01:00.0", FAKE_NO_MIG}};
#elif defined(FAKE_MACHINE_ORIN)
// Jetson AGX Orin 64GB: CUDA only (no NVML on Jetson), integrated, 8.7, 16 SMs.
static const FakeGpu kGpus[] = {{"GPU-0b1e0000-0000-4000-8000-000000000087", "Orin",
                                 64339144704ULL, 60000000000ULL, 8, 7, 16, 2048, 1, "",
                                 FAKE_NO_MIG}};
#elif defined(FAKE_MACHINE_NONE)
static const FakeGpu kGpus[] = {{"", "unused", 1, 1, 0, 0, 0, 0, 0, "", FAKE_NO_MIG}};
#else
#error "define one FAKE_MACHINE_*"
#endif

#if defined(FAKE_MACHINE_NONE)
static const int kGpuCount = 0;
#else
static const int kGpuCount = static_cast<int>(sizeof(kGpus) / sizeof(kGpus[0]));
#endif
