// Reading the organisational units out of a certificate subject as gRPC
// reports it (RFC 2253/4514 form), where an operator identity is matched
// exactly: an escaped character is part of the value and never trimmed.
#include "server/security/operator_auth.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace weightpath::server {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

TEST(OrganizationalUnitsTest, ReadsEveryUnitOfTheSubject) {
  EXPECT_THAT(OrganizationalUnits("CN=ops-laptop,OU=weightpath-operators,OU=lab,O=Example"),
              ElementsAre("weightpath-operators", "lab"));
  EXPECT_THAT(OrganizationalUnits("CN=device-1,O=Example"), IsEmpty());
}

TEST(OrganizationalUnitsTest, AnEscapedTrailingSpaceIsPartOfTheValue) {
  // The attack: a certificate for "weightpath-operators " (trailing space)
  // must not pass for "weightpath-operators".
  EXPECT_THAT(OrganizationalUnits("CN=x,OU=weightpath-operators\\ ,O=Example"),
              ElementsAre("weightpath-operators "));
  EXPECT_THAT(OrganizationalUnits("CN=x,OU=\\ weightpath-operators"),
              ElementsAre(" weightpath-operators"));
}

TEST(OrganizationalUnitsTest, EscapedSeparatorsStayInTheValue) {
  EXPECT_THAT(OrganizationalUnits("OU=ops\\,admins,CN=x"), ElementsAre("ops,admins"));
  EXPECT_THAT(OrganizationalUnits("OU=a\\+b+CN=x"), ElementsAre("a+b"));
}

TEST(OrganizationalUnitsTest, UnescapedSpaceAroundAnAttributeIsNotPartOfIt) {
  EXPECT_THAT(OrganizationalUnits("CN=x, OU=ops , O=y"), ElementsAre("ops"));
  // An escaped "OU" type is not the OU attribute type.
  EXPECT_THAT(OrganizationalUnits("\\OU=ops"), IsEmpty());
}

}  // namespace
}  // namespace weightpath::server
