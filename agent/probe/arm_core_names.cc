#include "agent/probe/arm_core_names.h"

#include "absl/strings/str_format.h"

namespace weightpath::probe {
namespace {

struct ArmCore {
  uint32_t implementer;
  uint32_t part;
  absl::string_view name;
};

constexpr uint32_t kArm = 0x41;
constexpr uint32_t kNvidia = 0x4e;
constexpr uint32_t kQualcomm = 0x51;
constexpr uint32_t kApple = 0x61;
constexpr uint32_t kAmpere = 0xc0;
constexpr uint32_t kFujitsu = 0x46;
constexpr uint32_t kHiSilicon = 0x48;

constexpr ArmCore kArmCores[] = {
    {kArm, 0xd03, "Cortex-A53"},      {kArm, 0xd04, "Cortex-A35"},
    {kArm, 0xd05, "Cortex-A55"},      {kArm, 0xd07, "Cortex-A57"},
    {kArm, 0xd08, "Cortex-A72"},      {kArm, 0xd09, "Cortex-A73"},
    {kArm, 0xd0a, "Cortex-A75"},      {kArm, 0xd0b, "Cortex-A76"},
    {kArm, 0xd0c, "Neoverse-N1"},     {kArm, 0xd0d, "Cortex-A77"},
    {kArm, 0xd0e, "Cortex-A76AE"},    {kArm, 0xd40, "Neoverse-V1"},
    {kArm, 0xd41, "Cortex-A78"},      {kArm, 0xd42, "Cortex-A78AE"},
    {kArm, 0xd44, "Cortex-X1"},       {kArm, 0xd46, "Cortex-A510"},
    {kArm, 0xd47, "Cortex-A710"},     {kArm, 0xd48, "Cortex-X2"},
    {kArm, 0xd49, "Neoverse-N2"},     {kArm, 0xd4a, "Neoverse-E1"},
    {kArm, 0xd4b, "Cortex-A78C"},     {kArm, 0xd4d, "Cortex-A715"},
    {kArm, 0xd4e, "Cortex-X3"},       {kArm, 0xd4f, "Neoverse-V2"},
    {kArm, 0xd80, "Cortex-A520"},     {kArm, 0xd81, "Cortex-A720"},
    {kArm, 0xd82, "Cortex-X4"},       {kArm, 0xd84, "Neoverse-V3"},
    {kArm, 0xd85, "Cortex-X925"},     {kArm, 0xd87, "Cortex-A725"},
    {kArm, 0xd8e, "Neoverse-N3"},     {kNvidia, 0x003, "NVIDIA Denver 2"},
    {kNvidia, 0x004, "NVIDIA Carmel"}, {kQualcomm, 0x800, "Kryo-2XX-Gold"},
    {kQualcomm, 0x801, "Kryo-2XX-Silver"}, {kQualcomm, 0x802, "Kryo-3XX-Gold"},
    {kQualcomm, 0x803, "Kryo-3XX-Silver"}, {kQualcomm, 0x804, "Kryo-4XX-Gold"},
    {kQualcomm, 0x805, "Kryo-4XX-Silver"}, {kApple, 0x022, "Apple Icestorm"},
    {kApple, 0x023, "Apple Firestorm"}, {kAmpere, 0xac3, "Ampere-1"},
    {kAmpere, 0xac4, "Ampere-1a"},    {kFujitsu, 0x001, "A64FX"},
    {kHiSilicon, 0xd01, "TaiShan-v110"},
};

}  // namespace

std::optional<absl::string_view> ArmCoreName(uint32_t implementer, uint32_t part) {
  for (const ArmCore& core : kArmCores) {
    if (core.implementer == implementer && core.part == part) return core.name;
  }
  return std::nullopt;
}

std::string ArmCoreNameOrIds(uint32_t implementer, uint32_t part) {
  if (auto name = ArmCoreName(implementer, part)) return std::string(*name);
  return absl::StrFormat("ARM implementer 0x%02x part 0x%03x", implementer, part);
}

}  // namespace weightpath::probe
