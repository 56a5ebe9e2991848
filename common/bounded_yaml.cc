#include "common/bounded_yaml.h"

#include <istream>
#include <streambuf>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/control_characters.h"
#include "yaml-cpp/eventhandler.h"
#include "yaml-cpp/parser.h"

namespace weightpath::yaml {
namespace {

// Lets yaml-cpp read the caller's text in place instead of a copy of it in a
// stringstream (the text may be 16 MiB).
class ViewStreambuf : public std::streambuf {
 public:
  explicit ViewStreambuf(absl::string_view text) {
    char* begin = const_cast<char*>(text.data());
    setg(begin, begin, begin + text.size());
  }
};

// Thrown out of the event handler to stop the parser at the first event past
// a limit; caught in LoadBounded and never seen outside this file.
struct Refusal {
  absl::Status status;
};

// How often (in events) the cancel flag is read: often enough that a 16 MiB
// document stops within a millisecond or so, rarely enough to cost nothing.
constexpr uint64_t kCancelCheckEvents = 4096;

// Adds up the expanded size while the parser runs. Each open collection
// collects the totals of what it holds; when one that carries an anchor
// closes, its totals are kept under the anchor, and an alias adds them again.
// So the cost is one addition per event, however deep aliases of aliases go.
class ExpansionCounter : public YAML::EventHandler {
 public:
  ExpansionCounter(absl::string_view source_name, const Limits& limits)
      : source_name_(source_name), limits_(limits) {}

  const Measure& measure() const { return measure_; }

  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}

  void OnAnchor(const YAML::Mark&, const std::string& name) override { pending_name_ = name; }

  void OnNull(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    Leaf(mark, anchor, Totals{0, 1});
  }

  void OnScalar(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                const std::string& value) override {
    Leaf(mark, anchor, Totals{value.size(), 1});
  }

  void OnAlias(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    Tick();
    auto found = anchors_.find(anchor);
    if (found == anchors_.end()) {
      // The parser refuses aliases of undefined anchors, so this one names a
      // collection still open: the node would contain itself, and anything
      // walking it would never stop.
      Refuse(mark, absl::StrCat("alias ", AliasName(anchor),
                                " refers to a node that contains it; recursive structures are "
                                "not accepted"));
    }
    const Anchor& target = found->second;
    Add(mark, target.totals,
        absl::StrCat(" (alias *", ControlEscaped(target.name), " repeats ", target.totals.bytes,
                     " bytes and ", target.totals.nodes, " nodes each time it is used)"));
  }

  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                       YAML::EmitterStyle::value) override {
    Open(mark, anchor);
  }
  void OnSequenceEnd() override { Close(); }

  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                  YAML::EmitterStyle::value) override {
    Open(mark, anchor);
  }
  void OnMapEnd() override { Close(); }

 private:
  struct Totals {
    uint64_t bytes = 0;
    uint64_t nodes = 0;
  };
  struct Anchor {
    std::string name;
    Totals totals;
  };
  struct OpenCollection {
    YAML::anchor_t anchor;
    std::string anchor_name;
    Totals totals;
  };

  void Tick() {
    if (++events_ % kCancelCheckEvents == 0 && limits_.cancel != nullptr &&
        limits_.cancel->load(std::memory_order_relaxed)) {
      throw Refusal{absl::CancelledError(absl::StrCat(source_name_, ": load abandoned"))};
    }
  }

  void Leaf(const YAML::Mark& mark, YAML::anchor_t anchor, Totals totals) {
    Tick();
    Add(mark, totals, "");
    if (anchor != YAML::NullAnchor) anchors_[anchor] = Anchor{TakePendingName(), totals};
  }

  void Open(const YAML::Mark& mark, YAML::anchor_t anchor) {
    Tick();
    // The collection's own node counts in the document now; in its parent
    // it counts with everything it holds, when it closes.
    Count(mark, Totals{0, 1}, "");
    open_.push_back(OpenCollection{anchor, TakePendingName(), Totals{0, 1}});
    if (open_.size() > measure_.max_depth) measure_.max_depth = open_.size();
    if (open_.size() > limits_.max_depth) {
      Refuse(mark, absl::StrCat("nested more than ", limits_.max_depth,
                                " mappings and lists deep; refused"));
    }
  }

  void Close() {
    OpenCollection closed = std::move(open_.back());
    open_.pop_back();
    if (!open_.empty()) {
      open_.back().totals.bytes += closed.totals.bytes;
      open_.back().totals.nodes += closed.totals.nodes;
    }
    if (closed.anchor != YAML::NullAnchor) {
      anchors_[closed.anchor] = Anchor{std::move(closed.anchor_name), closed.totals};
    }
  }

  // A scalar, null or alias: counted in the document and in the innermost
  // open collection.
  void Add(const YAML::Mark& mark, const Totals& totals, absl::string_view why) {
    Count(mark, totals, why);
    if (!open_.empty()) {
      open_.back().totals.bytes += totals.bytes;
      open_.back().totals.nodes += totals.nodes;
    }
  }

  // Counts `totals` once more in the document, refusing it the moment it is
  // over a limit. Totals never exceed the limits they were checked against,
  // so the sums cannot overflow.
  void Count(const YAML::Mark& mark, const Totals& totals, absl::string_view why) {
    measure_.expanded_bytes += totals.bytes;
    measure_.nodes += totals.nodes;
    if (measure_.expanded_bytes > limits_.max_bytes) {
      Refuse(mark, absl::StrCat("the document comes to more than ", limits_.max_bytes,
                                " bytes of text once aliases are expanded", why,
                                "; aliases count against the size limit like the text they "
                                "repeat"));
    }
    if (measure_.nodes > limits_.max_nodes) {
      Refuse(mark, absl::StrCat("the document has more than ", limits_.max_nodes,
                                " nodes once aliases are expanded", why, "; refused"));
    }
  }

  std::string TakePendingName() { return std::exchange(pending_name_, std::string()); }

  std::string AliasName(YAML::anchor_t anchor) const {
    for (const OpenCollection& open : open_) {
      if (open.anchor == anchor) return absl::StrCat("*", ControlEscaped(open.anchor_name));
    }
    return "(unknown anchor)";
  }

  [[noreturn]] void Refuse(const YAML::Mark& mark, absl::string_view what) const {
    throw Refusal{absl::InvalidArgumentError(absl::StrCat(Place(source_name_, mark), ": ", what))};
  }

  const absl::string_view source_name_;
  const Limits& limits_;
  Measure measure_;
  uint64_t events_ = 0;
  std::string pending_name_;
  std::vector<OpenCollection> open_;
  std::unordered_map<YAML::anchor_t, Anchor> anchors_;
};

// Stops at the first event of a document after the first: a file is one
// document. yaml-cpp's Load reads the first and drops the rest silently, so a
// rollout after a '---' was never applied, and `apply --prune` took it for
// one no file declares.
class SecondDocumentRefusal : public YAML::EventHandler {
 public:
  explicit SecondDocumentRefusal(absl::string_view source_name) : source_name_(source_name) {}
  void OnDocumentStart(const YAML::Mark& mark) override {
    throw Refusal{absl::InvalidArgumentError(absl::StrCat(
        Place(source_name_, mark),
        ": a second YAML document begins here; a file holds one document (remove the '---' "
        "separator and what follows, or put it in a file of its own)"))};
  }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t,
                const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}

 private:
  const absl::string_view source_name_;
};

absl::Status SyntaxError(absl::string_view source_name, const YAML::Exception& error) {
  return absl::InvalidArgumentError(absl::StrCat(Place(source_name, error.mark),
                                                 ": not valid YAML: ", ControlEscaped(error.msg)));
}

}  // namespace

std::string Place(absl::string_view source_name, const YAML::Mark& mark) {
  if (mark.line < 0 || mark.column < 0) return std::string(source_name);
  return absl::StrCat(source_name, ":", mark.line + 1, ":", mark.column + 1);
}

absl::StatusOr<YAML::Node> LoadBounded(absl::string_view text, absl::string_view source_name,
                                       const Limits& limits, Measure* measure) {
  if (text.size() > limits.max_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(source_name, ": ", text.size(),
                                                   " bytes of YAML; at most ", limits.max_bytes,
                                                   " are accepted"));
  }
  ExpansionCounter counter(source_name, limits);
  try {
    ViewStreambuf buffer(text);
    std::istream in(&buffer);
    YAML::Parser parser(in);
    // YAML::Load reads the first document only; so does the count, and a
    // second one is refused.
    parser.HandleNextDocument(counter);
    SecondDocumentRefusal second(source_name);
    parser.HandleNextDocument(second);
  } catch (const Refusal& refusal) {
    return refusal.status;
  } catch (const YAML::Exception& error) {
    return SyntaxError(source_name, error);
  }
  if (measure != nullptr) *measure = counter.measure();
  if (limits.cancel != nullptr && limits.cancel->load(std::memory_order_relaxed)) {
    return absl::CancelledError(absl::StrCat(source_name, ": load abandoned"));
  }
  // Within the limits: the tree costs at most max_nodes nodes.
  try {
    ViewStreambuf buffer(text);
    std::istream in(&buffer);
    return YAML::Load(in);
  } catch (const YAML::Exception& error) {
    return SyntaxError(source_name, error);
  }
}

}  // namespace weightpath::yaml
