#include "deploy/label_selector.h"

#include <ostream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/deploy/deploy_fixtures.h"
#include "tests/testing/status_matchers.h"

namespace weightpath::deploy {
namespace {

using ::testing::HasSubstr;
using ::weightpath::deploy::testing::MakeLabels;
using ::weightpath::testing::IsOk;
using ::weightpath::testing::StatusIs;

using HC = policy::HardwareClass;

struct MatchCase {
  std::string selector;
  Labels labels;
  bool expected;
};

void PrintTo(const MatchCase& test_case, std::ostream* out) { *out << "'" << test_case.selector << "'"; }

class DeployLabelSelectorMatchTest : public ::testing::TestWithParam<MatchCase> {};

TEST_P(DeployLabelSelectorMatchTest, MatchesLikeKubernetes) {
  const MatchCase& test_case = GetParam();
  absl::StatusOr<v1::DeviceSelector> selector = ParseLabelSelector(test_case.selector);
  ASSERT_THAT(selector, IsOk());
  EXPECT_EQ(Matches(*selector, test_case.labels, HC::kX86Cpu), test_case.expected)
      << "selector '" << test_case.selector << "'";
}

INSTANTIATE_TEST_SUITE_P(
    Table, DeployLabelSelectorMatchTest,
    ::testing::Values(
        MatchCase{"", MakeLabels({}), true},
        MatchCase{"workload=agentic", MakeLabels({{"workload", "agentic"}}), true},
        MatchCase{"workload=agentic", MakeLabels({{"workload", "chat"}}), false},
        MatchCase{"workload=agentic", MakeLabels({}), false},
        MatchCase{"workload==agentic", MakeLabels({{"workload", "agentic"}}), true},
        MatchCase{"workload!=agentic", MakeLabels({{"workload", "chat"}}), true},
        MatchCase{"workload!=agentic", MakeLabels({}), true},
        MatchCase{"workload!=agentic", MakeLabels({{"workload", "agentic"}}), false},
        MatchCase{"site in (lab, field)", MakeLabels({{"site", "field"}}), true},
        MatchCase{"site in (lab,field)", MakeLabels({{"site", "depot"}}), false},
        MatchCase{"site in (lab,field)", MakeLabels({}), false},
        MatchCase{"site notin (lab,field)", MakeLabels({{"site", "depot"}}), true},
        MatchCase{"site notin (lab,field)", MakeLabels({}), true},
        MatchCase{"site notin (lab,field)", MakeLabels({{"site", "lab"}}), false},
        MatchCase{"canary", MakeLabels({{"canary", ""}}), true},
        MatchCase{"canary", MakeLabels({}), false},
        MatchCase{"!canary", MakeLabels({}), true},
        MatchCase{"!canary", MakeLabels({{"canary", "yes"}}), false},
        MatchCase{"example.com/tier=gold, !canary , site in (lab)",
                  MakeLabels({{"example.com/tier", "gold"}, {"site", "lab"}}), true},
        MatchCase{"example.com/tier=gold,!canary,site in (lab)",
                  MakeLabels({{"example.com/tier", "gold"}, {"site", "lab"}, {"canary", "1"}}),
                  false},
        // Two different required values for one key can never both hold.
        MatchCase{"tier=gold,tier=silver", MakeLabels({{"tier", "gold"}}), false},
        MatchCase{"empty=", MakeLabels({{"empty", ""}}), true}));

TEST(DeployLabelSelectorTest, ParsesEachTermIntoTheSelectorFields) {
  absl::StatusOr<v1::DeviceSelector> selector =
      ParseLabelSelector("workload=agentic,site in (lab,field),tier!=bronze,canary,!legacy");
  ASSERT_THAT(selector, IsOk());
  EXPECT_EQ(selector->match_labels().at("workload"), "agentic");
  ASSERT_EQ(selector->match_expressions_size(), 4);
  EXPECT_EQ(selector->match_expressions(0).operator_(), v1::LabelRequirement::OPERATOR_IN);
  EXPECT_THAT(selector->match_expressions(0).values(), ::testing::ElementsAre("lab", "field"));
  EXPECT_EQ(selector->match_expressions(1).operator_(), v1::LabelRequirement::OPERATOR_NOT_IN);
  EXPECT_THAT(selector->match_expressions(1).values(), ::testing::ElementsAre("bronze"));
  EXPECT_EQ(selector->match_expressions(2).operator_(), v1::LabelRequirement::OPERATOR_EXISTS);
  EXPECT_EQ(selector->match_expressions(3).operator_(),
            v1::LabelRequirement::OPERATOR_DOES_NOT_EXIST);
  EXPECT_EQ(selector->match_expressions(3).key(), "legacy");
}

TEST(DeployLabelSelectorTest, FormatThenParseGivesTheSameSelector) {
  absl::StatusOr<v1::DeviceSelector> selector =
      ParseLabelSelector("workload=agentic, site notin (a,b), tier!=bronze, canary, !legacy");
  ASSERT_THAT(selector, IsOk());
  std::string text = FormatLabelSelector(*selector);
  EXPECT_EQ(text, "workload=agentic,site notin (a,b),tier!=bronze,canary,!legacy");
  absl::StatusOr<v1::DeviceSelector> again = ParseLabelSelector(text);
  ASSERT_THAT(again, IsOk());
  EXPECT_EQ(again->SerializeAsString(), selector->SerializeAsString());
}

struct ErrorCase {
  std::string selector;
  std::string message_part;
};

void PrintTo(const ErrorCase& test_case, std::ostream* out) { *out << "'" << test_case.selector << "'"; }

class DeployLabelSelectorErrorTest : public ::testing::TestWithParam<ErrorCase> {};

TEST_P(DeployLabelSelectorErrorTest, NamesTheTermAndPosition) {
  EXPECT_THAT(ParseLabelSelector(GetParam().selector),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(GetParam().message_part)))
      << "selector '" << GetParam().selector << "'";
}

INSTANTIATE_TEST_SUITE_P(
    Table, DeployLabelSelectorErrorTest,
    ::testing::Values(
        ErrorCase{"workload=agentic,", "term 1 'workload=agentic' at character 18: empty term"},
        ErrorCase{",a=b", "term 1 '' at character 1: empty term"},
        ErrorCase{"a=b,,c", "term 2 '' at character 5: empty term"},
        ErrorCase{"a=b, c in (x", "term 2 'c in (x' at character 13: value set is not closed"},
        ErrorCase{"c in ()", "term 1 'c in ()' at character 7: empty value set"},
        ErrorCase{"c in x", "term 1 'c in x' at character 6: expected '(' to open"},
        ErrorCase{"a b", "term 1 'a b' at character 3: expected '=', '==', '!=', 'in' or 'notin'"},
        ErrorCase{"-bad=x", "term 1 '-bad=x' at character 1: key: label key '-bad'"},
        ErrorCase{"ok=-bad", "term 1 'ok=-bad' at character 4: value: label value '-bad'"},
        ErrorCase{"Example.COM/x=y", "label key prefix 'Example.COM'"},
        ErrorCase{"a=b c", "term 1 'a=b c' at character 5: expected ',' between terms"},
        ErrorCase{"!", "term 1 '!' at character 2: expected a label key"},
        ErrorCase{std::string("k=") + std::string(64, 'v'), "must be empty or 1..63"}));

TEST(DeployLabelSelectorTest, HardwareClassesNarrowTheMatch) {
  v1::DeviceSelector selector;
  selector.add_hardware_classes("x86_cpu");
  selector.add_hardware_classes("arm64_cpu");
  EXPECT_TRUE(Matches(selector, MakeLabels({}), HC::kX86Cpu));
  EXPECT_TRUE(Matches(selector, MakeLabels({}), HC::kArm64Cpu));
  EXPECT_FALSE(Matches(selector, MakeLabels({}), HC::kJetson));
}

TEST(DeployLabelSelectorTest, MatchesLabelsIgnoresHardwareClasses) {
  absl::StatusOr<v1::DeviceSelector> selector = ParseLabelSelector("workload=agentic");
  ASSERT_THAT(selector, IsOk());
  selector->add_hardware_classes("jetson");
  Labels agentic = MakeLabels({{"workload", "agentic"}});
  EXPECT_TRUE(MatchesLabels(*selector, agentic));
  EXPECT_FALSE(Matches(*selector, agentic, HC::kX86Cpu));
  EXPECT_FALSE(MatchesLabels(*selector, MakeLabels({{"workload", "chat"}})));
}

TEST(DeployLabelSelectorTest, UnspecifiedOperatorSelectsNothing) {
  v1::DeviceSelector selector;
  selector.add_match_expressions()->set_key("workload");
  EXPECT_FALSE(Matches(selector, MakeLabels({{"workload", "agentic"}}), HC::kX86Cpu));
}

struct SelectorFault {
  std::string name;
  v1::DeviceSelector selector;
  std::string field;
};

std::vector<SelectorFault> SelectorFaults() {
  std::vector<SelectorFault> faults;
  {
    SelectorFault fault{"BadKey", {}, "sel.match_labels[bad key]"};
    (*fault.selector.mutable_match_labels())["bad key"] = "x";
    faults.push_back(fault);
  }
  {
    SelectorFault fault{"InWithoutValues", {}, "sel.match_expressions[0].values: operator in"};
    auto* requirement = fault.selector.add_match_expressions();
    requirement->set_key("site");
    requirement->set_operator_(v1::LabelRequirement::OPERATOR_IN);
    faults.push_back(fault);
  }
  {
    SelectorFault fault{"ExistsWithValues", {}, "sel.match_expressions[0].values: operator exists"};
    auto* requirement = fault.selector.add_match_expressions();
    requirement->set_key("site");
    requirement->set_operator_(v1::LabelRequirement::OPERATOR_EXISTS);
    requirement->add_values("x");
    faults.push_back(fault);
  }
  {
    SelectorFault fault{"NoOperator", {}, "sel.match_expressions[0].operator"};
    fault.selector.add_match_expressions()->set_key("site");
    faults.push_back(fault);
  }
  {
    SelectorFault fault{"BadValueInList", {}, "sel.match_expressions[0].values[1]"};
    auto* requirement = fault.selector.add_match_expressions();
    requirement->set_key("site");
    requirement->set_operator_(v1::LabelRequirement::OPERATOR_NOT_IN);
    requirement->add_values("lab");
    requirement->add_values("no spaces");
    faults.push_back(fault);
  }
  {
    SelectorFault fault{"UnknownClass", {}, "sel.hardware_classes[0]: unknown hardware class 'tpu'"};
    fault.selector.add_hardware_classes("tpu");
    faults.push_back(fault);
  }
  {
    SelectorFault fault{"AllWithLabels", {}, "sel.all: must not be combined"};
    fault.selector.set_all(true);
    (*fault.selector.mutable_match_labels())["workload"] = "agentic";
    faults.push_back(fault);
  }
  return faults;
}

void PrintTo(const SelectorFault& fault, std::ostream* out) { *out << fault.name; }

class DeployDeviceSelectorValidationTest : public ::testing::TestWithParam<SelectorFault> {};

TEST_P(DeployDeviceSelectorValidationTest, NamesTheField) {
  EXPECT_THAT(ValidateDeviceSelector(GetParam().selector, "sel"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(GetParam().field)));
}

INSTANTIATE_TEST_SUITE_P(Faults, DeployDeviceSelectorValidationTest,
                         ::testing::ValuesIn(SelectorFaults()),
                         [](const auto& info) { return info.param.name; });

TEST(DeployDeviceSelectorValidationTest, AcceptsParsedSelectorsAndBareAll) {
  absl::StatusOr<v1::DeviceSelector> parsed =
      ParseLabelSelector("example.com/tier=gold,site in (lab),!canary");
  ASSERT_THAT(parsed, IsOk());
  EXPECT_THAT(ValidateDeviceSelector(*parsed, "sel"), IsOk());
  v1::DeviceSelector all;
  all.set_all(true);
  EXPECT_THAT(ValidateDeviceSelector(all, "sel"), IsOk());
}

}  // namespace
}  // namespace weightpath::deploy
