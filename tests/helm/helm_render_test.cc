// The chart rendered the way `helm template` renders it (tests/helm/render),
// for the default values and several value sets: every manifest parses and
// hangs together, every guard refuses its combination with its message, and
// the server and weightpathctl work on what the chart renders.
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <tuple>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/helm/chart_render.h"
#include "tests/helm/chart_text.h"
#include "tests/helm/server_flags.h"
#include "tests/server/server_process.h"
#include "tests/server/test_ca.h"
#include "tests/support/subprocess.h"
#include "yaml-cpp/yaml.h"

namespace weightpath::helm_test {
namespace {

using ::testing::AllOf;
using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::StartsWith;

const std::string kChartDir = std::string(WEIGHTPATH_SOURCE_DIR) + "/helm/weightpath";

// "--set a=b" for each assignment.
std::vector<std::string> Sets(const std::vector<std::string>& assignments) {
  std::vector<std::string> args;
  for (const std::string& assignment : assignments) {
    args.push_back("--set");
    args.push_back(assignment);
  }
  return args;
}

std::vector<std::string> Concat(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// A values file for what --set cannot say (lists of maps).
std::string WriteValuesFile(const server::testing::TempDir& dir, const std::string& name,
                            const std::string& yaml) {
  const std::string path = dir.File(name);
  server::testing::WriteFileOrDie(path, yaml);
  return path;
}

// Every node below is read through const references: yaml-cpp's non-const
// operator[] inserts the key it looks up, and assigning a Node rebinds the
// tree it came from.

RenderedChart Render(const std::vector<std::string>& args) {
  absl::StatusOr<RenderedChart> chart = RenderChart(args);
  EXPECT_TRUE(chart.ok()) << chart.status();
  return chart.ok() ? *chart : RenderedChart{};
}

const YAML::Node PodSpec(const YAML::Node& deployment) {
  return deployment["spec"]["template"]["spec"];
}

const YAML::Node ServerContainer(const YAML::Node& deployment) {
  for (const YAML::Node& container : PodSpec(deployment)["containers"]) {
    if (container["name"].as<std::string>("") == "weightpath-server") return container;
  }
  return YAML::Node(YAML::NodeType::Undefined);
}

std::vector<std::string> ContainerArgs(const YAML::Node& deployment) {
  std::vector<std::string> args;
  for (const YAML::Node& arg : ServerContainer(deployment)["args"]) {
    args.push_back(arg.as<std::string>());
  }
  return args;
}

// The value of --name=VALUE among `args`; "" when absent.
std::string FlagValue(const std::vector<std::string>& args, const std::string& name) {
  const std::string prefix = "--" + name + "=";
  for (const std::string& arg : args) {
    if (absl::StartsWith(arg, prefix)) return arg.substr(prefix.size());
  }
  return "";
}

// The entry of a list of maps whose `name` is `name`.
const YAML::Node Named(const YAML::Node& list, const std::string& name) {
  for (const YAML::Node& entry : list) {
    if (entry["name"].as<std::string>("") == name) return entry;
  }
  return YAML::Node(YAML::NodeType::Undefined);
}

// Text of a node for comparing two subtrees; "" for a missing one.
std::string Dumped(const YAML::Node& node) { return node.IsDefined() ? YAML::Dump(node) : ""; }

std::map<std::string, std::string> StringMap(const YAML::Node& node) {
  std::map<std::string, std::string> out;
  for (const auto& entry : node) out[entry.first.as<std::string>()] = entry.second.as<std::string>();
  return out;
}

const std::map<std::string, std::string>& ServerFlags() {
  static const auto* flags = [] {
    absl::StatusOr<std::map<std::string, std::string>> read =
        ServerFlagDefaults(WEIGHTPATH_SERVER_BINARY);
    EXPECT_TRUE(read.ok()) << read.status();
    return new std::map<std::string, std::string>(
        read.ok() ? *read : std::map<std::string, std::string>{});
  }();
  return *flags;
}

struct ValueSet {
  std::string name;
  std::vector<std::string> args;
};

// The installs the README describes, and one with every optional part on.
std::vector<ValueSet> ValueSets(const server::testing::TempDir& dir) {
  const std::string everything = WriteValuesFile(dir, "everything.yaml", R"(
tls:
  secretName: wp-tls
serviceMonitor:
  enabled: true
prometheusRule:
  enabled: true
  labels:
    release: kube-prometheus
networkPolicy:
  enabled: true
  grpcFrom:
    - namespaceSelector:
        matchLabels:
          kubernetes.io/metadata.name: ingress
  metricsFrom:
    - namespaceSelector:
        matchLabels:
          kubernetes.io/metadata.name: monitoring
store:
  sqlite:
    existingClaim: fleet-data
catalog: |
  default_model: m
podAnnotations:
  example.com/team: fleet
)");
  return {
      {"plaintext", Sets({"insecure=true"})},
      {"tls", Sets({"tls.secretName=wp-tls"})},
      {"mutual_tls_operator_certificates",
       Sets({"tls.secretName=wp-tls", "tls.clientCASecretName=device-ca",
             "operators.certificateIdentity=ou=operators"})},
      {"postgres_replicas_operator_token",
       Sets({"insecure=true", "replicaCount=3", "store.type=postgres",
             "store.postgres.secretName=wp-db", "operators.token.secretName=wp-operator"})},
      {"no_store_minimal",
       Sets({"insecure=true", "store.type=none", "podDisruptionBudget.enabled=false",
             "service.headless.enabled=false", "resources=null"})},
      {"everything", {"--values", everything, "--api-versions", "monitoring.coreos.com/v1"}},
  };
}

TEST(HelmChartRendered, DefaultValuesStopAtTheTransportChoice) {
  const RenderedChart chart = Render({});
  EXPECT_FALSE(chart.ok);
  EXPECT_THAT(chart.error, HasSubstr("gRPC would listen on 0.0.0.0 without TLS: set tls.secretName"));
  EXPECT_THAT(chart.error, HasSubstr("or insecure=true"));
}

TEST(HelmChartRendered, EveryValueSetRendersManifestsThatHangTogether) {
  server::testing::TempDir dir;
  ASSERT_FALSE(ServerFlags().empty());
  for (const ValueSet& values : ValueSets(dir)) {
    SCOPED_TRACE(values.name);
    const RenderedChart chart = Render(values.args);
    ASSERT_TRUE(chart.ok) << chart.error;

    std::set<std::pair<std::string, std::string>> seen;
    for (const RenderedManifest& manifest : chart.manifests) {
      SCOPED_TRACE(manifest.source);
      const YAML::Node& document = manifest.document;
      ASSERT_TRUE(document.IsMap()) << manifest.text;
      EXPECT_FALSE(document["apiVersion"].as<std::string>("").empty());
      const std::string kind = document["kind"].as<std::string>("");
      const std::string name = document["metadata"]["name"].as<std::string>("");
      EXPECT_FALSE(kind.empty());
      EXPECT_THAT(name, StartsWith("wp-weightpath"));
      EXPECT_LE(name.size(), 63u);
      EXPECT_TRUE(seen.insert({kind, name}).second) << "two " << kind << " named " << name;
      EXPECT_EQ(document["metadata"]["labels"]["app.kubernetes.io/instance"].as<std::string>(""),
                "wp");
      EXPECT_EQ(document["metadata"]["labels"]["app.kubernetes.io/managed-by"].as<std::string>(""),
                "Helm");
    }

    const YAML::Node deployment = chart.Only("Deployment");
    ASSERT_TRUE(deployment.IsDefined());
    const std::map<std::string, std::string> pod_labels =
        StringMap(deployment["spec"]["template"]["metadata"]["labels"]);
    EXPECT_EQ(StringMap(deployment["spec"]["selector"]["matchLabels"]).size(), 2u);
    for (const auto& [key, value] : StringMap(deployment["spec"]["selector"]["matchLabels"])) {
      EXPECT_EQ(pod_labels.count(key) ? pod_labels.at(key) : "", value) << key;
    }
    // Every selector in the chart picks the Deployment's pods.
    std::vector<std::pair<std::string, YAML::Node>> selectors;
    for (const YAML::Node& service : chart.OfKind("Service")) {
      selectors.push_back({"Service", service["spec"]["selector"]});
    }
    for (const YAML::Node& budget : chart.OfKind("PodDisruptionBudget")) {
      selectors.push_back({"PodDisruptionBudget", budget["spec"]["selector"]["matchLabels"]});
    }
    for (const YAML::Node& policy : chart.OfKind("NetworkPolicy")) {
      selectors.push_back({"NetworkPolicy", policy["spec"]["podSelector"]["matchLabels"]});
    }
    for (const YAML::Node& monitor : chart.OfKind("ServiceMonitor")) {
      selectors.push_back({"ServiceMonitor", monitor["spec"]["selector"]["matchLabels"]});
    }
    for (const auto& [kind, selector] : selectors) {
      ASSERT_TRUE(selector.IsMap()) << kind;
      for (const auto& [key, value] : StringMap(selector)) {
        EXPECT_EQ(pod_labels.count(key) ? pod_labels.at(key) : "", value) << kind << " " << key;
      }
    }

    const YAML::Node container = ServerContainer(deployment);
    ASSERT_TRUE(container.IsDefined());
    // Every flag is one the real server has.
    for (const std::string& arg : ContainerArgs(deployment)) {
      ASSERT_THAT(arg, StartsWith("--"));
      const std::string name = arg.substr(2, arg.find('=') - 2);
      EXPECT_EQ(ServerFlags().count(name), 1u) << arg << " is not a weightpath-server flag";
    }
    // Every mount has its volume, every named probe port is a container port.
    std::set<std::string> volumes;
    for (const YAML::Node& volume : PodSpec(deployment)["volumes"]) {
      volumes.insert(volume["name"].as<std::string>());
    }
    for (const YAML::Node& mount : container["volumeMounts"]) {
      EXPECT_EQ(volumes.count(mount["name"].as<std::string>()), 1u) << mount["name"];
    }
    std::set<std::string> port_names;
    for (const YAML::Node& port : container["ports"]) port_names.insert(port["name"].as<std::string>());
    for (const char* probe : {"startupProbe", "readinessProbe", "livenessProbe"}) {
      for (const char* check : {"tcpSocket", "httpGet"}) {
        const YAML::Node handler = container[probe][check];
        if (!handler.IsDefined()) continue;
        EXPECT_EQ(port_names.count(handler["port"].as<std::string>("")), 1u) << probe;
      }
    }
    for (const YAML::Node& service : chart.OfKind("Service")) {
      for (const YAML::Node& port : service["spec"]["ports"]) {
        EXPECT_EQ(port_names.count(port["targetPort"].as<std::string>()), 1u);
      }
    }
    // The ConfigMap the Deployment mounts exists and holds the policy.
    const YAML::Node config = Named(PodSpec(deployment)["volumes"], "config");
    bool config_found = false;
    for (const YAML::Node& map : chart.OfKind("ConfigMap")) {
      if (map["metadata"]["name"].as<std::string>() == config["configMap"]["name"].as<std::string>("")) {
        config_found = true;
        EXPECT_THAT(map["data"]["policy.yaml"].as<std::string>(""), HasSubstr("rules:"));
      }
    }
    EXPECT_TRUE(config_found);
    EXPECT_THAT(chart.notes, HasSubstr("wp-weightpath.fleet.svc:50051"));
  }
}

struct Refusal {
  std::string why;
  std::vector<std::string> args;
  std::string message;
};

TEST(HelmChartRendered, EveryGuardRefusesWithItsMessage) {
  const std::vector<Refusal> refusals = {
      {"no TLS and not insecure", {}, "gRPC would listen on 0.0.0.0 without TLS"},
      {"mutual TLS without a server certificate",
       Sets({"insecure=true", "tls.clientCASecretName=device-ca"}),
       "tls.clientCASecretName (mutual TLS) needs tls.secretName"},
      {"SQLite with 2 replicas", Sets({"insecure=true", "replicaCount=2"}),
       "replicaCount=2 with store.type=sqlite: an SQLite file cannot be shared between pods"},
      {"SQLite with 5 replicas", Sets({"insecure=true", "replicaCount=5"}),
       "replicaCount=5 with store.type=sqlite"},
      {"postgres without a Secret", Sets({"insecure=true", "store.type=postgres"}),
       "store.type=postgres needs store.postgres.secretName"},
      {"a bearer token under mutual TLS",
       Sets({"tls.secretName=t", "tls.clientCASecretName=c", "operators.token.secretName=op"}),
       "under mutual TLS the server accepts operator certificates only"},
      {"an operator certificate without mutual TLS",
       Sets({"tls.secretName=t", "operators.certificateIdentity=ou=ops"}),
       "operators.certificateIdentity needs mutual TLS (tls.clientCASecretName)"},
      {"a ServiceMonitor without the Prometheus Operator",
       Sets({"insecure=true", "serviceMonitor.enabled=true"}),
       "serviceMonitor.enabled needs the Prometheus Operator's monitoring.coreos.com/v1 API"},
      {"a PrometheusRule without the Prometheus Operator",
       Sets({"insecure=true", "prometheusRule.enabled=true"}),
       "prometheusRule.enabled needs the Prometheus Operator's monitoring.coreos.com/v1 API"},
      {"a cluster without native gRPC probes",
       Concat(Sets({"insecure=true"}), {"--kube-version", "v1.23.17"}),
       "chart requires kubeVersion: >=1.24.0-0 which is incompatible with Kubernetes v1.23.17"},
      // values.schema.json
      {"a misspelt key", Sets({"insecure=true", "tls.secretname=t"}),
       "- tls: Additional property secretname is not allowed"},
      {"an unknown top-level key", Sets({"insecure=true", "replicas=2"}),
       "Additional property replicas is not allowed"},
      {"a replica count that is no number", Sets({"insecure=true", "replicaCount=two"}),
       "- replicaCount: Invalid type. Expected: integer, given: string"},
      {"an unknown store", Sets({"insecure=true", "store.type=mysql"}),
       "- store.type: store.type must be one of the following: \"sqlite\", \"postgres\", \"none\""},
      {"an unknown log level", Sets({"insecure=true", "logLevel=verbose"}),
       "- logLevel: logLevel must be one of the following"},
      {"a reload interval without unit", Sets({"insecure=true", "reloadInterval=2"}),
       "- reloadInterval: Invalid type. Expected: string, given: integer"},
      {"an operator identity of neither form",
       Sets({"tls.secretName=t", "tls.clientCASecretName=c", "operators.certificateIdentity=cn=ops"}),
       "- operators.certificateIdentity: Does not match pattern"},
      {"no termination margin", Sets({"insecure=true", "terminationGraceMarginSeconds=0"}),
       "- terminationGraceMarginSeconds: Must be greater than or equal to 1"},
      {"a port out of range", Sets({"insecure=true", "ports.grpc=70000"}),
       "- ports.grpc: Must be less than or equal to 65535"},
  };
  for (const Refusal& refusal : refusals) {
    SCOPED_TRACE(refusal.why);
    const RenderedChart chart = Render(refusal.args);
    EXPECT_FALSE(chart.ok);
    EXPECT_THAT(chart.error, HasSubstr(refusal.message));
    EXPECT_THAT(chart.manifests, IsEmpty());
  }
}

TEST(HelmChartRendered, PodCarriesNoApiTokenAndStartsBehindAStartupProbe) {
  const YAML::Node values = YAML::LoadFile(kChartDir + "/values.yaml");
  const int start_budget = values["startupProbe"]["periodSeconds"].as<int>() *
                           values["startupProbe"]["failureThreshold"].as<int>();
  // The server may need a while on PostgreSQL (schema migrations) before it
  // binds; a minute at least before the kubelet gives up.
  EXPECT_GE(start_budget, 60);
  for (const auto& [transport, args] :
       std::vector<std::pair<std::string, std::vector<std::string>>>{
           {"plaintext", Sets({"insecure=true"})}, {"tls", Sets({"tls.secretName=wp-tls"})}}) {
    SCOPED_TRACE(transport);
    const RenderedChart chart = Render(args);
    ASSERT_TRUE(chart.ok) << chart.error;
    const YAML::Node deployment = chart.Only("Deployment");
    EXPECT_FALSE(PodSpec(deployment)["automountServiceAccountToken"].as<bool>(true));
    const YAML::Node container = ServerContainer(deployment);
    const YAML::Node startup = container["startupProbe"];
    ASSERT_TRUE(startup.IsMap()) << "no startupProbe";
    EXPECT_EQ(startup["periodSeconds"].as<int>(0) * startup["failureThreshold"].as<int>(0),
              start_budget);
    // The startup probe asks what readiness asks; liveness waits for it
    // instead of guessing an initial delay.
    EXPECT_EQ(Dumped(startup["grpc"]), Dumped(container["readinessProbe"]["grpc"]));
    EXPECT_EQ(Dumped(startup["tcpSocket"]), Dumped(container["readinessProbe"]["tcpSocket"]));
    EXPECT_FALSE(container["livenessProbe"]["initialDelaySeconds"].IsDefined());
    EXPECT_TRUE(container["securityContext"]["readOnlyRootFilesystem"].as<bool>(false));
  }
}

// "128Mi" -> 128; -1 for anything else.
double Mebibytes(const std::string& quantity) {
  double value = 0;
  absl::string_view number = quantity;
  if (absl::ConsumeSuffix(&number, "Gi") && absl::SimpleAtod(number, &value)) return value * 1024;
  number = quantity;
  if (absl::ConsumeSuffix(&number, "Mi") && absl::SimpleAtod(number, &value)) return value;
  return -1;
}

TEST(HelmChartRendered, DefaultResourcesCoverTheMeasuredResidentMemory) {
  const RenderedChart chart = Render(Sets({"insecure=true"}));
  ASSERT_TRUE(chart.ok) << chart.error;
  const YAML::Node resources = ServerContainer(chart.Only("Deployment"))["resources"];
  ASSERT_TRUE(resources.IsMap());
  // bench/RESULTS-fleet.md: 103-121 MiB with a million devices on SQLite,
  // the largest of the server's measured footprints.
  const double request = Mebibytes(resources["requests"]["memory"].as<std::string>(""));
  const double limit = Mebibytes(resources["limits"]["memory"].as<std::string>(""));
  EXPECT_GE(request, 121);
  EXPECT_GE(limit, 2 * request);
  EXPECT_TRUE(resources["requests"]["cpu"].IsDefined());
  EXPECT_FALSE(resources["limits"]["cpu"].IsDefined()) << "a CPU limit throttles calls in flight";
  const std::string values = server::testing::ReadFileOrDie(kChartDir + "/values.yaml");
  EXPECT_THAT(values, AllOf(HasSubstr("RESULTS-fleet.md"), HasSubstr("RESULTS-server.md")))
      << "values.yaml should say where the figures come from";
}

TEST(HelmChartRendered, HeadlessServiceResolvesToEveryReadyPodForRoundRobin) {
  const RenderedChart chart = Render(Sets({"insecure=true"}));
  ASSERT_TRUE(chart.ok) << chart.error;
  const std::vector<YAML::Node> services = chart.OfKind("Service");
  ASSERT_EQ(services.size(), 2u);
  const bool headless_first =
      services[0]["metadata"]["name"].as<std::string>() == "wp-weightpath-headless";
  const YAML::Node& headless = services[headless_first ? 0 : 1];
  const YAML::Node& cluster_ip = services[headless_first ? 1 : 0];
  EXPECT_EQ(headless["metadata"]["name"].as<std::string>(), "wp-weightpath-headless");
  EXPECT_EQ(cluster_ip["metadata"]["name"].as<std::string>(), "wp-weightpath");
  EXPECT_EQ(headless["spec"]["clusterIP"].as<std::string>(""), "None");
  EXPECT_FALSE(headless["spec"]["publishNotReadyAddresses"].as<bool>(true))
      << "a starting or draining pod must stay out of the clients' address list";
  EXPECT_EQ(Dumped(headless["spec"]["selector"]), Dumped(cluster_ip["spec"]["selector"]));
  const YAML::Node grpc = Named(headless["spec"]["ports"], "grpc");
  EXPECT_EQ(grpc["port"].as<int>(0), 50051);
  EXPECT_EQ(grpc["appProtocol"].as<std::string>(""), "grpc");

  const RenderedChart without = Render(Sets({"insecure=true", "service.headless.enabled=false"}));
  ASSERT_TRUE(without.ok) << without.error;
  EXPECT_EQ(without.OfKind("Service").size(), 1u);
}

TEST(HelmChartRendered, OperatorTokenSecretBecomesTheAdminTokenFile) {
  const RenderedChart chart = Render(
      Sets({"insecure=true", "operators.token.secretName=wp-operator", "operators.token.key=bearer"}));
  ASSERT_TRUE(chart.ok) << chart.error;
  const YAML::Node deployment = chart.Only("Deployment");
  const std::string token_file = FlagValue(ContainerArgs(deployment), "admin_token_file");
  ASSERT_FALSE(token_file.empty());
  const YAML::Node mount = Named(ServerContainer(deployment)["volumeMounts"], "operator-token");
  ASSERT_TRUE(mount.IsDefined());
  EXPECT_TRUE(mount["readOnly"].as<bool>(false));
  EXPECT_EQ(token_file, mount["mountPath"].as<std::string>() + "/bearer");
  const YAML::Node volume = Named(PodSpec(deployment)["volumes"], "operator-token");
  EXPECT_EQ(volume["secret"]["secretName"].as<std::string>(""), "wp-operator");
  EXPECT_EQ(volume["secret"]["defaultMode"].as<int>(0), 0440) << "owner and group only";
  EXPECT_EQ(volume["secret"]["items"][0]["key"].as<std::string>(""), "bearer");
  EXPECT_EQ(FlagValue(ContainerArgs(deployment), "admin_identity"), "");

  const RenderedChart none = Render(Sets({"insecure=true"}));
  ASSERT_TRUE(none.ok) << none.error;
  EXPECT_EQ(FlagValue(ContainerArgs(none.Only("Deployment")), "admin_token_file"), "");
}

TEST(HelmChartRendered, OperatorCertificateIdentityBecomesTheAdminIdentity) {
  const RenderedChart chart =
      Render(Sets({"tls.secretName=wp-tls", "tls.clientCASecretName=device-ca",
                   "operators.certificateIdentity=uri_prefix=spiffe://example.org/operator/"}));
  ASSERT_TRUE(chart.ok) << chart.error;
  const std::vector<std::string> args = ContainerArgs(chart.Only("Deployment"));
  EXPECT_EQ(FlagValue(args, "admin_identity"), "uri_prefix=spiffe://example.org/operator/");
  EXPECT_EQ(FlagValue(args, "client_ca"), "/etc/weightpath/client-ca/ca.crt");
  EXPECT_EQ(FlagValue(args, "admin_token_file"), "");
}

TEST(HelmChartRendered, OperatorIdentitiesBecomeTheServersOperatorsWithTheirSecrets) {
  server::testing::TempDir dir;
  const std::string values = WriteValuesFile(dir, "identities.yaml", R"(
insecure: true
operators:
  identities:
    - name: vera
      role: viewer
      tokenSecret: {name: weightpath-vera}
    - name: release-bot
      role: operator
      tokenSecret: {name: weightpath-release, key: bearer}
)");
  const RenderedChart chart = Render({"--values", values});
  ASSERT_TRUE(chart.ok) << chart.error;
  const YAML::Node deployment = chart.Only("Deployment");
  const std::string config_flag = FlagValue(ContainerArgs(deployment), "config");
  EXPECT_EQ(config_flag, "/etc/weightpath/config/server.yaml");
  const YAML::Node server_yaml =
      YAML::Load(chart.Only("ConfigMap")["data"]["server.yaml"].as<std::string>(""));
  const YAML::Node operators = server_yaml["operators"];
  ASSERT_EQ(operators.size(), 2u);
  EXPECT_EQ(operators[0]["name"].as<std::string>(""), "vera");
  EXPECT_EQ(operators[0]["role"].as<std::string>(""), "viewer");
  EXPECT_EQ(operators[1]["role"].as<std::string>(""), "operator");
  for (const auto& [index, name, key, secret] :
       {std::tuple<int, std::string, std::string, std::string>{0, "vera", "token", "weightpath-vera"},
        {1, "release-bot", "bearer", "weightpath-release"}}) {
    const YAML::Node mount = Named(ServerContainer(deployment)["volumeMounts"], "operator-" + name);
    ASSERT_TRUE(mount.IsDefined()) << name;
    EXPECT_TRUE(mount["readOnly"].as<bool>(false));
    EXPECT_EQ(operators[index]["token_file"].as<std::string>(""),
              mount["mountPath"].as<std::string>() + "/" + key);
    const YAML::Node volume = Named(PodSpec(deployment)["volumes"], "operator-" + name);
    EXPECT_EQ(volume["secret"]["secretName"].as<std::string>(""), secret);
    EXPECT_EQ(volume["secret"]["defaultMode"].as<int>(0), 0440);
    EXPECT_EQ(volume["secret"]["items"][0]["key"].as<std::string>(""), key);
  }

  // The server reads the rendered file: what stops it here is the Secret's
  // file missing outside a pod, named with its line, not a key it refuses.
  const std::string rendered = dir.File("server.yaml");
  server::testing::WriteFileOrDie(rendered,
                                  chart.Only("ConfigMap")["data"]["server.yaml"].as<std::string>(""));
  const server::testing::ExitResult parsed =
      server::testing::ServerProcess::RunToExit({"--store=none", "--config=" + rendered},
                                                absl::Seconds(60));
  EXPECT_NE(parsed.exit_code, 0);
  EXPECT_THAT(parsed.log, HasSubstr("operators[0] token_file=/etc/weightpath/operators/vera/token"));

  const RenderedChart bad_role = Render(
      {"--values", WriteValuesFile(dir, "bad.yaml",
                                   "insecure: true\noperators:\n  identities:\n"
                                   "    - {name: x, role: root, certificate: ou=x}\n")});
  EXPECT_FALSE(bad_role.ok);
  EXPECT_THAT(bad_role.error, HasSubstr("role"));

  const RenderedChart none = Render(Sets({"insecure=true"}));
  ASSERT_TRUE(none.ok) << none.error;
  EXPECT_EQ(FlagValue(ContainerArgs(none.Only("Deployment")), "config"), "");
  EXPECT_FALSE(none.Only("ConfigMap")["data"]["server.yaml"].IsDefined());
}

TEST(HelmChartRendered, NetworkPolicyAdmitsTheListedPeersToTheContainerPorts) {
  server::testing::TempDir dir;
  const std::string values = WriteValuesFile(dir, "policy.yaml", R"(
insecure: true
networkPolicy:
  enabled: true
  metricsFrom:
    - namespaceSelector:
        matchLabels:
          kubernetes.io/metadata.name: monitoring
)");
  const RenderedChart chart = Render({"--values", values});
  ASSERT_TRUE(chart.ok) << chart.error;
  const YAML::Node policy = chart.Only("NetworkPolicy");
  ASSERT_TRUE(policy.IsDefined());
  EXPECT_EQ(policy["spec"]["policyTypes"][0].as<std::string>(""), "Ingress");
  EXPECT_EQ(policy["spec"]["policyTypes"].size(), 1u) << "egress stays open (store, DNS)";
  const YAML::Node& ingress = policy["spec"]["ingress"];
  ASSERT_EQ(ingress.size(), 2u);
  const bool grpc_first = ingress[0]["ports"][0]["port"].as<std::string>("") == "grpc";
  const YAML::Node& grpc_rule = ingress[grpc_first ? 0 : 1];
  const YAML::Node& metrics_rule = ingress[grpc_first ? 1 : 0];
  EXPECT_EQ(grpc_rule["ports"][0]["port"].as<std::string>(""), "grpc");
  EXPECT_EQ(metrics_rule["ports"][0]["port"].as<std::string>(""), "metrics");
  // No peers listed for gRPC: devices may come from anywhere.
  EXPECT_FALSE(grpc_rule["from"].IsDefined());
  EXPECT_EQ(metrics_rule["from"][0]["namespaceSelector"]["matchLabels"]
                        ["kubernetes.io/metadata.name"]
                            .as<std::string>(""),
            "monitoring");

  const RenderedChart off = Render(Sets({"insecure=true"}));
  ASSERT_TRUE(off.ok) << off.error;
  EXPECT_THAT(off.OfKind("NetworkPolicy"), IsEmpty());
}

TEST(HelmChartRendered, PrometheusRuleCarriesTheChartsRulesFile) {
  const std::string rules_file = kChartDir + "/files/prometheus-rules.yaml";
  const weightpath::testing::ProcessResult check =
      weightpath::testing::RunProcess({"promtool", "check", "rules", rules_file});
  EXPECT_EQ(check.exit_code, 0) << check.out << check.err;

  const RenderedChart chart =
      Render(Concat(Sets({"insecure=true", "prometheusRule.enabled=true", "prometheusRule.labels.release=kp"}),
                    {"--api-versions", "monitoring.coreos.com/v1"}));
  ASSERT_TRUE(chart.ok) << chart.error;
  const YAML::Node rule = chart.Only("PrometheusRule");
  ASSERT_TRUE(rule.IsDefined());
  EXPECT_EQ(rule["apiVersion"].as<std::string>(""), "monitoring.coreos.com/v1");
  EXPECT_EQ(rule["metadata"]["labels"]["release"].as<std::string>(""), "kp");
  // Same groups, alerts and expressions as the file, with Prometheus' own
  // {{ $labels }} templates left for Prometheus.
  const YAML::Node file = YAML::LoadFile(rules_file);
  ASSERT_EQ(rule["spec"]["groups"].size(), file["groups"].size());
  size_t alerts = 0;
  for (size_t g = 0; g < file["groups"].size(); ++g) {
    const YAML::Node want = file["groups"][g];
    const YAML::Node got = rule["spec"]["groups"][g];
    EXPECT_EQ(got["name"].as<std::string>(""), want["name"].as<std::string>());
    ASSERT_EQ(got["rules"].size(), want["rules"].size());
    for (size_t r = 0; r < want["rules"].size(); ++r, ++alerts) {
      EXPECT_EQ(got["rules"][r]["alert"].as<std::string>(""), want["rules"][r]["alert"].as<std::string>());
      EXPECT_EQ(got["rules"][r]["expr"].as<std::string>(""), want["rules"][r]["expr"].as<std::string>());
      EXPECT_EQ(StringMap(got["rules"][r]["annotations"]), StringMap(want["rules"][r]["annotations"]));
      EXPECT_EQ(StringMap(got["rules"][r]["labels"]), StringMap(want["rules"][r]["labels"]));
    }
  }
  EXPECT_GE(alerts, 5u);
  EXPECT_THAT(chart.manifests.size(), ::testing::Gt(0u));
}

// A path inside the pod moved to where the test laid that volume out: the
// longest mount path that `path` is in decides, once.
std::string Rebased(const std::string& path, const std::map<std::string, std::string>& mounts) {
  const std::pair<const std::string, std::string>* best = nullptr;
  for (const auto& mount : mounts) {
    if ((path == mount.first || absl::StartsWith(path, mount.first + "/")) &&
        (best == nullptr || mount.first.size() > best->first.size())) {
      best = &mount;
    }
  }
  return best == nullptr ? path : best->second + path.substr(best->first.size());
}

// Secret name -> its keys and their bytes, as the cluster holds them.
using Secrets = std::map<std::string, std::map<std::string, std::string>>;

// The rendered Deployment's server, started here on what the kubelet would
// lay out under `root`: the ConfigMap's files from the rendered ConfigMap,
// each Secret volume's files from `secrets` (its items, or every key) with
// the volume's mode, owned by another user and the test's group (as the
// kubelet's root:fsGroup), an empty directory for the rest; the args
// rebased onto that, the ports on loopback where the kernel picks.
// The pod name StartRenderedServer gives the server where the kubelet
// would expand the downward API's metadata.name.
constexpr char kRenderedPodName[] = "wp-weightpath-6f7c9d5b8-x2k4q";

absl::StatusOr<std::unique_ptr<server::testing::ServerProcess>> StartRenderedServer(
    const RenderedChart& chart, const Secrets& secrets, const server::testing::TempDir& root) {
  const YAML::Node deployment = chart.Only("Deployment");
  const YAML::Node container = ServerContainer(deployment);
  std::map<std::string, std::string> mount_to_local;
  for (const YAML::Node& mount : container["volumeMounts"]) {
    const std::string name = mount["name"].as<std::string>();
    const std::string local = root.File(name);
    std::filesystem::create_directories(local);
    mount_to_local[mount["mountPath"].as<std::string>()] = local;
  }
  const YAML::Node config_map = chart.Only("ConfigMap");
  for (const auto& entry : config_map["data"]) {
    server::testing::WriteFileOrDie(root.File("config/" + entry.first.as<std::string>()),
                                    entry.second.as<std::string>());
  }
  for (const YAML::Node& volume : PodSpec(deployment)["volumes"]) {
    const YAML::Node secret = volume["secret"];
    if (!secret.IsDefined()) continue;
    const auto found = secrets.find(secret["secretName"].as<std::string>(""));
    if (found == secrets.end()) continue;
    std::map<std::string, std::string> files;  // path in the volume -> key
    if (secret["items"].IsDefined()) {
      for (const YAML::Node& item : secret["items"]) {
        files[item["path"].as<std::string>()] = item["key"].as<std::string>();
      }
    } else {
      for (const auto& [key, bytes] : found->second) files[key] = key;
    }
    for (const auto& [path, key] : files) {
      const std::string local = root.File(volume["name"].as<std::string>() + "/" + path);
      server::testing::WriteFileOrDie(local, found->second.at(key));
      if (::chmod(local.c_str(), secret["defaultMode"].as<int>(0644)) != 0 ||
          ::chown(local.c_str(), 65532, getgid()) != 0) {
        return absl::InternalError("cannot give " + local + " the Secret volume's mode and owner");
      }
    }
  }
  // The kubelet expands $(VAR) from the container's env; of those only the
  // pod's name is known without a cluster.
  std::map<std::string, std::string> expanded;
  for (const YAML::Node& variable : container["env"]) {
    if (variable["valueFrom"]["fieldRef"]["fieldPath"].as<std::string>("") == "metadata.name") {
      expanded[absl::StrCat("$(", variable["name"].as<std::string>(), ")")] = kRenderedPodName;
    }
  }
  std::vector<std::string> args;
  for (std::string arg : ContainerArgs(deployment)) {
    arg = absl::StrReplaceAll(arg, expanded);
    const std::string name = arg.substr(2, arg.find('=') - 2);
    // 0.0.0.0 inside a pod; loopback ports the kernel picks here.
    if (name == "listen" || name == "metrics_listen") arg = "--" + name + "=127.0.0.1:0";
    const size_t value_at = arg.find('=') + 1;
    if (value_at != 0) {
      const std::string value = arg.substr(value_at);
      constexpr absl::string_view kSqlite = "sqlite:";
      arg = arg.substr(0, value_at) +
            (absl::StartsWith(value, kSqlite)
                 ? std::string(kSqlite) + Rebased(value.substr(kSqlite.size()), mount_to_local)
                 : Rebased(value, mount_to_local));
    }
    args.push_back(arg);
  }
  absl::StatusOr<std::unique_ptr<server::testing::ServerProcess>> started =
      server::testing::ServerProcess::Start(args);
  if (!started.ok()) {
    return absl::Status(started.status().code(), absl::StrCat(started.status().message(),
                                                              "\nargs: ", absl::StrJoin(args, " ")));
  }
  return started;
}

TEST(HelmChartRendered, ServerAndWeightpathctlWorkOnTheRenderedDeployment) {
  const RenderedChart chart = Render(
      Sets({"insecure=true", "operators.token.secretName=wp-operator"}));
  ASSERT_TRUE(chart.ok) << chart.error;
  const YAML::Node token_volume =
      Named(PodSpec(chart.Only("Deployment"))["volumes"], "operator-token");
  const std::string token_key = token_volume["secret"]["items"][0]["key"].as<std::string>();
  server::testing::TempDir root;
  absl::StatusOr<std::unique_ptr<server::testing::ServerProcess>> started = StartRenderedServer(
      chart, {{"wp-operator", {{token_key, "s3cret-operator-token\n"}}}}, root);
  ASSERT_TRUE(started.ok()) << started.status();
  server::testing::ServerProcess& server = **started;
  const std::string token_path =
      root.File("operator-token/" + token_volume["secret"]["items"][0]["path"].as<std::string>());

  // An operator with the Secret's token reaches the admin API...
  const weightpath::testing::ProcessResult devices = weightpath::testing::RunProcess(
      {WEIGHTPATH_CTL_BINARY, "devices", "--server", server.grpc_address(), "--token-file",
       token_path, "-o", "json"});
  EXPECT_EQ(devices.exit_code, 0) << devices.out << devices.err;
  // ...and one with another token does not.
  const std::string wrong_token = root.File("wrong-token");
  server::testing::WriteFileOrDie(wrong_token, "not-the-token\n");
  ASSERT_EQ(chmod(wrong_token.c_str(), 0600), 0);
  const weightpath::testing::ProcessResult refused = weightpath::testing::RunProcess(
      {WEIGHTPATH_CTL_BINARY, "devices", "--server", server.grpc_address(), "--token-file",
       wrong_token});
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_THAT(refused.err, HasSubstr("the bearer token is not an operator token"));
  // The policy load at start is in the audit trail under the pod's name.
  const weightpath::testing::ProcessResult audit = weightpath::testing::RunProcess(
      {WEIGHTPATH_CTL_BINARY, "audit", "--server", server.grpc_address(), "--token-file",
       token_path});
  EXPECT_EQ(audit.exit_code, 0) << audit.err;
  EXPECT_THAT(audit.out, AllOf(HasSubstr("PolicyLoaded"), HasSubstr(kRenderedPodName)));

  server.Signal(SIGTERM);
  EXPECT_EQ(server.WaitForExit(absl::Seconds(60)).exit_code, 0) << server.Log();
}

// NOTES.txt, as `helm install` prints it, for a production-like install:
// mutual TLS and three operator identities. It lists each identity (it
// once said "none configured" for any but the two single-identity values),
// and the resolve it suggests is run as printed, with real files in place
// of its placeholders, against the server started on the chart's own args.
TEST(HelmChartRendered, NotesListEveryOperatorIdentityAndSuggestAResolveThatWorks) {
  server::testing::TempDir dir;
  const std::string values = WriteValuesFile(dir, "mtls.yaml", R"(
tls:
  secretName: wp-tls
  clientCASecretName: device-ca
operators:
  identities:
    - {name: vera, role: viewer, certificate: "ou=weightpath-viewers"}
    - {name: release-bot, role: operator, certificate: "uri_prefix=spiffe://example.org/bot/"}
    - {name: platform, role: admin, certificate: "ou=weightpath-admins"}
)");
  const RenderedChart chart = Render({"--values", values});
  ASSERT_TRUE(chart.ok) << chart.error;
  EXPECT_THAT(chart.notes,
              AllOf(Not(HasSubstr("none configured")),
                    HasSubstr("vera (viewer): client certificates marked ou=weightpath-viewers"),
                    HasSubstr("release-bot (operator): client certificates marked "
                              "uri_prefix=spiffe://example.org/bot/"),
                    HasSubstr("platform (admin): client certificates marked ou=weightpath-admins"),
                    HasSubstr("--cert OPERATOR.pem --key OPERATOR.key")))
      << chart.notes;

  // The suggested command, continuation lines joined.
  const size_t begin = chart.notes.find("weightpathctl resolve");
  ASSERT_NE(begin, std::string::npos) << chart.notes;
  const size_t end = chart.notes.find('\n', chart.notes.find("--profile", begin));
  const std::string command =
      absl::StrReplaceAll(chart.notes.substr(begin, end - begin), {{"\\\n", " "}});
  EXPECT_THAT(command, HasSubstr("--tls-server-name wp-weightpath.fleet.svc"));

  auto ca = server::testing::TestCa::Create();
  ASSERT_TRUE(ca.ok()) << ca.status();
  ASSERT_TRUE((*ca)->IssueServer("service", "DNS:wp-weightpath.fleet.svc").ok());
  ASSERT_TRUE((*ca)->IssueClient("vera", "/CN=vera/OU=weightpath-viewers").ok());
  server::testing::TempDir root;
  using server::testing::ReadFileOrDie;
  absl::StatusOr<std::unique_ptr<server::testing::ServerProcess>> started = StartRenderedServer(
      chart,
      {{"wp-tls", {{"tls.crt", ReadFileOrDie((*ca)->File("service.pem"))},
                   {"tls.key", ReadFileOrDie((*ca)->File("service.key"))}}},
       {"device-ca", {{"ca.crt", ReadFileOrDie((*ca)->File("ca.pem"))}}}},
      root);
  ASSERT_TRUE(started.ok()) << started.status();
  // What the operator fills in: the port-forward's local end is the server
  // here; the placeholders are files; the profile is the repository's.
  std::vector<std::string> argv = {WEIGHTPATH_CTL_BINARY};
  for (absl::string_view word : absl::StrSplit(command, ' ', absl::SkipEmpty())) {
    if (word == "weightpathctl") continue;
    std::string arg(word);
    if (absl::StartsWith(arg, "127.0.0.1:")) arg = (*started)->grpc_address();
    if (arg == "CA.pem") arg = (*ca)->File("ca.pem");
    if (arg == "OPERATOR.pem") arg = (*ca)->File("vera.pem");
    if (arg == "OPERATOR.key") arg = (*ca)->File("vera.key");
    if (absl::StartsWith(arg, "examples/")) arg = absl::StrCat(WEIGHTPATH_SOURCE_DIR, "/", arg);
    argv.push_back(arg);
  }
  const weightpath::testing::ProcessResult resolved = weightpath::testing::RunProcess(argv);
  EXPECT_EQ(resolved.exit_code, 0) << absl::StrJoin(argv, " ") << "\n" << resolved.err;
  EXPECT_THAT(resolved.out, HasSubstr("w4a8-amx"));

  // Without operators the notes say so; TLS without client certificates
  // suggests no certificate, plaintext no TLS at all.
  const RenderedChart none = Render(Sets({"tls.secretName=wp-tls"}));
  ASSERT_TRUE(none.ok) << none.error;
  EXPECT_THAT(none.notes, AllOf(HasSubstr("none configured"), HasSubstr("--ca CA.pem"),
                                Not(HasSubstr("--cert OPERATOR.pem"))));
  const RenderedChart plaintext = Render(Sets({"insecure=true"}));
  ASSERT_TRUE(plaintext.ok) << plaintext.error;
  EXPECT_THAT(plaintext.notes,
              AllOf(HasSubstr("weightpathctl resolve --server 127.0.0.1:50051 --profile"),
                    Not(HasSubstr("--ca"))));
}

// weightpathctl with `args`; the test fails on a non-zero exit.
weightpath::testing::ProcessResult Ctl(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {WEIGHTPATH_CTL_BINARY};
  argv.insert(argv.end(), args.begin(), args.end());
  weightpath::testing::ProcessResult result = weightpath::testing::RunProcess(argv);
  EXPECT_EQ(result.exit_code, 0) << absl::StrJoin(args, " ") << ": " << result.err;
  return result;
}

// `text` as a YAML block scalar under a key at `indent` spaces.
std::string BlockScalar(const std::string& text, int indent) {
  std::string block = "|\n";
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (!line.empty()) absl::StrAppend(&block, std::string(indent + 2, ' '), line, "\n");
  }
  return block;
}

// `text` with every mount path among `mounts` replaced by its local
// directory in one pass: the longest mount where several start at the same
// place (/a/b over /a), and nothing replaced twice (a local directory under
// /tmp is not taken for the /tmp mount).
std::string WithLocalPaths(const std::string& text, const std::map<std::string, std::string>& mounts) {
  return absl::StrReplaceAll(text, mounts);
}

// A signed catalog as the chart installs it: a TUF repository made by the
// real weightpathctl, its metadata in a ConfigMap, an online timestamp key
// in a Secret. The init container's script, run as rendered on the
// kubelet's layout, seeds a writable repository and a 0400 copy of the key;
// the real server then verifies the repository on the rendered args and
// serves signed targets.
TEST(HelmChartRendered, SignedCatalogWithATimestampKeyIsSeededAndServed) {
  server::testing::TempDir dir;
  const std::string repo = dir.File("repo");
  const std::string keys = dir.File("keys");
  Ctl({"repo", "init", "--repo", repo, "--generate-keys", keys});
  for (const char* path : {"bf16", "export-qnn-w8a16", "fp16", "w4a8-amx", "w4a16-tinygemm"}) {
    Ctl({"repo", "add-target", "--repo", repo, "--path", absl::StrCat("spark/", path, ".bin"),
         "--length", "4096", "--sha256", std::string(64, 'a'), "--model", "Spark-X2.5-1.7B",
         "--weight-path", path, "--version", "7", "--hardware-classes",
         "x86_cpu,arm64_cpu,cuda_discrete,jetson,npu_phone"});
  }
  Ctl({"repo", "sign", "--repo", repo, "--role", "targets", "--key", keys + "/targets.pem"});
  Ctl({"repo", "timestamp", "--repo", repo, "--key", keys + "/timestamp.pem", "--snapshot-key",
       keys + "/snapshot.pem"});
  if (HasFailure()) return;
  const std::string root_json = server::testing::ReadFileOrDie(repo + "/metadata/1.root.json");
  const std::string values = WriteValuesFile(
      dir, "signed.yaml",
      absl::StrCat("insecure: true\nsignedCatalog:\n  metadataConfigMap: weightpath-tuf\n"
                   "  artifactUrl: https://mirror.example/weights\n"
                   "  timestampKey:\n    secretName: wp-timestamp\n"
                   "  root: ", BlockScalar(root_json, 2)));
  const RenderedChart chart = Render({"--values", values});
  ASSERT_TRUE(chart.ok) << chart.error;
  const YAML::Node deployment = chart.Only("Deployment");
  const std::vector<std::string> rendered_args = ContainerArgs(deployment);
  EXPECT_EQ(FlagValue(rendered_args, "catalog"), "/var/lib/weightpath-catalog/repository");
  EXPECT_EQ(FlagValue(rendered_args, "catalog_root"), "/etc/weightpath/config/catalog-root.json");
  EXPECT_EQ(FlagValue(rendered_args, "catalog_artifact_url"), "https://mirror.example/weights");
  EXPECT_EQ(FlagValue(rendered_args, "catalog_state_dir"), "/var/lib/weightpath")
      << "beside the SQLite store, on its volume";
  EXPECT_EQ(FlagValue(rendered_args, "timestamp_key"),
            "/var/run/weightpath-timestamp-key/timestamp.pem");
  EXPECT_EQ(FlagValue(rendered_args, "timestamp_lifetime"), "24h");
  EXPECT_EQ(chart.Only("ConfigMap")["data"]["catalog-root.json"].as<std::string>("") ,
            root_json.back() == '\n' ? root_json : root_json + "\n");
  const YAML::Node volumes = PodSpec(deployment)["volumes"];
  EXPECT_EQ(Named(volumes, "catalog-metadata")["configMap"]["name"].as<std::string>(""),
            "weightpath-tuf");
  EXPECT_EQ(Named(volumes, "timestamp-key")["emptyDir"]["medium"].as<std::string>(""), "Memory");
  EXPECT_TRUE(Named(volumes, "catalog-repository")["emptyDir"].IsDefined());
  EXPECT_EQ(Named(volumes, "timestamp-key-secret")["secret"]["secretName"].as<std::string>(""),
            "wp-timestamp");
  const YAML::Node init = Named(PodSpec(deployment)["initContainers"], "seed-signed-catalog");
  ASSERT_TRUE(init.IsDefined());
  EXPECT_EQ(Dumped(init["securityContext"]), Dumped(ServerContainer(deployment)["securityContext"]));

  // The kubelet's part: one directory per volume, the ConfigMaps' files,
  // the Secret's file 0440 owned by another user (root, read through the
  // pod's fsGroup).
  server::testing::TempDir pod;
  const auto volume_dir = [&](const std::string& name) {
    std::filesystem::create_directories(pod.File(name));
    return pod.File(name);
  };
  for (const auto& entry : chart.Only("ConfigMap")["data"]) {
    server::testing::WriteFileOrDie(volume_dir("config") + "/" + entry.first.as<std::string>(),
                                    entry.second.as<std::string>());
  }
  for (const auto& file : std::filesystem::directory_iterator(repo + "/metadata")) {
    std::filesystem::copy_file(file.path(), volume_dir("catalog-metadata") + "/" +
                                                file.path().filename().string());
  }
  const std::string secret_key = volume_dir("timestamp-key-secret") + "/timestamp.pem";
  std::filesystem::copy_file(keys + "/timestamp.pem", secret_key);
  ASSERT_EQ(chmod(secret_key.c_str(), 0440), 0);
  ASSERT_EQ(chown(secret_key.c_str(), 65532, getgid()), 0);
  const auto mounts_of = [&](const YAML::Node& container) {
    std::map<std::string, std::string> mounts;
    for (const YAML::Node& mount : container["volumeMounts"]) {
      mounts[mount["mountPath"].as<std::string>()] = volume_dir(mount["name"].as<std::string>());
    }
    return mounts;
  };

  // The init container's script as rendered, on those directories.
  ASSERT_EQ(init["command"].size(), 3u);
  const weightpath::testing::ProcessResult seeded = weightpath::testing::RunProcess(
      {init["command"][0].as<std::string>(), init["command"][1].as<std::string>(),
       WithLocalPaths(init["command"][2].as<std::string>(), mounts_of(init))});
  ASSERT_EQ(seeded.exit_code, 0) << seeded.err;
  struct stat key_info {};
  ASSERT_EQ(stat((pod.File("timestamp-key") + "/timestamp.pem").c_str(), &key_info), 0);
  EXPECT_EQ(key_info.st_mode & 07777, 0400u);
  EXPECT_TRUE(std::filesystem::exists(pod.File("catalog-repository") + "/timestamp.json"));

  const std::map<std::string, std::string> server_mounts = mounts_of(ServerContainer(deployment));
  std::vector<std::string> args;
  for (std::string arg : rendered_args) {
    const std::string name = arg.substr(2, arg.find('=') - 2);
    if (name == "listen" || name == "metrics_listen") arg = "--" + name + "=127.0.0.1:0";
    args.push_back(WithLocalPaths(arg, server_mounts));
  }
  absl::StatusOr<std::unique_ptr<server::testing::ServerProcess>> started =
      server::testing::ServerProcess::Start(args);
  ASSERT_TRUE(started.ok()) << started.status() << "\nargs: " << absl::StrJoin(args, " ");
  EXPECT_THAT((*started)->Log(), HasSubstr("signed: root v1"));
  const weightpath::testing::ProcessResult resolved = Ctl(
      {"resolve", "--server", (*started)->grpc_address(), "--device-id", "helm-signed",
       "--profile", std::string(WEIGHTPATH_SOURCE_DIR) + "/examples/profiles/intel-sapphire-rapids.json",
       "-o", "json"});
  EXPECT_THAT(resolved.out, AllOf(HasSubstr("\"signed_target\": true"),
                                  HasSubstr("\"uri\": \"https://mirror.example/weights/spark/")));
  EXPECT_TRUE(std::filesystem::exists(pod.File("data") + "/catalog-trust-state.json"))
      << "the trusted state is kept on the data volume";
}

// Without a timestamp key nothing writes the repository: the ConfigMap is
// mounted where --catalog points, with no init container; and each
// combination the server could not run is refused with its message.
TEST(HelmChartRendered, SignedCatalogWithoutAKeyMountsTheConfigMapAndGuardsItsValues) {
  const std::vector<std::string> base = {"insecure=true",
                                         "signedCatalog.metadataConfigMap=weightpath-tuf",
                                         "signedCatalog.artifactUrl=https://mirror.example/w",
                                         "signedCatalog.root=root-json", "store.type=none"};
  const RenderedChart chart = Render(Sets(base));
  ASSERT_TRUE(chart.ok) << chart.error;
  const YAML::Node deployment = chart.Only("Deployment");
  EXPECT_FALSE(PodSpec(deployment)["initContainers"].IsDefined());
  const YAML::Node mount = Named(ServerContainer(deployment)["volumeMounts"], "catalog-metadata");
  EXPECT_EQ(mount["mountPath"].as<std::string>(""), "/var/lib/weightpath-catalog/repository");
  EXPECT_TRUE(mount["readOnly"].as<bool>(false));
  const std::vector<std::string> args = ContainerArgs(deployment);
  EXPECT_EQ(FlagValue(args, "catalog_state_dir"), "/var/lib/weightpath-catalog/state");
  EXPECT_EQ(FlagValue(args, "timestamp_key"), "");
  EXPECT_TRUE(Named(PodSpec(deployment)["volumes"], "catalog-state")["emptyDir"].IsDefined());
  const RenderedChart claimed = Render(Sets(Concat(base, {"signedCatalog.stateClaim=tuf-state"})));
  ASSERT_TRUE(claimed.ok) << claimed.error;
  EXPECT_EQ(Named(PodSpec(claimed.Only("Deployment"))["volumes"], "catalog-state")
                ["persistentVolumeClaim"]["claimName"].as<std::string>(""),
            "tuf-state");

  const struct {
    std::vector<std::string> sets;
    std::string message;
  } refused[] = {
      {Concat(base, {"catalog=default_model: m"}), "are two catalogs"},
      {{"insecure=true", "signedCatalog.metadataConfigMap=t",
        "signedCatalog.artifactUrl=https://m/w"},
       "needs signedCatalog.root"},
      {{"insecure=true", "signedCatalog.metadataConfigMap=t", "signedCatalog.root=root-json"},
       "needs signedCatalog.artifactUrl"},
      {{"insecure=true", "signedCatalog.timestampKey.secretName=k"},
       "timestampKey.secretName needs signedCatalog.metadataConfigMap"},
      {Concat(base, {"signedCatalog.artifactUrl=ftp://mirror"}), "artifactUrl"},
  };
  for (const auto& [sets, message] : refused) {
    SCOPED_TRACE(absl::StrJoin(sets, " "));
    const RenderedChart bad = Render(Sets(sets));
    EXPECT_FALSE(bad.ok);
    EXPECT_THAT(bad.error, HasSubstr(message));
  }
}

}  // namespace
}  // namespace weightpath::helm_test
