// Column-aligned text tables for the operator subcommands: a header row in
// capitals, then one row per item, each column as wide as its widest cell.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace weightpath::ctl {

class TableWriter {
 public:
  explicit TableWriter(std::vector<std::string> header) : rows_{std::move(header)} {}
  // A row with fewer cells than the header is padded with empty cells.
  // Cells are written through ControlEscaped (common/control_characters.h).
  void AddRow(std::vector<std::string> cells);
  void Write(std::ostream& out) const;

 private:
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace weightpath::ctl
