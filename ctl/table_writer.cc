#include "ctl/table_writer.h"

#include <algorithm>

#include "common/control_characters.h"

namespace weightpath::ctl {

void TableWriter::AddRow(std::vector<std::string> cells) {
  // Cells carry what devices and other operators sent (a target, an agent
  // version, an outcome's detail): escaped here, for every table, so none can
  // break a row, drive the terminal (C0/C1 controls) or reorder what is shown
  // (bidi overrides).
  for (std::string& cell : cells) {
    if (HasControlCharacters(cell)) cell = ControlEscaped(cell);
  }
  cells.resize(std::max(cells.size(), rows_.front().size()));
  rows_.push_back(std::move(cells));
}

void TableWriter::Write(std::ostream& out) const {
  std::vector<size_t> widths;
  for (const std::vector<std::string>& row : rows_) {
    if (widths.size() < row.size()) widths.resize(row.size(), 0);
    for (size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], row[i].size());
  }
  for (const std::vector<std::string>& row : rows_) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      // Two spaces between columns; none after the last, so lines end clean.
      if (i + 1 < row.size()) line += std::string(widths[i] - row[i].size() + 2, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out << line << "\n";
  }
}

}  // namespace weightpath::ctl
