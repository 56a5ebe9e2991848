// Counts heap allocations made by this process between Start and Stop, to
// hold code to an "allocation-free" promise. Linking allocation_counter.cc
// replaces the global operator new for the whole test binary.
#pragma once

namespace weightpath::testing {

void StartCountingAllocations();
// Allocations since StartCountingAllocations().
long StopCountingAllocations();

}  // namespace weightpath::testing
