// The HTTP route table (server/http/router.h): literal and parameter
// segments, the trailing slash, 405's Allow, and paths of any length matched
// without recursion (issue 44, D1: a 40,000-byte model name crashed the
// regex matcher).
#include "server/http/router.h"

#include <gtest/gtest.h>

#include <string>

namespace bertrt::server {
namespace {

Router<std::string> Routes() {
  Router<std::string> r;
  r.Add("GET", "/v2/models/stats", "stats");
  r.Add("GET", "/v2/models/{model}", "metadata");
  r.Add("GET", "/v2/models/{model}/versions/{version}/config", "config");
  r.Add("POST", "/v2/models/{model}/infer", "infer");
  r.Add("POST", "/embed", "embed");
  r.Add("GET", "/", "root");
  r.Add("POST", "/models/{model}", "model root");
  r.Add("POST", "/models/{model}/", "model root slash");
  return r;
}

TEST(RouterTest, LiteralsWinInTableOrderAndParametersBindWholeSegments) {
  const auto routes = Routes();
  auto m = routes.Find("GET", "/v2/models/stats");
  ASSERT_TRUE(m.target);
  EXPECT_EQ(*m.target, "stats");
  m = routes.Find("GET", "/v2/models/bert-base");
  ASSERT_TRUE(m.target);
  EXPECT_EQ(*m.target, "metadata");
  EXPECT_EQ(m.params["model"], "bert-base");
  EXPECT_EQ(m.params["version"], "");  // absent: the latest version
  m = routes.Find("GET", "/v2/models/x/versions/3/config");
  ASSERT_TRUE(m.target);
  EXPECT_EQ(m.params["model"], "x");
  EXPECT_EQ(m.params["version"], "3");
  EXPECT_FALSE(routes.Find("GET", "/v2/models/x/versions//config").target);  // empty parameter
  EXPECT_FALSE(routes.Find("GET", "/v2/models/x/extra").target);
  EXPECT_FALSE(routes.Find("GET", "/v2/models").target);
}

TEST(RouterTest, RootAndTrailingSlashAreTheirOwnPatterns) {
  const auto routes = Routes();
  ASSERT_TRUE(routes.Find("GET", "/").target);
  EXPECT_EQ(*routes.Find("HEAD", "/").target, "root");  // HEAD is GET without the body
  EXPECT_EQ(*routes.Find("POST", "/models/m").target, "model root");
  EXPECT_EQ(*routes.Find("POST", "/models/m/").target, "model root slash");
  EXPECT_FALSE(routes.Find("GET", "").target);
}

TEST(RouterTest, AWrongMethodListsTheAllowedOnes) {
  const auto routes = Routes();
  auto m = routes.Find("GET", "/embed");
  EXPECT_FALSE(m.target);
  EXPECT_EQ(m.allow, "POST");
  m = routes.Find("DELETE", "/v2/models/x");
  EXPECT_FALSE(m.target);
  EXPECT_EQ(m.allow, "GET, HEAD");
  m = routes.Find("GET", "/nothing/here");
  EXPECT_FALSE(m.target);
  EXPECT_EQ(m.allow, "");  // a 404
}

TEST(RouterTest, HugePathsAreMatchedWithoutRecursion) {
  const auto routes = Routes();
  const std::string name(1 << 20, 'a');
  auto m = routes.Find("POST", "/v2/models/" + name + "/infer");
  ASSERT_TRUE(m.target);
  EXPECT_EQ(m.params["model"].size(), name.size());
  std::string slashes;
  for (int i = 0; i < 100000; ++i) slashes += "/a";
  EXPECT_FALSE(routes.Find("GET", slashes).target);
}

}  // namespace
}  // namespace bertrt::server
