// weightpathctl: the operator's command line for weightpath.
#include <iostream>
#include <string>
#include <vector>

#include "ctl/command_table.h"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  return weightpath::ctl::Dispatch(args, {std::cout, std::cerr});
}
