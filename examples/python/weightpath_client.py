#!/usr/bin/env python3
"""What an engine harness says to weightpath-server, as a small Python client.

  1. ResolveWeightPath: send the device's hardware profile, get back the weight
     path (which build of the model to load), its artifact and the engine kwargs.
  2. ReportOutcome: say how starting the engine on that build went (a rollout
     counts OUTCOME_ENGINE_STARTED as its only success).
  3. ReportMeasurement: send what the engine's own benchmark measured, so the
     fleet can verify the path on this hardware.

Standard library plus Debian 12's python3-grpcio and python3-protobuf, nothing
else. The message classes are generated from proto/ with plain protoc (the
build does it into build/proto/python), and calls go through
channel.unary_unary with each message's own (de)serializers, so neither
generated *_pb2_grpc.py stubs nor grpc_tools are needed:

  scripts/build
  PYTHONPATH=build/proto/python python3 examples/python/weightpath_client.py \\
      --server 127.0.0.1:50051 --profile examples/profiles/raspberry-pi-5.json \\
      --device-id lab-pi-01 --decode-tok-s 12.5 --threads 4

It prints one JSON object: the decision and the two reports' answers. Copy the
WeightPathClient class into a harness; main() shows the order of the calls.
"""

import argparse
import json
import sys
import time
import uuid

import grpc
from google.protobuf import json_format
from google.protobuf import timestamp_pb2

from weightpath.v1 import weightpath_pb2 as wp

# Codes worth another try. UNAVAILABLE: the server or its store is away for a
# moment (the server says so itself when it cannot commit a report).
# NOT_FOUND on a report: the device's registry record is written behind its
# resolve (within about a second), so a report sent right after the first
# resolve can arrive before it.
_RETRY_CODES = {grpc.StatusCode.UNAVAILABLE}
_REPORT_RETRY_CODES = {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.NOT_FOUND}


class WeightPathClient:
    """The three device RPCs of weightpath.v1.WeightPath over one channel."""

    _SERVICE = "/weightpath.v1.WeightPath/"

    def __init__(self, channel, timeout_s=10.0, retry_budget_s=10.0):
        self._timeout_s = timeout_s
        self._retry_budget_s = retry_budget_s
        self._resolve = self._method(channel, "ResolveWeightPath", wp.ResolveWeightPathResponse)
        self._measure = self._method(channel, "ReportMeasurement", wp.ReportMeasurementResponse)
        self._outcome = self._method(channel, "ReportOutcome", wp.ReportOutcomeResponse)

    @classmethod
    def _method(cls, channel, name, response_class):
        return channel.unary_unary(
            cls._SERVICE + name,
            request_serializer=lambda message: message.SerializeToString(),
            response_deserializer=response_class.FromString)

    def _call(self, method, request, retry_codes):
        # Backoff from 100 ms to 1 s within the budget. A report keeps its
        # idempotency key across tries, so one whose answer was lost is not
        # counted twice.
        give_up = time.monotonic() + self._retry_budget_s
        delay_s = 0.1
        while True:
            try:
                return method(request, timeout=self._timeout_s)
            except grpc.RpcError as error:
                if error.code() not in retry_codes or time.monotonic() + delay_s > give_up:
                    raise
                time.sleep(delay_s)
                delay_s = min(delay_s * 2, 1.0)

    def resolve(self, request):
        """ResolveWeightPathRequest -> ResolveWeightPathResponse."""
        return self._call(self._resolve, request, _RETRY_CODES)

    def report_measurement(self, request):
        """ReportMeasurementRequest -> ReportMeasurementResponse (OK: committed)."""
        return self._call(self._measure, request, _REPORT_RETRY_CODES)

    def report_outcome(self, request):
        """ReportOutcomeRequest -> ReportOutcomeResponse."""
        return self._call(self._outcome, request, _REPORT_RETRY_CODES)


def resolve_request(profile_json, device_id, priority="speed", model="", labels=None):
    """A ResolveWeightPathRequest from a profile as weightpath-agent probe writes it.

    The profile's keys are HardwareProfile's field names; keys this version of the
    API does not know are ignored, as the server's own tools do.
    """
    request = wp.ResolveWeightPathRequest(device_id=device_id, model=model)
    json_format.Parse(profile_json, request.profile, ignore_unknown_fields=True)
    if priority:
        request.priority = wp.Priority.Value("PRIORITY_" + priority.upper())
    request.labels.update(labels or {})
    return request


def outcome_request(device_id, decision, outcome="OUTCOME_ENGINE_STARTED", detail=""):
    """How the engine fared on the build `decision` named."""
    observed_at = timestamp_pb2.Timestamp()
    observed_at.GetCurrentTime()
    return wp.ReportOutcomeRequest(
        idempotency_key=str(uuid.uuid4()),
        device_id=device_id,
        outcome=wp.Outcome.Value(outcome),
        path=decision.weight_path.name,
        artifact_sha256=decision.artifact.sha256,
        policy_version=decision.policy_version,
        rollout_id=decision.rollout.rollout_id,
        detail=detail,
        observed_at=observed_at)


def measurement_request(device_id, decision, engine_version, decode_tok_s, threads,
                        prefill_tok_s=0.0, step_ms=0.0, gemm_ms_per_step=0.0,
                        fidelity_exact_matches=0, fidelity_prompts=0):
    """What the engine's benchmark measured on the build `decision` named."""
    measured_at = timestamp_pb2.Timestamp()
    measured_at.GetCurrentTime()
    return wp.ReportMeasurementRequest(
        idempotency_key=str(uuid.uuid4()),
        device_id=device_id,
        model=decision.model,
        path=decision.weight_path.name,
        engine_version=engine_version,
        decode_tok_s=decode_tok_s,
        prefill_tok_s=prefill_tok_s,
        gemm_ms_per_step=gemm_ms_per_step,
        step_ms=step_ms,
        threads=threads,
        fidelity_exact_matches=fidelity_exact_matches,
        fidelity_prompts=fidelity_prompts,
        measured_at=measured_at)


def _as_json(message):
    return json_format.MessageToDict(
        message, preserving_proto_field_name=True, including_default_value_fields=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--server", required=True, help="HOST:PORT of weightpath-server")
    parser.add_argument("--ca", help="CA certificate (PEM) for a TLS server; plaintext without")
    parser.add_argument("--profile", required=True, help="hardware profile JSON")
    parser.add_argument("--device-id", required=True)
    parser.add_argument("--priority", default="speed", choices=["speed", "fidelity"])
    parser.add_argument("--model", default="", help="default: the catalog's default model")
    parser.add_argument("--engine-version", default="example-harness")
    parser.add_argument("--decode-tok-s", type=float, required=True)
    parser.add_argument("--prefill-tok-s", type=float, default=0.0)
    parser.add_argument("--threads", type=int, required=True)
    args = parser.parse_args(argv)

    if args.ca:
        with open(args.ca, "rb") as ca:
            channel = grpc.secure_channel(args.server, grpc.ssl_channel_credentials(ca.read()))
    else:
        channel = grpc.insecure_channel(args.server)
    with channel, open(args.profile, encoding="utf-8") as profile:
        client = WeightPathClient(channel)
        decision = client.resolve(
            resolve_request(profile.read(), args.device_id, args.priority, args.model))
        # ... download decision.artifact, check its sha256, start the engine ...
        outcome = client.report_outcome(outcome_request(args.device_id, decision))
        # ... run the engine's benchmark ...
        measurement = client.report_measurement(measurement_request(
            args.device_id, decision, args.engine_version, args.decode_tok_s, args.threads,
            prefill_tok_s=args.prefill_tok_s))
    json.dump({"decision": _as_json(decision), "outcome": _as_json(outcome),
               "measurement": _as_json(measurement)}, sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except grpc.RpcError as error:
        sys.exit(f"weightpath_client: {error.code().name}: {error.details()}")
