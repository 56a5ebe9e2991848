// Checks the chart in helm/weightpath against the repository without helm:
// its metadata, the values it promises, and that the Deployment drives the
// real weightpath-server with flags, ports and files it actually has.
#include <stdlib.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/helm/chart_args.h"
#include "tests/helm/chart_text.h"
#include "tests/helm/server_flags.h"
#include "tests/server/server_process.h"
#include "yaml-cpp/yaml.h"

namespace weightpath::helm_test {
namespace {

const std::string kChartDir = std::string(WEIGHTPATH_SOURCE_DIR) + "/helm/weightpath";

std::string MustRead(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFileText(path);
  EXPECT_TRUE(text.ok()) << text.status();
  return text.ok() ? *text : std::string();
}

std::string ChartFile(const std::string& relative_path) {
  return MustRead(kChartDir + "/" + relative_path);
}

YAML::Node LoadValues() { return YAML::Load(ChartFile("values.yaml")); }

// The template with its simple value references resolved from values.yaml.
std::string RenderedReferences(const std::string& template_name) {
  return SubstituteSimpleReferences(ChartFile("templates/" + template_name), LoadValues());
}

// The port part of a server default such as "127.0.0.1:50051".
std::string PortOf(const std::string& host_port) {
  return host_port.substr(host_port.rfind(':') + 1);
}

const std::map<std::string, std::string>& ServerDefaults() {
  static const auto* defaults = [] {
    absl::StatusOr<std::map<std::string, std::string>> read =
        ServerFlagDefaults(WEIGHTPATH_SERVER_BINARY);
    EXPECT_TRUE(read.ok()) << read.status();
    return new std::map<std::string, std::string>(read.ok() ? *read
                                                            : std::map<std::string, std::string>{});
  }();
  return *defaults;
}

// Text of the first match of `pattern` group 1, or "" when absent.
std::string FirstGroup(const std::string& text, const std::string& pattern) {
  std::smatch match;
  if (!std::regex_search(text, match, std::regex(pattern))) return "";
  return match[1].str();
}

TEST(HelmChart, ChartYamlIsApiV2WithTheProjectVersionAsAppVersion) {
  const YAML::Node chart = YAML::Load(ChartFile("Chart.yaml"));
  ASSERT_TRUE(chart.IsMap());
  EXPECT_EQ(chart["apiVersion"].as<std::string>(""), "v2");
  EXPECT_EQ(chart["name"].as<std::string>(""), "weightpath");
  EXPECT_EQ(chart["type"].as<std::string>(""), "application");
  EXPECT_TRUE(std::regex_match(chart["version"].as<std::string>(""),
                               std::regex(R"(\d+\.\d+\.\d+)")))
      << "Chart.yaml version must be SemVer";
  EXPECT_EQ(chart["appVersion"].as<std::string>(""), WEIGHTPATH_PROJECT_VERSION)
      << "Chart.yaml appVersion must equal project(VERSION) in the root CMakeLists.txt";
}

TEST(HelmChart, ValuesYamlCarriesEveryKeyTheTemplatesRead) {
  const YAML::Node values = LoadValues();
  ASSERT_TRUE(values.IsMap());
  const std::vector<std::string> scalar_keys = {
      "image.repository",
      "image.tag",
      "image.pullPolicy",
      "replicaCount",
      "ports.grpc",
      "ports.metrics",
      "tls.secretName",
      "tls.clientCASecretName",
      "tls.clientCAKey",
      "insecure",
      "operators.token.secretName",
      "operators.token.key",
      "operators.certificateIdentity",
      "policy",
      "catalog",
      "reloadInterval",
      "store.type",
      "store.sqlite.existingClaim",
      "store.sqlite.size",
      "store.sqlite.storageClass",
      "store.postgres.secretName",
      "store.postgres.urlKey",
      "logFormat",
      "logLevel",
      "shutdownGraceSeconds",
      "terminationGraceMarginSeconds",
      "podDisruptionBudget.enabled",
      "podDisruptionBudget.maxUnavailable",
      "serviceMonitor.enabled",
      "serviceMonitor.interval",
      "prometheusRule.enabled",
      "networkPolicy.enabled",
      "startupProbe.periodSeconds",
      "startupProbe.failureThreshold",
      "service.type",
      "service.headless.enabled",
      "securityContext.runAsNonRoot",
      "securityContext.readOnlyRootFilesystem",
      "podSecurityContext.runAsNonRoot",
  };
  for (const std::string& key : scalar_keys) {
    const YAML::Node value = ValueAt(values, key);
    EXPECT_TRUE(value.IsDefined() && value.IsScalar()) << "values.yaml lacks scalar " << key;
  }
  EXPECT_TRUE(ValueAt(values, "resources").IsMap()) << "values.yaml lacks map resources";
}

TEST(HelmChart, DefaultValuesAreOnesTheServerAccepts) {
  const YAML::Node values = LoadValues();
  EXPECT_THAT(ValueAt(values, "logFormat").as<std::string>(""),
              ::testing::AnyOf("text", "json"));
  EXPECT_THAT(ValueAt(values, "logLevel").as<std::string>(""),
              ::testing::AnyOf("trace", "debug", "info", "warn", "error"));
  EXPECT_THAT(ValueAt(values, "store.type").as<std::string>(""),
              ::testing::AnyOf("sqlite", "postgres", "none"));
  EXPECT_GE(ValueAt(values, "shutdownGraceSeconds").as<int>(-1), 0);
  EXPECT_GT(ValueAt(values, "terminationGraceMarginSeconds").as<int>(0), 0)
      << "the pod must outlive the server's own drain";
  // Plaintext outside loopback is something an install opts into.
  EXPECT_FALSE(ValueAt(values, "insecure").as<bool>(true));
  EXPECT_TRUE(ValueAt(values, "securityContext.runAsNonRoot").as<bool>(false));
  EXPECT_TRUE(ValueAt(values, "securityContext.readOnlyRootFilesystem").as<bool>(false));
}

TEST(HelmChart, EveryFlagTheDeploymentPassesIsAServerFlag) {
  const std::set<std::string> used = FlagNamesUsed(ChartFile("templates/deployment.yaml"));
  ASSERT_THAT(used, ::testing::IsSupersetOf({"listen", "metrics_listen", "policy", "store"}))
      << "flag extraction found too little: " << absl::StrJoin(used, " ");
  const std::map<std::string, std::string>& server_flags = ServerDefaults();
  ASSERT_FALSE(server_flags.empty());
  std::vector<std::string> unknown;
  for (const std::string& name : used) {
    if (server_flags.count(name) == 0) unknown.push_back("--" + name);
  }
  EXPECT_THAT(unknown, ::testing::IsEmpty())
      << "templates/deployment.yaml passes flags that " WEIGHTPATH_SERVER_BINARY
         " --helpfull does not list";
}

TEST(HelmChart, BundledDefaultPolicyIsByteIdenticalToPolicyDefault) {
  const std::string bundled = ChartFile("files/default_policy.yaml");
  const std::string source = MustRead(std::string(WEIGHTPATH_SOURCE_DIR) +
                                      "/policy/default_policy.yaml");
  ASSERT_FALSE(source.empty());
  EXPECT_TRUE(bundled == source)
      << "helm/weightpath/files/default_policy.yaml differs from policy/default_policy.yaml; "
         "copy it over again";
  EXPECT_THAT(ChartFile("templates/_helpers.tpl"),
              ::testing::HasSubstr(R"(.Files.Get "files/default_policy.yaml")"));
}

TEST(HelmChart, PortsAgreeBetweenServerValuesDeploymentAndService) {
  const YAML::Node values = LoadValues();
  const std::string grpc = ValueAt(values, "ports.grpc").as<std::string>("");
  const std::string metrics = ValueAt(values, "ports.metrics").as<std::string>("");
  ASSERT_FALSE(ServerDefaults().empty());
  EXPECT_EQ(grpc, PortOf(ServerDefaults().at("listen")));
  EXPECT_EQ(metrics, PortOf(ServerDefaults().at("metrics_listen")));

  const std::string deployment = RenderedReferences("deployment.yaml");
  // Inside the pod both listeners take every interface: the kubelet, the
  // Service and Prometheus all come from outside the container.
  EXPECT_EQ(FirstGroup(deployment, R"(--listen=([^"\s]+))"), "0.0.0.0:" + grpc);
  EXPECT_EQ(FirstGroup(deployment, R"(--metrics_listen=([^"\s]+))"), "0.0.0.0:" + metrics);
  EXPECT_EQ(FirstGroup(deployment, R"(- name: grpc\s*\n\s*containerPort: (\S+))"), grpc);
  EXPECT_EQ(FirstGroup(deployment, R"(- name: metrics\s*\n\s*containerPort: (\S+))"), metrics);

  // Every native gRPC probe targets the gRPC port.
  const std::regex grpc_probe(R"(\n\s*grpc:\s*\n\s*port: (\S+))");
  int probes = 0;
  for (std::sregex_iterator it(deployment.begin(), deployment.end(), grpc_probe), end; it != end;
       ++it, ++probes) {
    EXPECT_EQ((*it)[1].str(), grpc);
  }
  EXPECT_EQ(probes, 3) << "startup, readiness and liveness should all be native gRPC probes";

  const std::string service = RenderedReferences("service.yaml");
  EXPECT_EQ(FirstGroup(service, R"(- name: grpc\s*\n\s*port: (\S+))"), grpc);
  EXPECT_EQ(FirstGroup(service, R"(- name: grpc\s*\n\s*port: \S+\s*\n\s*targetPort: (\S+))"),
            "grpc");
  EXPECT_EQ(FirstGroup(service, R"(- name: metrics\s*\n\s*port: (\S+))"), metrics);
  EXPECT_EQ(
      FirstGroup(service, R"(- name: metrics\s*\n\s*port: \S+\s*\n\s*targetPort: (\S+))"),
      "metrics");
}

TEST(HelmChart, ConfigMapIsMountedAsADirectoryHoldingThePolicyFile) {
  const std::string deployment = RenderedReferences("deployment.yaml");
  // A subPath mount is pinned to the file it first saw and never gets updates.
  EXPECT_FALSE(std::regex_search(deployment, std::regex(R"((^|\n)\s*subPath\s*:)")))
      << "templates/deployment.yaml mounts something with subPath";
  EXPECT_EQ(FirstGroup(deployment, R"(- name: config\s*\n\s*(configMap):)"), "configMap")
      << "the volume named config must be the ConfigMap";
  const std::string mount_dir =
      FirstGroup(deployment, R"(- name: config\s*\n\s*mountPath: (\S+))");
  ASSERT_FALSE(mount_dir.empty()) << "no volumeMount named config";
  EXPECT_EQ(FirstGroup(deployment, R"(--policy=([^"\s]+))"), mount_dir + "/policy.yaml");
  EXPECT_EQ(FirstGroup(deployment, R"(--catalog=([^"\s]+))"), mount_dir + "/catalog.yaml");
  const std::string configmap = ChartFile("templates/configmap.yaml");
  EXPECT_THAT(configmap, ::testing::HasSubstr("policy.yaml: |"));
  EXPECT_THAT(configmap, ::testing::HasSubstr("catalog.yaml: |"));
}

TEST(HelmChart, PolicyChangesReloadInsteadOfRestartingPods) {
  const std::string deployment = ChartFile("templates/deployment.yaml");
  EXPECT_THAT(deployment, ::testing::Not(::testing::HasSubstr("checksum/")));
  EXPECT_THAT(deployment, ::testing::HasSubstr("--reload_interval={{ .Values.reloadInterval }}"));
}

TEST(HelmChart, TerminationGraceOutlastsTheServerShutdownGrace) {
  const std::string deployment = ChartFile("templates/deployment.yaml");
  EXPECT_THAT(deployment,
              ::testing::HasSubstr("--shutdown_grace={{ int .Values.shutdownGraceSeconds }}s"));
  EXPECT_THAT(deployment,
              ::testing::HasSubstr("terminationGracePeriodSeconds: {{ add (int "
                                   ".Values.shutdownGraceSeconds) (int "
                                   ".Values.terminationGraceMarginSeconds) }}"));
}

TEST(HelmChart, EveryTemplateAndTheReadmeExist) {
  for (const char* name :
       {"_helpers.tpl", "deployment.yaml", "service.yaml", "service-headless.yaml",
        "configmap.yaml", "poddisruptionbudget.yaml", "servicemonitor.yaml",
        "prometheusrule.yaml", "networkpolicy.yaml", "persistentvolumeclaim.yaml", "NOTES.txt"}) {
    EXPECT_FALSE(ChartFile(std::string("templates/") + name).empty()) << name;
  }
  EXPECT_FALSE(ChartFile("values.schema.json").empty());
  EXPECT_FALSE(ChartFile("files/prometheus-rules.yaml").empty());
  EXPECT_THAT(MustRead(std::string(WEIGHTPATH_SOURCE_DIR) + "/helm/README.md"),
              ::testing::HasSubstr("helm install"));
}

TEST(HelmChart, TlsMutualTlsAndPostgresValuesRenderTheMatchingFlags) {
  YAML::Node values = LoadValues();
  values["tls"]["secretName"] = "weightpath-tls";
  values["tls"]["clientCASecretName"] = "device-ca";
  values["store"]["type"] = "postgres";
  values["store"]["postgres"]["secretName"] = "weightpath-db";
  values["catalog"] = "default_model: m\n";
  absl::StatusOr<std::vector<std::string>> args =
      RenderContainerArgs(ChartFile("templates/deployment.yaml"), values);
  ASSERT_TRUE(args.ok()) << args.status();
  EXPECT_THAT(*args, ::testing::IsSupersetOf(
                         {"--tls_cert=/etc/weightpath/tls/tls.crt",
                          "--tls_key=/etc/weightpath/tls/tls.key",
                          "--client_ca=/etc/weightpath/client-ca/ca.crt",
                          "--catalog=/etc/weightpath/config/catalog.yaml",
                          "--store=$(WEIGHTPATH_STORE_URL)"}));
  EXPECT_THAT(*args, ::testing::Not(::testing::Contains("--insecure")));
  EXPECT_THAT(*args, ::testing::Not(::testing::Contains(::testing::StartsWith("--store=sqlite:"))));
  // The URL the kubelet expands must come from the Secret the values name.
  const std::string deployment = ChartFile("templates/deployment.yaml");
  EXPECT_EQ(FirstGroup(deployment, R"(- name: WEIGHTPATH_STORE_URL\s*\n\s*valueFrom:)"
                                   R"(\s*\n\s*secretKeyRef:\s*\n\s*name: \{\{ (\S+) \}\})"),
            ".Values.store.postgres.secretName");
}

// Replicas once all showed the node's host name in the audit trail; the
// pod's name, from the downward API, tells them apart.
TEST(HelmChart, ReplicaNameIsThePodNameFromTheDownwardApi) {
  YAML::Node values = LoadValues();
  values["insecure"] = true;
  absl::StatusOr<std::vector<std::string>> args =
      RenderContainerArgs(ChartFile("templates/deployment.yaml"), values);
  ASSERT_TRUE(args.ok()) << args.status();
  EXPECT_THAT(*args, ::testing::Contains("--replica_name=$(POD_NAME)"));
  const std::string deployment = ChartFile("templates/deployment.yaml");
  EXPECT_EQ(FirstGroup(deployment, R"(- name: POD_NAME\s*\n\s*valueFrom:)"
                                   R"(\s*\n\s*fieldRef:\s*\n\s*fieldPath: (\S+))"),
            "metadata.name");
}

TEST(HelmChart, StoreTypeNoneRendersStoreNone) {
  YAML::Node values = LoadValues();
  values["insecure"] = true;
  values["store"]["type"] = "none";
  absl::StatusOr<std::vector<std::string>> args =
      RenderContainerArgs(ChartFile("templates/deployment.yaml"), values);
  ASSERT_TRUE(args.ok()) << args.status();
  EXPECT_THAT(*args, ::testing::Contains("--store=none"));
  EXPECT_THAT(*args, ::testing::Not(::testing::Contains(::testing::StartsWith("--catalog"))))
      << "an empty catalog value leaves the server on its embedded demo catalog";
}

// A directory laid out the way the kubelet writes a ConfigMap volume: the
// visible policy.yaml links through ..data to a timestamped directory, and
// an update writes a new directory and renames a new ..data link over the
// old one, so the visible path itself never changes.
class ConfigMapVolume {
 public:
  explicit ConfigMapVolume(std::filesystem::path root) : root_(std::move(root)) {
    std::filesystem::create_directories(root_);
  }

  void Publish(const std::string& generation, const std::string& policy_text) {
    std::filesystem::create_directory(root_ / generation);
    std::ofstream(root_ / generation / "policy.yaml", std::ios::binary) << policy_text;
    std::filesystem::create_directory_symlink(generation, root_ / "..data_tmp");
    std::filesystem::rename(root_ / "..data_tmp", root_ / "..data");
    if (!std::filesystem::exists(root_ / "policy.yaml", ignored_)) {
      std::filesystem::create_symlink("..data/policy.yaml", root_ / "policy.yaml");
    }
  }

 private:
  std::filesystem::path root_;
  std::error_code ignored_;
};

std::string MakeTempDir() {
  std::string pattern = ::testing::TempDir() + "helm_chart_XXXXXX";
  const char* made = mkdtemp(pattern.data());
  EXPECT_NE(made, nullptr) << pattern;
  return pattern;
}

// The policy version the server reports serving, from /metrics.
std::string ServingPolicyVersion(const std::string& metrics_address) {
  absl::StatusOr<std::string> metrics = server::testing::HttpGet(metrics_address, "/metrics");
  if (!metrics.ok()) return "";
  return FirstGroup(*metrics, R"re(weightpath_policy_info\{[^}]*[{,]version="([^"]+)")re");
}

// Replaces `from` at the start of `text` by `to`.
std::string Rebased(const std::string& text, const std::string& from, const std::string& to) {
  return text.rfind(from, 0) == 0 ? to + text.substr(from.size()) : text;
}

TEST(HelmChart, ServerRunsOnTheChartsArgsAndReloadsOnAConfigMapSwap) {
  YAML::Node values = LoadValues();
  values["insecure"] = true;  // what `helm install --set insecure=true` would pass
  const std::string deployment_template = ChartFile("templates/deployment.yaml");
  absl::StatusOr<std::vector<std::string>> chart_args =
      RenderContainerArgs(deployment_template, values);
  ASSERT_TRUE(chart_args.ok()) << chart_args.status();
  EXPECT_THAT(*chart_args, ::testing::Contains("--insecure"));
  EXPECT_THAT(*chart_args, ::testing::Not(::testing::Contains(::testing::StartsWith("--tls_"))));

  // The pod's paths move under a temporary directory and its 0.0.0.0
  // listeners to loopback ports the kernel picks; everything else is passed
  // exactly as the chart renders it.
  const std::string deployment = RenderedReferences("deployment.yaml");
  const std::string config_mount =
      FirstGroup(deployment, R"(- name: config\s*\n\s*mountPath: (\S+))");
  const std::string data_mount = FirstGroup(deployment, R"(- name: data\s*\n\s*mountPath: (\S+))");
  ASSERT_FALSE(config_mount.empty());
  ASSERT_FALSE(data_mount.empty());
  const std::string root = MakeTempDir();
  std::filesystem::create_directories(root + "/data");
  ASSERT_FALSE(ServerDefaults().empty());
  std::vector<std::string> args;
  for (std::string arg : *chart_args) {
    const std::string name = arg.substr(2, arg.find('=') - 2);
    if (name == "listen" || name == "metrics_listen") arg = "--" + name + "=127.0.0.1:0";
    const size_t value_at = arg.find('=') + 1;
    if (value_at != 0) {
      std::string value = arg.substr(value_at);
      value = Rebased(value, config_mount, root + "/config");
      value = Rebased(value, "sqlite:" + data_mount, "sqlite:" + root + "/data");
      arg = arg.substr(0, value_at) + value;
    }
    args.push_back(arg);
  }

  const std::string bundled_policy = ChartFile("files/default_policy.yaml");
  ConfigMapVolume volume(root + "/config");
  volume.Publish("..2026_11_30_00_00_00.000000001", bundled_policy);

  absl::StatusOr<std::unique_ptr<server::testing::ServerProcess>> started =
      server::testing::ServerProcess::Start(args);
  ASSERT_TRUE(started.ok()) << started.status() << "\nargs: " << absl::StrJoin(args, " ");
  server::testing::ServerProcess* server = started->get();
  const std::string first_version = ServingPolicyVersion(server->metrics_address());
  ASSERT_FALSE(first_version.empty()) << "no weightpath_policy_info on /metrics";

  // An edit of the ConfigMap as the kubelet delivers it.
  volume.Publish("..2026_11_30_00_01_00.000000002",
                 bundled_policy + "# edited through the ConfigMap\n");
  std::string version = first_version;
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  while (version == first_version && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(100));
    version = ServingPolicyVersion(server->metrics_address());
  }
  EXPECT_NE(version, first_version) << "the server never picked up the swapped ConfigMap";
  absl::StatusOr<std::string> metrics =
      server::testing::HttpGet(server->metrics_address(), "/metrics");
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  EXPECT_EQ(FirstGroup(*metrics, R"(weightpath_policy_reloads_total\{result="success"\} (\S+))"),
            "1");
  EXPECT_EQ(FirstGroup(*metrics, R"(weightpath_policy_reloads_total\{result="error"\} (\S+))"),
            "0");
  server->Signal(SIGTERM);
  EXPECT_EQ(server->WaitForExit(absl::Seconds(60)).exit_code, 0) << "SIGTERM should drain and exit 0";
  std::filesystem::remove_all(root);
}

}  // namespace
}  // namespace weightpath::helm_test
