#!/usr/bin/python3
"""weightpath-server as a Python user meets it: Debian's python3-grpcio and
python3-protobuf, message classes from plain `protoc --python_out`, calls
through channel.unary_unary / stream_stream. Every answer is compared field by
field, in protobuf's JSON mapping, with what weightpathctl (C++) prints for
the same request; the engine-harness calls run examples/python itself.

Run by CTest (tests/interop/CMakeLists.txt), which sets WEIGHTPATH_SERVER_BINARY,
WEIGHTPATH_CTL_BINARY, WEIGHTPATH_SOURCE_DIR and WEIGHTPATH_PYTHON_PROTO_DIR.
"""

import importlib.util
import json
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.request


def _required_environment(name):
    value = os.environ.get(name)
    if not value:
        # A suite run without its inputs must fail, never pass by doing nothing.
        sys.exit(f"{name} is not set (run this suite through ctest)")
    return value


SERVER_BINARY = _required_environment("WEIGHTPATH_SERVER_BINARY")
CTL_BINARY = _required_environment("WEIGHTPATH_CTL_BINARY")
SOURCE_DIR = _required_environment("WEIGHTPATH_SOURCE_DIR")
PROTO_DIR = _required_environment("WEIGHTPATH_PYTHON_PROTO_DIR")
PROFILES_DIR = os.path.join(SOURCE_DIR, "examples", "profiles")
EXAMPLE_CLIENT = os.path.join(SOURCE_DIR, "examples", "python", "weightpath_client.py")

sys.path.insert(0, PROTO_DIR)
sys.path.insert(0, os.path.dirname(EXAMPLE_CLIENT))

try:
    import grpc  # python3-grpcio
    from google.protobuf import descriptor_pb2  # python3-protobuf
    from google.protobuf import descriptor_pool
    from google.protobuf import json_format
    from google.protobuf import message_factory
    from google.protobuf import timestamp_pb2
except ImportError as missing:
    sys.exit(f"{sys.executable}: {missing}; scripts/install-deps installs Debian's "
             "python3-grpcio and python3-protobuf")

import weightpath_client  # noqa: E402  (examples/python)
from weightpath.v1 import fleet_pb2  # noqa: E402
from weightpath.v1 import rollout_pb2  # noqa: E402
from weightpath.v1 import weightpath_pb2 as wp  # noqa: E402


def _load_generated(relative_path):
    """A generated module whose import path would be taken by the grpc package.

    protoc names modules after the .proto path, so grpc/health/v1/health.proto
    becomes grpc.health.v1.health_pb2, inside python3-grpcio's own `grpc`
    package. Loaded from its file under a name of its own instead.
    """
    name = "interop_" + relative_path[:-len(".py")].replace("/", "_")
    spec = importlib.util.spec_from_file_location(name, os.path.join(PROTO_DIR, relative_path))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


health_pb2 = _load_generated("grpc/health/v1/health_pb2.py")
# google.rpc.Status and its details, the body of the grpc-status-details-bin
# trailer (proto/google/rpc/).
rpc_status_pb2 = _load_generated("google/rpc/status_pb2.py")
error_details_pb2 = _load_generated("google/rpc/error_details_pb2.py")
REFLECTION = {
    "v1": _load_generated("grpc/reflection/v1/reflection_pb2.py"),
    "v1alpha": _load_generated("grpc/reflection/v1alpha/reflection_pb2.py"),
}

SERVICES = ["weightpath.v1.WeightPath", "weightpath.v1.FleetAdmin", "grpc.health.v1.Health"]
PRIORITIES = [None, "speed", "fidelity"]  # None: the request leaves it unset
ADMIN_TOKEN = "interop-python-operator-token"
VIEWER_TOKEN = "interop-python-viewer-token"
START_TIMEOUT_S = 30  # a loaded 2-core CI machine can be slow to start a server
CALL_TIMEOUT_S = 10


class ServerProcess:
    """weightpath-server on ports it picks (127.0.0.1:0), read from its start-up line."""

    def __init__(self, work_dir, extra_args):
        self.log_path = os.path.join(work_dir, "server.log")
        with open(self.log_path, "wb") as log:
            # The suite's requests stand for single-file agents: the embedded
            # demo's directory builds would be refused to them.
            catalog = ([] if any(arg.startswith("--catalog=") for arg in extra_args) else
                       ["--catalog=" + os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                    "..", "data", "single_file_catalog.yaml")])
            self.process = subprocess.Popen(
                [SERVER_BINARY, "--listen=127.0.0.1:0", "--metrics_listen=127.0.0.1:0",
                 *catalog, *extra_args],
                stdout=subprocess.PIPE, stderr=log, text=True)
        lines = queue.Queue()
        threading.Thread(target=lambda: [lines.put(line) for line in self.process.stdout],
                         daemon=True).start()
        deadline = time.monotonic() + START_TIMEOUT_S
        self.address = None
        self.metrics_address = None
        while self.address is None:
            try:
                line = lines.get(timeout=0.2)
            except queue.Empty:
                if self.process.poll() is None and time.monotonic() < deadline:
                    continue
                self.stop()
                raise RuntimeError(f"weightpath-server did not start (exit {self.process.poll()})"
                                   f"; log:\n{self.log()}")
            for field in line.split():
                if field.startswith("grpc="):
                    self.address = field[len("grpc="):]
                elif field.startswith("metrics="):
                    self.metrics_address = field[len("metrics="):]

    def log(self):
        with open(self.log_path, encoding="utf-8", errors="replace") as log:
            return log.read()

    def stop(self):
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


server = None
work_dir = None
channel = None


def setUpModule():
    global server, work_dir, channel
    work_dir = tempfile.mkdtemp(prefix="wp-interop-python-")
    token_file = os.path.join(work_dir, "admin-token")
    with open(os.open(token_file, os.O_WRONLY | os.O_CREAT, 0o600), "w") as token:
        token.write(ADMIN_TOKEN + "\n")
    viewer_token_file = os.path.join(work_dir, "viewer-token")
    with open(os.open(viewer_token_file, os.O_WRONLY | os.O_CREAT, 0o600), "w") as token:
        token.write(VIEWER_TOKEN + "\n")
    config_file = os.path.join(work_dir, "server.yaml")
    with open(config_file, "w", encoding="utf-8") as config:
        config.write("operators:\n"
                     f"  - {{name: interop-viewer, role: viewer, token_file: {viewer_token_file}}}\n")
    server = ServerProcess(work_dir, [f"--store=sqlite:{os.path.join(work_dir, 'fleet.db')}",
                                      f"--admin_token_file={token_file}",
                                      f"--config={config_file}"])
    channel = grpc.insecure_channel(server.address)


def tearDownModule():
    if channel is not None:
        channel.close()
    if server is not None:
        server.stop()
    if work_dir is not None:
        shutil.rmtree(work_dir, ignore_errors=True)


def unary(path, response_class, request, metadata=None):
    method = channel.unary_unary(path, request_serializer=lambda m: m.SerializeToString(),
                                 response_deserializer=response_class.FromString)
    return method(request, timeout=CALL_TIMEOUT_S, metadata=metadata)


def admin_metadata(token=ADMIN_TOKEN):
    return [("authorization", f"Bearer {token}")]


def retry(attempt, codes, budget_s=10.0):
    """attempt() until it succeeds or fails with a code outside `codes`."""
    give_up = time.monotonic() + budget_s
    while True:
        try:
            return attempt()
        except grpc.RpcError as error:
            if error.code() not in codes or time.monotonic() > give_up:
                raise
            time.sleep(0.1)


def violated_fields(error):
    """The fields a refusal's google.rpc.BadRequest names, decoded from the
    grpc-status-details-bin trailer by python3-protobuf alone."""
    details = [value for key, value in error.trailing_metadata()
               if key == "grpc-status-details-bin"]
    if not details:
        return []
    status = rpc_status_pb2.Status.FromString(details[0])
    fields = []
    for detail in status.details:
        if detail.Is(error_details_pb2.BadRequest.DESCRIPTOR):
            bad_request = error_details_pb2.BadRequest()
            detail.Unpack(bad_request)
            fields += [violation.field for violation in bad_request.field_violations]
    return fields


def ctl_resolve(profile, priority, device_id):
    args = [CTL_BINARY, "resolve", "--server", server.address, "--device-id", device_id,
            "--profile", os.path.join(PROFILES_DIR, profile), "-o", "json"]
    if priority:
        args += ["--priority", priority]
    done = subprocess.run(args, capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        raise AssertionError(f"{' '.join(args)} failed ({done.returncode}): {done.stderr}")
    return json.loads(done.stdout)


def example_profiles():
    return sorted(name for name in os.listdir(PROFILES_DIR) if name.endswith(".json"))


def resolve_request(profile, priority, device_id):
    with open(os.path.join(PROFILES_DIR, profile), encoding="utf-8") as text:
        return weightpath_client.resolve_request(text.read(), device_id, priority or "")


def proto_json(message):
    """Protobuf's JSON mapping as weightpathctl prints it: proto field names,
    primitive, repeated and map fields always printed."""
    return json_format.MessageToDict(message, preserving_proto_field_name=True,
                                     including_default_value_fields=True)


def differences(expected, actual, where=""):
    """Every path where two JSON values differ, as 'a.b[2].c: expected X, got Y'."""
    if isinstance(expected, dict) and isinstance(actual, dict):
        found = []
        for key in sorted(set(expected) | set(actual)):
            child = f"{where}.{key}" if where else key
            if key not in expected or key not in actual:
                found.append(f"{child}: expected {expected.get(key, '(absent)')!r}, "
                             f"got {actual.get(key, '(absent)')!r}")
            else:
                found += differences(expected[key], actual[key], child)
        return found
    if isinstance(expected, list) and isinstance(actual, list):
        found = [] if len(expected) == len(actual) else [
            f"{where}: expected {len(expected)} items, got {len(actual)}"]
        for i, (a, b) in enumerate(zip(expected, actual)):
            found += differences(a, b, f"{where}[{i}]")
        return found
    # JSON has one number type (16 and 16.0 are the same value); booleans are
    # not numbers, although Python compares True == 1.
    if isinstance(expected, bool) != isinstance(actual, bool) or expected != actual:
        return [f"{where or '(top)'}: expected {expected!r}, got {actual!r}"]
    return []


def message_class(descriptor):
    """The message class of a descriptor from a pool built at run time."""
    if hasattr(message_factory, "GetMessageClass"):  # protobuf >= 4.22
        return message_factory.GetMessageClass(descriptor)
    return message_factory.MessageFactory(descriptor.file.pool).GetPrototype(descriptor)


class ResolveTest(unittest.TestCase):
    def test_every_example_profile_at_every_priority_matches_weightpathctl(self):
        for profile in example_profiles():
            for priority in PRIORITIES:
                with self.subTest(profile=profile, priority=priority or "unset"):
                    device_id = "interop-python-" + profile[:-len(".json")]
                    expected = ctl_resolve(profile, priority, device_id)
                    response = unary("/weightpath.v1.WeightPath/ResolveWeightPath",
                                     wp.ResolveWeightPathResponse,
                                     resolve_request(profile, priority, device_id))
                    self.assertEqual(differences(expected, proto_json(response)), [])

    def test_a_re_resolve_with_the_held_etag_is_answered_unchanged(self):
        request = resolve_request("intel-sapphire-rapids.json", "speed", "interop-python-etag")
        path = "/weightpath.v1.WeightPath/ResolveWeightPath"
        full = unary(path, wp.ResolveWeightPathResponse, request)
        self.assertRegex(full.decision_etag, "^[0-9a-f]{32}$")
        self.assertFalse(full.unchanged)
        request.known_decision_etag = full.decision_etag
        again = unary(path, wp.ResolveWeightPathResponse, request)
        self.assertTrue(again.unchanged)
        self.assertEqual(again.decision_etag, full.decision_etag)
        self.assertEqual(again.policy_version, full.policy_version)
        self.assertEqual(again.resolve_interval_seconds, full.resolve_interval_seconds)
        self.assertFalse(again.HasField("weight_path"))
        self.assertLessEqual(again.ByteSize(), 120)
        request.known_decision_etag = "0" * 32
        stale = unary(path, wp.ResolveWeightPathResponse, request)
        self.assertFalse(stale.unchanged)
        self.assertEqual(stale.weight_path.name, full.weight_path.name)

    def test_bad_requests_get_their_code_and_the_field_named(self):
        def good():
            return resolve_request("intel-sapphire-rapids.json", "speed", "interop-python-errors")

        empty_id = good()
        empty_id.device_id = ""
        long_id = good()
        long_id.device_id = "d" * 257
        riscv = good()
        riscv.profile.Clear()
        riscv.profile.arch = "riscv64"
        riscv.profile.accelerator = "none"
        unknown_model = good()
        unknown_model.model = "no-such-model"
        huge = good()
        huge.profile.cpu_model = "x" * (70 * 1024)
        cases = [
            ("empty device_id", empty_id, grpc.StatusCode.INVALID_ARGUMENT, "device_id"),
            ("oversized device_id", long_id, grpc.StatusCode.INVALID_ARGUMENT, "device_id"),
            ("unsupported arch", riscv, grpc.StatusCode.INVALID_ARGUMENT, "profile.arch"),
            ("unknown model", unknown_model, grpc.StatusCode.NOT_FOUND, "model"),
            # Refused by the transport before any field is read: the limit is named.
            ("request over 64 KiB", huge, grpc.StatusCode.RESOURCE_EXHAUSTED, "65536"),
        ]
        for name, request, code, named in cases:
            with self.subTest(name):
                with self.assertRaises(grpc.RpcError) as refused:
                    unary("/weightpath.v1.WeightPath/ResolveWeightPath",
                          wp.ResolveWeightPathResponse, request)
                self.assertEqual(refused.exception.code(), code, refused.exception.details())
                self.assertIn(named, refused.exception.details())

    def test_the_bad_field_is_a_bad_request_detail_in_the_status_trailer(self):
        """grpc-status-details-bin decoded as google.rpc.Status, read by no weightpath code."""
        def good():
            return resolve_request("intel-sapphire-rapids.json", "speed", "interop-python-details")

        empty_id = good()
        empty_id.device_id = ""
        riscv = good()
        riscv.profile.Clear()
        riscv.profile.arch = "riscv64"
        riscv.profile.accelerator = "none"
        long_flag = good()
        long_flag.profile.cpu_flags.append("f" * 300)
        bad_priority = good()
        bad_priority.priority = 99
        cases = [
            ("empty device_id", empty_id, "device_id"),
            ("unsupported arch", riscv, "profile.arch"),
            ("oversized cpu flag", long_flag, f"profile.cpu_flags[{len(long_flag.profile.cpu_flags) - 1}]"),
            ("unknown priority", bad_priority, "priority"),
        ]
        for name, request, field in cases:
            with self.subTest(name):
                with self.assertRaises(grpc.RpcError) as refused:
                    unary("/weightpath.v1.WeightPath/ResolveWeightPath",
                          wp.ResolveWeightPathResponse, request)
                error = refused.exception
                self.assertEqual(error.code(), grpc.StatusCode.INVALID_ARGUMENT, error.details())
                details = [value for key, value in error.trailing_metadata()
                           if key == "grpc-status-details-bin"]
                self.assertEqual(len(details), 1, error.trailing_metadata())
                status = rpc_status_pb2.Status.FromString(details[0])
                self.assertEqual(status.code, grpc.StatusCode.INVALID_ARGUMENT.value[0])
                self.assertEqual(status.message, error.details())
                self.assertEqual(len(status.details), 1)
                self.assertTrue(status.details[0].Is(error_details_pb2.BadRequest.DESCRIPTOR))
                bad_request = error_details_pb2.BadRequest()
                status.details[0].Unpack(bad_request)
                self.assertEqual([v.field for v in bad_request.field_violations], [field])
                self.assertEqual(bad_request.field_violations[0].description, error.details())

        # A refusal that names no request field carries no details.
        unknown_model = good()
        unknown_model.model = "no-such-model"
        with self.assertRaises(grpc.RpcError) as refused:
            unary("/weightpath.v1.WeightPath/ResolveWeightPath",
                  wp.ResolveWeightPathResponse, unknown_model)
        self.assertEqual(refused.exception.code(), grpc.StatusCode.NOT_FOUND)
        self.assertNotIn("grpc-status-details-bin",
                         [key for key, _ in refused.exception.trailing_metadata()])


class HealthTest(unittest.TestCase):
    def test_check_reports_serving(self):
        for service in ["", "weightpath.v1.WeightPath", "weightpath.v1.FleetAdmin"]:
            with self.subTest(service=service):
                response = unary("/grpc.health.v1.Health/Check", health_pb2.HealthCheckResponse,
                                 health_pb2.HealthCheckRequest(service=service))
                self.assertEqual(response.status, health_pb2.HealthCheckResponse.SERVING)


class ReflectionTest(unittest.TestCase):
    """List, describe every method of every service, and call, with nothing
    but what reflection sent: the way grpcurl works without the .proto files."""

    def ask(self, version, requests):
        reflection = REFLECTION[version]
        method = channel.stream_stream(
            f"/grpc.reflection.{version}.ServerReflection/ServerReflectionInfo",
            request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=reflection.ServerReflectionResponse.FromString)
        return list(method(iter(requests), timeout=CALL_TIMEOUT_S))

    def pool_for(self, answer):
        """A DescriptorPool of the files one answer carried, each added after
        its imports. Taken once by name: gRPC 1.51's v1alpha service repeats,
        in every later answer on a stream, the files of the earlier ones."""
        self.assertEqual(answer.WhichOneof("message_response"), "file_descriptor_response",
                         answer.error_response.error_message)
        files = {}
        for serialized in answer.file_descriptor_response.file_descriptor_proto:
            file = descriptor_pb2.FileDescriptorProto.FromString(serialized)
            files.setdefault(file.name, file)
        pool = descriptor_pool.DescriptorPool()
        added = set()

        def add(name):
            if name in added:
                return
            self.assertIn(name, files, "reflection left out an imported file")
            for dependency in files[name].dependency:
                add(dependency)
            pool.AddSerializedFile(files[name].SerializeToString())
            added.add(name)

        for name in files:
            add(name)
        return pool

    def check_version(self, version):
        reflection = REFLECTION[version]
        [listing] = self.ask(version, [reflection.ServerReflectionRequest(list_services="")])
        listed = [service.name for service in listing.list_services_response.service]
        for service in SERVICES + [f"grpc.reflection.{version}.ServerReflection"]:
            self.assertIn(service, listed)

        answers = self.ask(version, [reflection.ServerReflectionRequest(
            file_containing_symbol=name) for name in listed])
        pools = {}
        for name, answer in zip(listed, answers):
            pool = self.pool_for(answer)
            service = pool.FindServiceByName(name)
            self.assertGreater(len(service.methods), 0, name)
            for method in service.methods:
                # Describing a method: its request and response messages,
                # down to every field's type.
                for message in (method.input_type, method.output_type):
                    self.assertIsNotNone(message_class(message), method.full_name)
                    for field in message.fields:
                        self.assertTrue(field.type, field.full_name)
            pools[name] = pool

        def reflected_call(service, method_name, fill, metadata=None):
            pool = pools[service]
            method = pool.FindServiceByName(service).methods_by_name[method_name]
            request = message_class(method.input_type)()
            json_format.ParseDict(fill, request, ignore_unknown_fields=True)
            call = channel.unary_unary(
                f"/{service}/{method_name}", request_serializer=lambda m: m.SerializeToString(),
                response_deserializer=message_class(method.output_type).FromString)
            return call(request, timeout=CALL_TIMEOUT_S, metadata=metadata)

        device_id = f"interop-python-reflected-{version}"
        expected = ctl_resolve("raspberry-pi-5.json", None, device_id)
        with open(os.path.join(PROFILES_DIR, "raspberry-pi-5.json"), encoding="utf-8") as text:
            profile = json.load(text)
        resolved = reflected_call("weightpath.v1.WeightPath", "ResolveWeightPath",
                                  {"device_id": device_id, "profile": profile})
        self.assertEqual(differences(expected, proto_json(resolved)), [])
        health = reflected_call("grpc.health.v1.Health", "Check", {"service": ""})
        self.assertEqual(health.status, 1)  # SERVING, by number: no generated enum here
        matrix = reflected_call("weightpath.v1.FleetAdmin", "GetVerificationMatrix", {},
                                metadata=admin_metadata())
        self.assertEqual(matrix.policy_version, expected["policy_version"])

    def test_v1(self):
        self.check_version("v1")

    def test_v1alpha(self):
        self.check_version("v1alpha")


class FleetAdminTest(unittest.TestCase):
    def summary(self, metadata):
        return unary("/weightpath.v1.FleetAdmin/FleetSummary", fleet_pb2.FleetSummaryResponse,
                     fleet_pb2.FleetSummaryRequest(), metadata=metadata)

    def test_needs_the_operator_bearer_token(self):
        for metadata, code in [(None, grpc.StatusCode.UNAUTHENTICATED),
                               (admin_metadata("not-the-token"),
                                grpc.StatusCode.PERMISSION_DENIED)]:
            with self.subTest(code=code.name):
                with self.assertRaises(grpc.RpcError) as refused:
                    self.summary(metadata)
                self.assertEqual(refused.exception.code(), code)

    def test_lists_a_device_that_resolved(self):
        device_id = "interop-python-admin"
        unary("/weightpath.v1.WeightPath/ResolveWeightPath", wp.ResolveWeightPathResponse,
              resolve_request("aws-graviton3.json", None, device_id))
        # The registry is written behind the resolve, within about a second.
        device = retry(lambda: unary("/weightpath.v1.FleetAdmin/GetDevice", fleet_pb2.Device,
                                     fleet_pb2.GetDeviceRequest(device_id=device_id),
                                     metadata=admin_metadata()),
                       {grpc.StatusCode.NOT_FOUND})
        self.assertEqual(device.hardware_class, "arm64_cpu")
        self.assertGreaterEqual(self.summary(admin_metadata()).total_devices, 1)

    def test_a_dry_run_is_answered_as_a_resolve_and_never_registered(self):
        """dry_run (field 8) set by a Python client: the server answers exactly as it
        answers the device, and the registry never lists it."""
        dry_id = "interop-python-dry-run"
        request = resolve_request("aws-graviton3.json", None, dry_id)
        request.dry_run = True
        dry = unary("/weightpath.v1.WeightPath/ResolveWeightPath", wp.ResolveWeightPathResponse,
                    request)
        # A real resolve after it: once that one is in the registry, so would
        # the dry run be had it been recorded.
        marker_id = "interop-python-after-the-dry-run"
        unary("/weightpath.v1.WeightPath/ResolveWeightPath", wp.ResolveWeightPathResponse,
              resolve_request("aws-graviton3.json", None, marker_id))
        retry(lambda: unary("/weightpath.v1.FleetAdmin/GetDevice", fleet_pb2.Device,
                            fleet_pb2.GetDeviceRequest(device_id=marker_id),
                            metadata=admin_metadata()),
              {grpc.StatusCode.NOT_FOUND})
        with self.assertRaises(grpc.RpcError) as missing:
            unary("/weightpath.v1.FleetAdmin/GetDevice", fleet_pb2.Device,
                  fleet_pb2.GetDeviceRequest(device_id=dry_id), metadata=admin_metadata())
        self.assertEqual(missing.exception.code(), grpc.StatusCode.NOT_FOUND)
        listed = unary("/weightpath.v1.FleetAdmin/ListDevices", fleet_pb2.ListDevicesResponse,
                       fleet_pb2.ListDevicesRequest(), metadata=admin_metadata())
        self.assertNotIn(dry_id, [device.device_id for device in listed.devices])
        # The same device resolving for real gets the same answer, byte for byte.
        request.dry_run = False
        real = unary("/weightpath.v1.WeightPath/ResolveWeightPath", wp.ResolveWeightPathResponse,
                     request)
        self.assertEqual(dry.SerializeToString(deterministic=True),
                         real.SerializeToString(deterministic=True))
        self.assertEqual(differences(proto_json(real), proto_json(dry)), [])

    def test_a_device_that_runs_another_build_is_listed_as_drifting(self):
        """ReportOutcomeRequest.running (field 16) sent by a Python client: the registry
        keeps it beside the assignment, ListDevices(drifted_only, field 7) lists the
        device with the drift's reason, and a bad digest is refused naming its field."""
        device_id = "interop-python-drift"
        answer = unary("/weightpath.v1.WeightPath/ResolveWeightPath", wp.ResolveWeightPathResponse,
                       resolve_request("aws-graviton3.json", None, device_id))
        self.assertGreater(answer.failed_build_retry_seconds, 0)
        retry(lambda: unary("/weightpath.v1.FleetAdmin/GetDevice", fleet_pb2.Device,
                            fleet_pb2.GetDeviceRequest(device_id=device_id),
                            metadata=admin_metadata()),
              {grpc.StatusCode.NOT_FOUND})
        report = wp.ReportOutcomeRequest(
            idempotency_key="interop-python-drift-1", device_id=device_id,
            outcome=wp.OUTCOME_ROLLED_BACK, path=answer.weight_path.name,
            running=wp.RunningBuild(path="an-older-build", model=answer.model,
                                    source=wp.BOOT_SOURCE_SERVER))
        unary("/weightpath.v1.WeightPath/ReportOutcome", wp.ReportOutcomeResponse, report)
        listed = unary("/weightpath.v1.FleetAdmin/ListDevices", fleet_pb2.ListDevicesResponse,
                       fleet_pb2.ListDevicesRequest(drifted_only=True), metadata=admin_metadata())
        drifting = {device.device_id: device for device in listed.devices}
        self.assertIn(device_id, drifting)
        self.assertEqual(drifting[device_id].running.path, "an-older-build")
        self.assertEqual(drifting[device_id].drift.reason, "rolled_back")
        self.assertEqual(drifting[device_id].path, answer.weight_path.name)

        report.idempotency_key = "interop-python-drift-2"
        report.running.artifact_sha256 = "NOT-A-DIGEST"
        with self.assertRaises(grpc.RpcError) as refused:
            unary("/weightpath.v1.WeightPath/ReportOutcome", wp.ReportOutcomeResponse, report)
        self.assertEqual(refused.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("running.artifact_sha256", refused.exception.details())

    def test_an_unknown_hardware_class_is_refused_naming_the_field(self):
        """ListDevices would match nothing for a misspelt class; it says so instead."""
        with self.assertRaises(grpc.RpcError) as refused:
            unary("/weightpath.v1.FleetAdmin/ListDevices", fleet_pb2.ListDevicesResponse,
                  fleet_pb2.ListDevicesRequest(hardware_class="arm64"),
                  metadata=admin_metadata())
        error = refused.exception
        self.assertEqual(error.code(), grpc.StatusCode.INVALID_ARGUMENT, error.details())
        self.assertIn("hardware_class 'arm64'", error.details())
        details = [value for key, value in error.trailing_metadata()
                   if key == "grpc-status-details-bin"]
        self.assertEqual(len(details), 1, error.trailing_metadata())
        bad_request = error_details_pb2.BadRequest()
        rpc_status_pb2.Status.FromString(details[0]).details[0].Unpack(bad_request)
        self.assertEqual([v.field for v in bad_request.field_violations], ["hardware_class"])
        listed = unary("/weightpath.v1.FleetAdmin/ListDevices", fleet_pb2.ListDevicesResponse,
                       fleet_pb2.ListDevicesRequest(hardware_class="arm64_cpu"),
                       metadata=admin_metadata())
        self.assertTrue(all(d.hardware_class == "arm64_cpu" for d in listed.devices))

    def test_a_viewer_reads_and_is_refused_a_rollout_action_naming_the_roles(self):
        viewer = admin_metadata(VIEWER_TOKEN)
        self.summary(viewer)
        with self.assertRaises(grpc.RpcError) as refused:
            unary("/weightpath.v1.FleetAdmin/PauseRollout", rollout_pb2.Rollout,
                  rollout_pb2.RolloutControlRequest(id="any-rollout", reason="interop"),
                  metadata=viewer)
        error = refused.exception
        self.assertEqual(error.code(), grpc.StatusCode.PERMISSION_DENIED, error.details())
        for named in ("FleetAdmin.PauseRollout", "needs role operator", "interop-viewer",
                      "has role viewer"):
            self.assertIn(named, error.details())
        # The admin passes admission: the rollout is simply not there.
        with self.assertRaises(grpc.RpcError) as missing:
            unary("/weightpath.v1.FleetAdmin/PauseRollout", rollout_pb2.Rollout,
                  rollout_pb2.RolloutControlRequest(id="any-rollout", reason="interop"),
                  metadata=admin_metadata())
        self.assertEqual(missing.exception.code(), grpc.StatusCode.NOT_FOUND,
                         missing.exception.details())


class AuditTrailTest(unittest.TestCase):
    """ListAuditEvents read by a Python client, as a viewer."""

    def list(self, **fields):
        return unary("/weightpath.v1.FleetAdmin/ListAuditEvents", fleet_pb2.ListAuditEventsResponse,
                     fleet_pb2.ListAuditEventsRequest(**fields),
                     metadata=admin_metadata(VIEWER_TOKEN))

    def test_a_refused_rollout_action_is_the_newest_event_with_who_and_the_answer(self):
        with self.assertRaises(grpc.RpcError):
            unary("/weightpath.v1.FleetAdmin/AdvanceRollout", rollout_pb2.Rollout,
                  rollout_pb2.RolloutControlRequest(id="interop-audited", reason="line\nbreak"),
                  metadata=admin_metadata())
        newest = self.list(limit=1)
        self.assertEqual(len(newest.events), 1)
        event = newest.events[0]
        self.assertEqual((event.rpc, event.target, event.result, event.identity, event.role),
                         ("AdvanceRollout", "interop-audited", "NOT_FOUND", "admin", "admin"))
        self.assertIn("interop-audited", event.message)
        self.assertNotIn("\n", event.request_summary)
        self.assertTrue(event.replica)
        self.assertGreater(event.time.seconds, 0)
        # Oldest first: the same event is the last of the whole list.
        everything = self.list()
        self.assertEqual(everything.events[-1], event)
        self.assertEqual(newest.truncated, len(everything.events) > 1)
        later = self.list(since=timestamp_pb2.Timestamp(seconds=event.time.seconds + 3600))
        self.assertEqual(len(later.events), 0)

    def test_pages_walk_back_by_next_page_token_and_a_forged_token_is_refused(self):
        for reason in ("first", "second"):
            with self.assertRaises(grpc.RpcError):
                unary("/weightpath.v1.FleetAdmin/AdvanceRollout", rollout_pb2.Rollout,
                      rollout_pb2.RolloutControlRequest(id="interop-paged", reason=reason),
                      metadata=admin_metadata())
        everything = self.list()
        newest = self.list(limit=1)
        self.assertTrue(newest.truncated)
        self.assertTrue(newest.next_page_token)
        before = self.list(limit=1, page_token=newest.next_page_token)
        self.assertEqual(list(before.events), [everything.events[-2]])
        with self.assertRaises(grpc.RpcError) as forged:
            self.list(page_token="not-a-token")
        error = forged.exception
        self.assertEqual(error.code(), grpc.StatusCode.INVALID_ARGUMENT, error.details())
        self.assertEqual(violated_fields(error), ["page_token"])

    def test_a_limit_above_10000_is_refused_naming_limit(self):
        with self.assertRaises(grpc.RpcError) as refused:
            self.list(limit=10001)
        error = refused.exception
        self.assertEqual(error.code(), grpc.StatusCode.INVALID_ARGUMENT, error.details())
        self.assertIn("10000", error.details())
        self.assertEqual(violated_fields(error), ["limit"])


class RolloutLifecycleTest(unittest.TestCase):
    """UpdateRollout and DeleteRollout as a Python client calls them."""

    ROLLOUT_ID = "interop-python-rollout"

    def test_a_5000_byte_rollout_id_is_refused_naming_it_within_the_metadata_limit(self):
        # The refusal used to quote the whole id: grpcio's 8 KiB metadata
        # limit turned it into "received initial metadata size exceeds limit".
        with self.assertRaises(grpc.RpcError) as refused:
            unary("/weightpath.v1.FleetAdmin/CreateRollout", rollout_pb2.Rollout,
                  rollout_pb2.CreateRolloutRequest(rollout=rollout_pb2.Rollout(id="a" * 5000)),
                  metadata=admin_metadata())
        error = refused.exception
        self.assertEqual(error.code(), grpc.StatusCode.INVALID_ARGUMENT, error.details())
        self.assertIn("5000 bytes long", error.details())
        self.assertLess(len(error.details()), 2100)
        self.assertEqual(violated_fields(error), ["rollout.id"])

    def call(self, method, response_class, request, metadata=None):
        return unary(f"/weightpath.v1.FleetAdmin/{method}", response_class, request,
                     metadata=admin_metadata() if metadata is None else metadata)

    def refused(self, method, response_class, request, metadata=None):
        with self.assertRaises(grpc.RpcError) as refused:
            self.call(method, response_class, request, metadata)
        return refused.exception

    def spec(self):
        spec = rollout_pb2.Rollout(id=self.ROLLOUT_ID, description="python interop")
        spec.selector.match_labels["site"] = "interop-python"
        spec.action.set_priority = wp.PRIORITY_FIDELITY
        for percent in (10, 100):
            spec.stages.add(percent=percent, min_bake_seconds=3600, min_reporting_devices=1,
                            report_timeout_seconds=3600)
        return spec

    def test_update_replaces_the_spec_and_delete_frees_the_id_of_a_finished_rollout(self):
        spec = self.spec()
        self.call("CreateRollout", rollout_pb2.Rollout, rollout_pb2.CreateRolloutRequest(rollout=spec))
        spec.description = "stricter engine gate"
        spec.gates.max_engine_failure_delta = 0.05
        updated = self.call("UpdateRollout", rollout_pb2.Rollout,
                            rollout_pb2.UpdateRolloutRequest(rollout=spec))
        self.assertEqual(updated.description, "stricter engine gate")
        self.assertAlmostEqual(updated.gates.max_engine_failure_delta, 0.05)
        self.assertEqual(updated.state, rollout_pb2.ROLLOUT_STATE_PROGRESSING)
        read = self.call("GetRollout", rollout_pb2.Rollout, rollout_pb2.GetRolloutRequest(id=self.ROLLOUT_ID))
        self.assertEqual(read.description, "stricter engine gate")

        claims_state = rollout_pb2.Rollout()
        claims_state.CopyFrom(spec)
        claims_state.state = rollout_pb2.ROLLOUT_STATE_COMPLETED
        new_selector = self.spec()
        new_selector.selector.match_labels["site"] = "elsewhere"
        missing = self.spec()
        missing.id = "interop-python-missing"
        for name, request, code, field in [
                ("a server-set field", claims_state, grpc.StatusCode.INVALID_ARGUMENT, "rollout.state"),
                ("a new selector", new_selector, grpc.StatusCode.FAILED_PRECONDITION,
                 "rollout.selector"),
                ("an unknown id", missing, grpc.StatusCode.NOT_FOUND, "rollout.id")]:
            with self.subTest(name):
                error = self.refused("UpdateRollout", rollout_pb2.Rollout,
                                     rollout_pb2.UpdateRolloutRequest(rollout=request))
                self.assertEqual(error.code(), code, error.details())
                self.assertIn(field, error.details())
                self.assertEqual(violated_fields(error), [field])

        delete = rollout_pb2.DeleteRolloutRequest(id=self.ROLLOUT_ID)
        viewer = self.refused("DeleteRollout", rollout_pb2.DeleteRolloutResponse, delete,
                              admin_metadata(VIEWER_TOKEN))
        self.assertEqual(viewer.code(), grpc.StatusCode.PERMISSION_DENIED, viewer.details())
        self.assertIn("needs role operator", viewer.details())
        running = self.refused("DeleteRollout", rollout_pb2.DeleteRolloutResponse, delete)
        self.assertEqual(running.code(), grpc.StatusCode.FAILED_PRECONDITION, running.details())
        self.assertIn("PROGRESSING", running.details())

        self.call("AbortRollout", rollout_pb2.Rollout,
                  rollout_pb2.RolloutControlRequest(id=self.ROLLOUT_ID, reason="interop"))
        self.call("DeleteRollout", rollout_pb2.DeleteRolloutResponse, delete)
        gone = self.refused("GetRollout", rollout_pb2.Rollout,
                            rollout_pb2.GetRolloutRequest(id=self.ROLLOUT_ID))
        self.assertEqual(gone.code(), grpc.StatusCode.NOT_FOUND)
        again = self.call("CreateRollout", rollout_pb2.Rollout,
                          rollout_pb2.CreateRolloutRequest(rollout=self.spec()))
        self.assertEqual(again.description, "python interop")
        self.assertEqual(again.state, rollout_pb2.ROLLOUT_STATE_PROGRESSING)


class EngineHarnessTest(unittest.TestCase):
    """ReportOutcome and ReportMeasurement as examples/python sends them."""

    def test_the_example_client_resolves_and_reports(self):
        device_id = "interop-python-harness"
        # Before the reports: they change the fleet evidence the decision cites.
        expected = ctl_resolve("amd-zen4.json", "speed", device_id)
        done = subprocess.run(
            [sys.executable, EXAMPLE_CLIENT, "--server", server.address,
             "--profile", os.path.join(PROFILES_DIR, "amd-zen4.json"), "--device-id", device_id,
             "--decode-tok-s", "75.5", "--threads", "24"],
            capture_output=True, text=True, timeout=60,
            env={**os.environ, "PYTHONPATH": PROTO_DIR})
        self.assertEqual(done.returncode, 0, done.stderr)
        printed = json.loads(done.stdout)
        self.assertEqual(differences(expected, printed["decision"]), [])
        self.assertFalse(printed["outcome"]["duplicate"])
        self.assertTrue(printed["measurement"]["measurement_id"])
        self.assertFalse(printed["measurement"]["duplicate"])

        # The report reached the fleet's evidence for that path and hardware.
        def reported():
            matrix = unary("/weightpath.v1.FleetAdmin/GetVerificationMatrix",
                           fleet_pb2.GetVerificationMatrixResponse,
                           fleet_pb2.GetVerificationMatrixRequest(), metadata=admin_metadata())
            return [cell for cell in matrix.cells
                    if cell.path == expected["weight_path"]["name"]
                    and cell.hardware_class == expected["hardware_class"]
                    and cell.decode_tok_s.samples > 0]
        self.assertTrue(reported())

    def test_a_report_retried_with_its_key_is_counted_once(self):
        device_id = "interop-python-retry"
        client = weightpath_client.WeightPathClient(channel)
        decision = client.resolve(resolve_request("raspberry-pi-5.json", "fidelity", device_id))
        measurement = weightpath_client.measurement_request(
            device_id, decision, "interop", decode_tok_s=11.0, threads=4)
        outcome = weightpath_client.outcome_request(device_id, decision)
        first = client.report_measurement(measurement)
        self.assertFalse(first.duplicate)
        again = client.report_measurement(measurement)
        self.assertTrue(again.duplicate)
        self.assertFalse(client.report_outcome(outcome).duplicate)
        self.assertTrue(client.report_outcome(outcome).duplicate)
        # GetDevice carries the device's own reports (fields 16 and 17), each
        # once; ListDevices leaves them out.
        device = unary("/weightpath.v1.FleetAdmin/GetDevice", fleet_pb2.Device,
                       fleet_pb2.GetDeviceRequest(device_id=device_id),
                       metadata=admin_metadata())
        self.assertEqual([m.decode_tok_s for m in device.recent_measurements], [11.0])
        self.assertEqual(device.recent_measurements[0].threads, 4)
        self.assertEqual(device.recent_measurements[0].path, decision.weight_path.name)
        self.assertEqual([o.outcome for o in device.recent_outcomes], [outcome.outcome])
        self.assertGreater(device.recent_outcomes[0].received_at.seconds, 0)
        listed = unary("/weightpath.v1.FleetAdmin/ListDevices", fleet_pb2.ListDevicesResponse,
                       fleet_pb2.ListDevicesRequest(page_size=1000), metadata=admin_metadata())
        mine = [d for d in listed.devices if d.device_id == device_id]
        self.assertEqual(len(mine), 1)
        self.assertEqual(len(mine[0].recent_measurements), 0)
        self.assertEqual(len(mine[0].recent_outcomes), 0)

    def test_a_report_before_any_resolve_is_not_found(self):
        client = weightpath_client.WeightPathClient(channel, retry_budget_s=0)
        decision = wp.ResolveWeightPathResponse(model="Spark-X2.5-1.7B")
        decision.weight_path.name = "w4a16-tinygemm"
        with self.assertRaises(grpc.RpcError) as refused:
            client.report_measurement(weightpath_client.measurement_request(
                "interop-python-never-resolved", decision, "interop", decode_tok_s=1.0, threads=1))
        self.assertEqual(refused.exception.code(), grpc.StatusCode.NOT_FOUND)
        self.assertIn("device_id", refused.exception.details())

    def test_boots_are_counted_by_boot_source(self):
        device_id = "interop-python-boots"
        client = weightpath_client.WeightPathClient(channel, retry_budget_s=0)
        decision = client.resolve(resolve_request("raspberry-pi-5.json", "fidelity", device_id))

        def boots(source, outcome="boot_ok"):
            with urllib.request.urlopen(f"http://{server.metrics_address}/metrics",
                                        timeout=CALL_TIMEOUT_S) as answer:
                text = answer.read().decode()
            series = f'weightpath_agent_boots_total{{outcome="{outcome}",source="{source}"}} '
            lines = [line for line in text.splitlines() if line.startswith(series)]
            self.assertEqual(len(lines), 1, f"{series} in /metrics")
            return float(lines[0][len(series):])

        before = boots("last_good")
        failed_before = boots("offline", "boot_failed")
        booted = weightpath_client.outcome_request(device_id, decision, "OUTCOME_BOOT_OK")
        booted.boot_source = wp.BOOT_SOURCE_LAST_GOOD
        self.assertFalse(client.report_outcome(booted).duplicate)
        self.assertTrue(client.report_outcome(booted).duplicate)
        failed = weightpath_client.outcome_request(device_id, decision, "OUTCOME_BOOT_FAILED")
        failed.boot_source = wp.BOOT_SOURCE_OFFLINE
        self.assertFalse(client.report_outcome(failed).duplicate)
        self.assertEqual(boots("last_good"), before + 1, "a retried key counts once")
        self.assertEqual(boots("offline", "boot_failed"), failed_before + 1)

        for source, outcome in ((99, "OUTCOME_BOOT_OK"),
                                (wp.BOOT_SOURCE_SERVER, "OUTCOME_ENGINE_STARTED")):
            with self.subTest(source=source, outcome=outcome):
                refused = weightpath_client.outcome_request(device_id, decision, outcome)
                refused.boot_source = source
                with self.assertRaises(grpc.RpcError) as error:
                    client.report_outcome(refused)
                self.assertEqual(error.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
                self.assertIn("boot_source", error.exception.details())


class SignedCatalogTest(unittest.TestCase):
    """A second server whose catalog is a TUF repository made by the real
    `weightpathctl repo`: Python sees each artifact's target path and
    signed_target, and the same answer weightpathctl (C++) prints."""

    MODEL = "Spark-X2.5-1.7B"
    PATHS = ["bf16", "export-qnn-w8a16", "fp16", "w4a8-amx", "w4a16-tinygemm"]

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="wp-interop-python-tuf-")
        repo = os.path.join(cls.dir, "repo")
        keys = os.path.join(cls.dir, "keys")
        cls.ctl("repo", "init", "--repo", repo, "--generate-keys", keys)
        for name in cls.PATHS:
            cls.ctl("repo", "add-target", "--repo", repo, "--path", f"spark/{name}.bin",
                    "--length", "4096", "--sha256", f"{len(name):064x}", "--model", cls.MODEL,
                    "--weight-path", name, "--version", "7", "--hardware-classes",
                    "x86_cpu,arm64_cpu,cuda_discrete,jetson,npu_phone")
        cls.ctl("repo", "sign", "--repo", repo, "--role", "targets", "--key",
                os.path.join(keys, "targets.pem"))
        cls.ctl("repo", "timestamp", "--repo", repo, "--key", os.path.join(keys, "timestamp.pem"),
                "--snapshot-key", os.path.join(keys, "snapshot.pem"))
        cls.server = ServerProcess(cls.dir, [
            "--store=none", f"--catalog={repo}",
            f"--catalog_root={os.path.join(repo, 'metadata', '1.root.json')}",
            "--catalog_artifact_url=https://mirror.test/weights",
            f"--catalog_state_dir={os.path.join(cls.dir, 'state')}"])
        cls.channel = grpc.insecure_channel(cls.server.address)

    @classmethod
    def tearDownClass(cls):
        cls.channel.close()
        cls.server.stop()
        shutil.rmtree(cls.dir, ignore_errors=True)

    @staticmethod
    def ctl(*args):
        done = subprocess.run([CTL_BINARY, *args], capture_output=True, text=True, timeout=60)
        if done.returncode != 0:
            raise AssertionError(f"weightpathctl {' '.join(args)}: {done.stderr}")
        return done.stdout

    def test_every_example_profile_gets_a_signed_target(self):
        method = self.channel.unary_unary(
            "/weightpath.v1.WeightPath/ResolveWeightPath",
            request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=wp.ResolveWeightPathResponse.FromString)
        for profile in example_profiles():
            with self.subTest(profile=profile):
                device_id = "interop-python-tuf-" + profile[:-len(".json")]
                response = method(resolve_request(profile, "", device_id), timeout=CALL_TIMEOUT_S)
                name = response.weight_path.name
                self.assertEqual(response.artifact.target_path, f"spark/{name}.bin")
                self.assertTrue(response.artifact.signed_target)
                self.assertEqual(response.artifact.uri, f"https://mirror.test/weights/spark/{name}.bin")
                self.assertEqual(response.artifact.sha256, f"{len(name):064x}")
                self.assertEqual(response.artifact.size_bytes, 4096)
                self.assertEqual(response.artifact.version, "7")
                ctl = json.loads(self.ctl(
                    "resolve", "--server", self.server.address, "--device-id", device_id,
                    "--profile", os.path.join(PROFILES_DIR, profile), "-o", "json"))
                self.assertEqual(differences(ctl, proto_json(response)), [])
                self.assertEqual(ctl["artifact"]["target_path"], f"spark/{name}.bin")
                self.assertIs(ctl["artifact"]["signed_target"], True)

    def test_the_plain_catalog_server_answers_unsigned(self):
        request = resolve_request("intel-sapphire-rapids.json", "speed", "interop-python-plain")
        response = unary("/weightpath.v1.WeightPath/ResolveWeightPath",
                         wp.ResolveWeightPathResponse, request)
        self.assertEqual(response.artifact.target_path, "")
        self.assertFalse(response.artifact.signed_target)


if __name__ == "__main__":
    unittest.main(verbosity=2)
