// weightpath-server as a Node user meets it: @grpc/grpc-js with
// @grpc/proto-loader (protobufjs underneath), the most common gRPC stack
// outside C++. Every answer is compared field by field, in protobuf's JSON
// mapping, with what weightpathctl (C++) prints for the same request, so a
// response that C++ and protobufjs decode differently fails here.
//
// Run by CTest (tests/interop/CMakeLists.txt), which sets
//   WEIGHTPATH_SERVER_BINARY, WEIGHTPATH_CTL_BINARY, WEIGHTPATH_SOURCE_DIR.
'use strict';

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');
const protobuf = require('protobufjs');
const descriptor = require('protobufjs/ext/descriptor');

const support = require('./node_support');

const env = support.requiredEnvironment([
  'WEIGHTPATH_SERVER_BINARY', 'WEIGHTPATH_CTL_BINARY', 'WEIGHTPATH_SOURCE_DIR']);
const protoDir = path.join(env.WEIGHTPATH_SOURCE_DIR, 'proto');
const profilesDir = path.join(env.WEIGHTPATH_SOURCE_DIR, 'examples', 'profiles');

const PROTO_FILES = [
  'weightpath/v1/weightpath.proto',
  'weightpath/v1/fleet_admin.proto',
  'grpc/health/v1/health.proto',
  'grpc/reflection/v1/reflection.proto',
  'grpc/reflection/v1alpha/reflection.proto',
];
// What a typical proto-loader user passes: field names as in the .proto,
// 64-bit integers and bytes as strings, enums by name, defaults filled in.
// The same conversion turns messages decoded from reflected types into objects.
const OBJECT_OPTIONS = {
  longs: String, enums: String, bytes: String, defaults: true, oneofs: true,
};
const LOADER_OPTIONS = { ...OBJECT_OPTIONS, keepCase: true, includeDirs: [protoDir] };
const SERVICES = ['weightpath.v1.WeightPath', 'weightpath.v1.FleetAdmin', 'grpc.health.v1.Health'];
const PRIORITIES = [null, 'speed', 'fidelity'];  // null: the request leaves it unset
const PRIORITY_ENUM = { speed: 'PRIORITY_SPEED', fidelity: 'PRIORITY_FIDELITY' };
const ADMIN_TOKEN = 'interop-node-operator-token';

let server;      // support.ServerProcess
let workDir;
let api;         // grpc.loadPackageDefinition(...) of PROTO_FILES
let types;       // protobufjs Root of the same files: field types for the JSON mapping
let weightPath;  // typed client
let fleetAdmin;

before(async () => {
  workDir = fs.mkdtempSync(path.join(os.tmpdir(), 'wp-interop-node-'));
  const tokenFile = path.join(workDir, 'admin-token');
  fs.writeFileSync(tokenFile, ADMIN_TOKEN + '\n', { mode: 0o600 });
  server = await support.ServerProcess.start(env.WEIGHTPATH_SERVER_BINARY, workDir, [
    `--store=sqlite:${path.join(workDir, 'fleet.db')}`,
    `--admin_token_file=${tokenFile}`,
  ]);
  api = grpc.loadPackageDefinition(protoLoader.loadSync(PROTO_FILES, LOADER_OPTIONS));
  types = new protobuf.Root();
  types.resolvePath = (_origin, target) =>
    path.isAbsolute(target) ? target : path.join(protoDir, target);
  types.loadSync(PROTO_FILES, { keepCase: true });
  types.resolveAll();
  const credentials = grpc.credentials.createInsecure();
  weightPath = new api.weightpath.v1.WeightPath(server.address, credentials);
  fleetAdmin = new api.weightpath.v1.FleetAdmin(server.address, credentials);
});

after(async () => {
  for (const client of [weightPath, fleetAdmin]) if (client) client.close();
  if (server) await server.stop();
  if (workDir) fs.rmSync(workDir, { recursive: true, force: true });
});

function deadline(seconds = 10) {
  return { deadline: new Date(Date.now() + seconds * 1000) };
}

// A unary call on a proto-loader client as a promise of the response object.
function call(client, method, request, metadata = new grpc.Metadata()) {
  return new Promise((resolve, reject) => {
    client[method](request, metadata, deadline(), (error, response) =>
      error ? reject(error) : resolve(response));
  });
}

function adminMetadata(token = ADMIN_TOKEN) {
  const metadata = new grpc.Metadata();
  metadata.set('authorization', `Bearer ${token}`);
  return metadata;
}

function exampleProfiles() {
  return fs.readdirSync(profilesDir).filter((name) => name.endsWith('.json')).sort();
}

function readProfile(name) {
  return JSON.parse(fs.readFileSync(path.join(profilesDir, name), 'utf8'));
}

// The request weightpathctl sends for these flags, as a proto-loader object
// (fromObject skips the profile's nulls, as the C++ reader does).
function resolveRequest(profileName, priority, deviceId) {
  const request = { device_id: deviceId, profile: readProfile(profileName) };
  if (priority) request.priority = PRIORITY_ENUM[priority];
  return request;
}

test('resolves every example profile at every priority exactly as weightpathctl does', async (t) => {
  for (const profile of exampleProfiles()) {
    for (const priority of PRIORITIES) {
      await t.test(`${profile} priority=${priority || 'unset'}`, async () => {
        const deviceId = `interop-node-${path.basename(profile, '.json')}`;
        const args = ['resolve', '--server', server.address, '--device-id', deviceId,
          '--profile', path.join(profilesDir, profile), '-o', 'json'];
        if (priority) args.push('--priority', priority);
        const expected = JSON.parse(support.run(env.WEIGHTPATH_CTL_BINARY, args));
        const response = await call(weightPath, 'ResolveWeightPath',
          resolveRequest(profile, priority, deviceId));
        const actual = support.toProtoJson(
          types.lookupType('weightpath.v1.ResolveWeightPathResponse'), response);
        assert.deepEqual(support.differences(expected, actual), [],
          'fields protobufjs decoded differently from weightpathctl (C++)');
      });
    }
  }
});

test('a re-resolve with the held etag is answered unchanged, and a stale one in full', async () => {
  const request = resolveRequest('intel-sapphire-rapids.json', 'speed', 'interop-node-etag');
  const full = await call(weightPath, 'ResolveWeightPath', request);
  assert.match(full.decision_etag, /^[0-9a-f]{32}$/);
  assert.equal(full.unchanged, false);
  const again = await call(weightPath, 'ResolveWeightPath',
    { ...request, known_decision_etag: full.decision_etag });
  assert.equal(again.unchanged, true);
  assert.equal(again.decision_etag, full.decision_etag);
  assert.equal(again.policy_version, full.policy_version);
  assert.equal(again.resolve_interval_seconds, full.resolve_interval_seconds);
  assert.equal(again.weight_path, null, 'an unchanged answer carries no decision');
  const stale = await call(weightPath, 'ResolveWeightPath',
    { ...request, known_decision_etag: '0'.repeat(32) });
  assert.equal(stale.unchanged, false);
  assert.equal(stale.weight_path.name, full.weight_path.name);
});

test('refuses bad requests with the gRPC code and the field named', async (t) => {
  const good = () => resolveRequest('intel-sapphire-rapids.json', 'speed', 'interop-node-errors');
  const cases = [
    ['empty device_id', { ...good(), device_id: '' }, grpc.status.INVALID_ARGUMENT, 'device_id'],
    ['oversized device_id', { ...good(), device_id: 'd'.repeat(257) },
      grpc.status.INVALID_ARGUMENT, 'device_id'],
    ['unsupported arch', { ...good(), profile: { arch: 'riscv64', accelerator: 'none' } },
      grpc.status.INVALID_ARGUMENT, 'profile.arch'],
    ['unknown model', { ...good(), model: 'no-such-model' }, grpc.status.NOT_FOUND, 'model'],
    // Refused by the transport before any field is read: the limit is named.
    ['request over 64 KiB',
      { ...good(), profile: { ...good().profile, cpu_model: 'x'.repeat(70 * 1024) } },
      grpc.status.RESOURCE_EXHAUSTED, '65536'],
  ];
  for (const [name, request, code, named] of cases) {
    await t.test(name, async () => {
      await assert.rejects(call(weightPath, 'ResolveWeightPath', request), (error) => {
        assert.equal(error.code, code, `${name}: ${error.code} ${error.details}`);
        assert.match(error.details, new RegExp(named.replace('.', '\\.')));
        return true;
      });
    });
  }
});

test('grpc.health.v1.Health/Check reports SERVING', async () => {
  const health = new api.grpc.health.v1.Health(server.address, grpc.credentials.createInsecure());
  try {
    for (const service of ['', 'weightpath.v1.WeightPath', 'weightpath.v1.FleetAdmin']) {
      const response = await call(health, 'Check', { service });
      assert.equal(response.status, 'SERVING', `health of "${service}"`);
    }
  } finally {
    health.close();
  }
});

// One reflection stream: writes every request, collects the answers in order.
function askReflection(version, requests) {
  const client = new api.grpc.reflection[version].ServerReflection(
    server.address, grpc.credentials.createInsecure());
  return new Promise((resolve, reject) => {
    const answers = [];
    const stream = client.ServerReflectionInfo(deadline());
    stream.on('data', (answer) => answers.push(answer));
    stream.on('error', (error) => { client.close(); reject(error); });
    stream.on('end', () => { client.close(); resolve(answers); });
    for (const request of requests) stream.write(request);
    stream.end();
  });
}

// A protobufjs Root built only from the FileDescriptorProtos a reflection
// answer carried (the file and its imports). Each file is taken once by name,
// as grpcurl does: gRPC 1.51's v1alpha service repeats, in every later answer
// on a stream, the files of the earlier ones.
function rootFromReflection(answer) {
  assert.equal(answer.message_response, 'file_descriptor_response',
    JSON.stringify(answer.error_response));
  const files = new Map();
  for (const bytes of answer.file_descriptor_response.file_descriptor_proto) {
    const file = descriptor.FileDescriptorProto.decode(Buffer.from(bytes, 'base64'));
    if (!files.has(file.name)) files.set(file.name, file);
  }
  const root = protobuf.Root.fromDescriptor({ file: [...files.values()] });
  root.resolveAll();
  return root;
}

// A unary call made from reflected descriptors only: no .proto file involved.
function reflectedCall(root, methodPath, requestObject, metadata = new grpc.Metadata()) {
  const [, serviceName, methodName] = methodPath.split('/');
  const method = root.lookupService(serviceName).methods[methodName];
  const requestType = method.resolvedRequestType;
  const responseType = method.resolvedResponseType;
  const client = new grpc.Client(server.address, grpc.credentials.createInsecure());
  return new Promise((resolve, reject) => {
    client.makeUnaryRequest(methodPath,
      (object) => Buffer.from(requestType.encode(requestType.fromObject(object)).finish()),
      (bytes) => responseType.toObject(responseType.decode(bytes), OBJECT_OPTIONS),
      requestObject, metadata, deadline(), (error, response) => {
        client.close();
        return error ? reject(error) : resolve(response);
      });
  });
}

for (const version of ['v1', 'v1alpha']) {
  test(`reflection ${version}: lists, describes every method, and calls from descriptors alone`,
    async () => {
      const [list] = await askReflection(version, [{ list_services: '' }]);
      const listed = list.list_services_response.service.map((service) => service.name);
      for (const service of [...SERVICES, `grpc.reflection.${version}.ServerReflection`]) {
        assert.ok(listed.includes(service), `${service} not listed: ${listed}`);
      }

      const answers = await askReflection(version,
        listed.map((name) => ({ file_containing_symbol: name })));
      const roots = {};
      listed.forEach((name, i) => {
        const root = rootFromReflection(answers[i]);
        const service = root.lookupService(name);
        assert.ok(service.methodsArray.length > 0, `${name} has no methods`);
        for (const method of service.methodsArray) {
          assert.ok(method.resolvedRequestType instanceof protobuf.Type, method.fullName);
          assert.ok(method.resolvedResponseType instanceof protobuf.Type, method.fullName);
          // Describing a method: its request and response fields by name and type.
          for (const type of [method.resolvedRequestType, method.resolvedResponseType]) {
            for (const field of type.fieldsArray) assert.ok(field.resolve().type, field.fullName);
          }
        }
        roots[name] = root;
      });

      const expected = JSON.parse(support.run(env.WEIGHTPATH_CTL_BINARY, [
        'resolve', '--server', server.address, '--device-id', 'interop-node-reflected',
        '--profile', path.join(profilesDir, 'raspberry-pi-5.json'), '-o', 'json']));
      const resolved = await reflectedCall(roots['weightpath.v1.WeightPath'],
        '/weightpath.v1.WeightPath/ResolveWeightPath',
        resolveRequest('raspberry-pi-5.json', null, 'interop-node-reflected'));
      const resolvedType = roots['weightpath.v1.WeightPath']
        .lookupType('weightpath.v1.ResolveWeightPathResponse');
      assert.deepEqual(support.differences(expected, support.toProtoJson(resolvedType, resolved)),
        [], 'fields decoded from reflected descriptors differently from weightpathctl (C++)');

      const health = await reflectedCall(roots['grpc.health.v1.Health'],
        '/grpc.health.v1.Health/Check', { service: '' });
      assert.equal(health.status, 'SERVING');

      const matrix = await reflectedCall(roots['weightpath.v1.FleetAdmin'],
        '/weightpath.v1.FleetAdmin/GetVerificationMatrix', {}, adminMetadata());
      assert.equal(matrix.policy_version, expected.policy_version);
    });
}

test('FleetAdmin takes the operator bearer token and refuses anything else', async (t) => {
  await t.test('no token: UNAUTHENTICATED', async () => {
    await assert.rejects(call(fleetAdmin, 'FleetSummary', {}),
      (error) => error.code === grpc.status.UNAUTHENTICATED);
  });
  await t.test('wrong token: PERMISSION_DENIED', async () => {
    await assert.rejects(call(fleetAdmin, 'FleetSummary', {}, adminMetadata('not-the-token')),
      (error) => error.code === grpc.status.PERMISSION_DENIED);
  });
  await t.test('operator token: the devices this suite resolved are listed', async () => {
    const wanted = 'interop-node-intel-sapphire-rapids';
    // The registry is written behind the resolve (within about a second).
    const device = await support.retry(() => call(fleetAdmin, 'GetDevice',
      { device_id: wanted }, adminMetadata()), [grpc.status.NOT_FOUND], 10000);
    assert.equal(device.device_id, wanted);
    assert.equal(device.hardware_class, 'x86_cpu');
    const summary = await call(fleetAdmin, 'FleetSummary', {}, adminMetadata());
    assert.ok(Number(summary.total_devices) >= 1, JSON.stringify(summary));
  });
});

test('a dry_run resolve from grpc-js is answered as the device is and never registered', async () => {
  const dryId = 'interop-node-dry-run';
  const request = { ...resolveRequest('amd-zen4.json', 'speed', dryId), dry_run: true };
  const dry = await call(weightPath, 'ResolveWeightPath', request);
  // A real resolve after it: once that one is registered, the dry run would
  // have been too, had it been recorded.
  const markerId = 'interop-node-after-the-dry-run';
  await call(weightPath, 'ResolveWeightPath', resolveRequest('amd-zen4.json', 'speed', markerId));
  await support.retry(() => call(fleetAdmin, 'GetDevice', { device_id: markerId }, adminMetadata()),
    [grpc.status.NOT_FOUND], 10000);
  await assert.rejects(call(fleetAdmin, 'GetDevice', { device_id: dryId }, adminMetadata()),
    (error) => error.code === grpc.status.NOT_FOUND);
  const listed = await call(fleetAdmin, 'ListDevices', {}, adminMetadata());
  assert.ok(!listed.devices.some((device) => device.device_id === dryId));
  // The same device resolving for real gets the same answer.
  const real = await call(weightPath, 'ResolveWeightPath', { ...request, dry_run: false });
  const responseType = types.lookupType('weightpath.v1.ResolveWeightPathResponse');
  assert.deepEqual(support.differences(support.toProtoJson(responseType, real),
    support.toProtoJson(responseType, dry)), []);
});
