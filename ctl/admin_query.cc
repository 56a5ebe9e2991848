#include "ctl/admin_query.h"

namespace weightpath::ctl {

std::vector<FlagSpec> AdminQueryFlags(std::vector<FlagSpec> own) {
  own.push_back({"output", 'o', true, "table (default) or json"});
  own.push_back({"help", 'h', false, "show this help"});
  for (FlagSpec& spec : ConnectionFlags()) own.push_back(std::move(spec));
  return own;
}

}  // namespace weightpath::ctl
