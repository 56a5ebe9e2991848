// The device side of TUF against an independent implementation: a
// repository written and signed by @tufjs/models (Node's TUF library, none
// of our code) is what the real weightpath-agent verifies at boot, fetching
// the metadata and the artifact over HTTP from Node servers, with the
// decision from the real weightpath-server (a plain catalog naming the
// artifacts' target paths).
//
// The repository: root v1 -> v2 (a second root key, threshold 2, signed by
// both thresholds), consistent snapshots, every weight path the default
// policy can choose signed for x86_cpu in the top-level targets, and a
// delegated role (one level) listing an arm64_cpu build.
//
// Run by CTest (tests/interop/CMakeLists.txt), which sets
//   WEIGHTPATH_AGENT_BINARY, WEIGHTPATH_SERVER_BINARY, WEIGHTPATH_SOURCE_DIR.
'use strict';

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const fs = require('node:fs');
const http = require('node:http');
const os = require('node:os');
const path = require('node:path');
const { spawn } = require('node:child_process');

const {
  Metadata, Root, Timestamp, Snapshot, Targets, Key, MetaFile, TargetFile, Signature,
} = require('@tufjs/models');
// Not re-exported by the package index; the lock pins the layout.
const { DelegatedRole, Role } = require('@tufjs/models/dist/role');
const { Delegations } = require('@tufjs/models/dist/delegations');
const { canonicalize } = require('@tufjs/canonical-json');

const support = require('./node_support');

const env = support.requiredEnvironment([
  'WEIGHTPATH_AGENT_BINARY', 'WEIGHTPATH_SERVER_BINARY', 'WEIGHTPATH_SOURCE_DIR']);
const DAY_MS = 24 * 3600 * 1000;
const MODEL = 'Spark-X2.5-1.7B';
// An x86 server CPU with AMX: the device classifies itself as x86_cpu.
const PROFILE = {
  arch: 'x86_64', cpu_model: 'Intel(R) Xeon(R) Platinum 8480C',
  cpu_flags: ['avx2', 'avx512f', 'avx512_bf16', 'avx512_vnni', 'amx_bf16', 'amx_tile', 'amx_int8', 'fma', 'f16c'],
  n_logical: 8, n_physical: 4, numa_nodes: 1, ram_total_bytes: 34359738368,
  ram_available_bytes: 30000000000, accelerator: 'none', supports_bf16: true, host_os: 'linux',
};

let workDir;
let servers = [];

before(() => {
  workDir = fs.mkdtempSync(path.join(os.tmpdir(), 'wp-interop-tuf-agent-'));
});

after(async () => {
  for (const server of servers) await server.close();
  fs.rmSync(workDir, { recursive: true, force: true });
});

function expiresIn(days) {
  return new Date(Date.now() + days * DAY_MS).toISOString().replace(/\.\d{3}Z$/, 'Z');
}

function sha256(bytes) {
  return crypto.createHash('sha256').update(bytes).digest('hex');
}

function newKey() {
  const { publicKey, privateKey } = crypto.generateKeyPairSync('ed25519');
  const raw = publicKey.export({ format: 'der', type: 'spki' }).subarray(-32).toString('hex');
  const body = { keytype: 'ed25519', scheme: 'ed25519', keyval: { public: raw } };
  const keyID = sha256(canonicalize(body));
  return { key: new Key({ keyID, keyType: 'ed25519', scheme: 'ed25519', keyVal: { public: raw } }), privateKey };
}

function sign(metadata, ...keys) {
  for (const k of keys) {
    metadata.sign((data) => new Signature({
      keyID: k.key.keyID, sig: crypto.sign(null, data, k.privateKey).toString('hex'),
    }));
  }
  return Buffer.from(JSON.stringify(metadata.toJSON(), null, 1));
}

function metaFor(bytes, version) {
  return new MetaFile({ version, length: bytes.length, hashes: { sha256: sha256(bytes) } });
}

// The path names the bundled policy can hand out: the demo catalog's.
function reachablePaths() {
  const text = fs.readFileSync(path.join(env.WEIGHTPATH_SOURCE_DIR, 'server', 'config', 'demo_catalog.yaml'), 'utf8');
  return [...text.matchAll(/^ {4}([a-z0-9][a-z0-9-]*):$/gm)].map((match) => match[1]);
}

function targetFile(targetPath, bytes, weightPath, hardwareClasses) {
  return new TargetFile({
    path: targetPath, length: bytes.length, hashes: { sha256: sha256(bytes) },
    unrecognizedFields: { custom: {
      model: MODEL, weight_path: weightPath, version: '2026.12.1', hardware_classes: hardwareClasses,
    } },
  });
}

// The repository, written with @tufjs/models only, and the artifacts.
function buildRepository(metadataDir, artifactsDir) {
  fs.mkdirSync(metadataDir, { recursive: true });
  fs.mkdirSync(path.join(artifactsDir, 'models', 'edge'), { recursive: true });
  const keys = {};
  for (const name of ['root1', 'root2', 'targets', 'snapshot', 'timestamp', 'edge']) keys[name] = newKey();
  const write = (name, bytes) => fs.writeFileSync(path.join(metadataDir, name), bytes);

  const root = new Root({ version: 1, expires: expiresIn(365), consistentSnapshot: true });
  root.addKey(keys.root1.key, 'root');
  root.addKey(keys.targets.key, 'targets');
  root.addKey(keys.snapshot.key, 'snapshot');
  root.addKey(keys.timestamp.key, 'timestamp');
  write('1.root.json', sign(new Metadata(root), keys.root1));
  const root2 = Root.fromJSON(root.toJSON());
  root2.version = 2;
  root2.addKey(keys.root2.key, 'root');
  root2.roles.root = new Role({ keyIDs: [keys.root1.key.keyID, keys.root2.key.keyID], threshold: 2 });
  write('2.root.json', sign(new Metadata(root2), keys.root1, keys.root2));

  const artifacts = {};
  const targets = new Targets({
    version: 1, expires: expiresIn(90),
    delegations: new Delegations({
      keys: { [keys.edge.key.keyID]: keys.edge.key },
      roles: { 'edge-team': new DelegatedRole({
        name: 'edge-team', keyIDs: [keys.edge.key.keyID], threshold: 1, terminating: true,
        paths: ['models/edge/*'],
      }) },
    }),
  });
  for (const name of reachablePaths()) {
    const bytes = crypto.randomBytes(48 * 1024);
    const targetPath = `models/spark/${name}.bin`;
    fs.mkdirSync(path.join(artifactsDir, 'models', 'spark'), { recursive: true });
    fs.writeFileSync(path.join(artifactsDir, targetPath), bytes);
    artifacts[name] = { targetPath, bytes };
    targets.addTarget(targetFile(targetPath, bytes, name, ['x86_cpu']));
  }
  const targetsBytes = sign(new Metadata(targets), keys.targets);
  write('1.targets.json', targetsBytes);

  const armBytes = crypto.randomBytes(48 * 1024);
  const armPath = 'models/edge/w4a16-arm.bin';
  fs.writeFileSync(path.join(artifactsDir, armPath), armBytes);
  const edge = new Targets({ version: 1, expires: expiresIn(30) });
  edge.addTarget(targetFile(armPath, armBytes, 'w4a16-tinygemm', ['arm64_cpu']));
  const edgeBytes = sign(new Metadata(edge), keys.edge);
  write('1.edge-team.json', edgeBytes);

  const snapshot = new Snapshot({
    version: 1, expires: expiresIn(7),
    meta: { 'targets.json': metaFor(targetsBytes, 1), 'edge-team.json': metaFor(edgeBytes, 1) },
  });
  const snapshotBytes = sign(new Metadata(snapshot), keys.snapshot);
  write('1.snapshot.json', snapshotBytes);
  const timestamp = new Timestamp({ version: 1, expires: expiresIn(1), snapshotMeta: metaFor(snapshotBytes, 1) });
  write('timestamp.json', sign(new Metadata(timestamp), keys.timestamp));
  return { artifacts, arm: { targetPath: armPath, bytes: armBytes }, root2 };
}

// A static file server over `dir` on a free loopback port.
function serve(dir) {
  const server = http.createServer((request, response) => {
    const name = decodeURIComponent(new URL(request.url, 'http://x').pathname);
    const file = path.join(dir, path.normalize(name));
    if (!file.startsWith(dir + path.sep) || !fs.existsSync(file) || !fs.statSync(file).isFile()) {
      response.writeHead(404);
      response.end();
      return;
    }
    const bytes = fs.readFileSync(file);
    response.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': bytes.length });
    response.end(bytes);
  });
  return new Promise((resolve) => {
    server.listen(0, '127.0.0.1', () => {
      const served = {
        url: `http://127.0.0.1:${server.address().port}`,
        close: () => new Promise((done) => server.close(done)),
      };
      servers.push(served);
      resolve(served);
    });
  });
}

// weightpath-server with a plain catalog: every path's artifact by its
// target path on `mirror`, `override` replacing some.
async function startServer(artifacts, mirrorUrl, override = {}) {
  let yaml = `default_model: ${MODEL}\nmodels:\n  ${MODEL}:\n`;
  for (const [name, artifact] of Object.entries(artifacts)) {
    const entry = override[name] || artifact;
    yaml += `    ${name}:\n      uri: "${mirrorUrl}/${entry.targetPath}"\n      sha256: ${sha256(entry.bytes)}\n` +
      `      size_bytes: ${entry.bytes.length}\n      version: "2026.12.1"\n      target_path: "${entry.targetPath}"\n`;
  }
  const catalog = path.join(workDir, `catalog-${Date.now()}.yaml`);
  fs.writeFileSync(catalog, yaml);
  return support.ServerProcess.start(env.WEIGHTPATH_SERVER_BINARY, workDir, [
    `--catalog=${catalog}`, '--reload_interval=0s', `--store=sqlite:${path.join(workDir, 'fleet.db')}`,
  ]);
}

// The agent, run without blocking this process: the metadata and artifact
// servers answer from this same event loop.
function agent(args) {
  return new Promise((resolve, reject) => {
    const child = spawn(env.WEIGHTPATH_AGENT_BINARY, args, {
      env: { ...process.env, WEIGHTPATH_HW_PROFILE: path.join(workDir, 'profile.json') },
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk) => { stdout += chunk; });
    child.stderr.on('data', (chunk) => { stderr += chunk; });
    const timer = setTimeout(() => child.kill('SIGKILL'), 60000);
    child.on('error', reject);
    child.on('close', (status) => {
      clearTimeout(timer);
      resolve({ status, stdout, stderr });
    });
  });
}

test('a repository signed with @tufjs/models is verified by the real agent at boot', async () => {
  const metadataDir = path.join(workDir, 'metadata');
  const artifactsDir = path.join(workDir, 'artifacts');
  const repository = buildRepository(metadataDir, artifactsDir);
  const metadata = await serve(metadataDir);
  const mirror = await serve(artifactsDir);
  fs.writeFileSync(path.join(workDir, 'profile.json'), JSON.stringify(PROFILE));

  let server = await startServer(repository.artifacts, mirror.url);
  const device = path.join(workDir, 'device');
  fs.mkdirSync(device, { recursive: true });
  // Provisioned with the device: the first root, made by tuf-js's models.
  fs.copyFileSync(path.join(metadataDir, '1.root.json'), path.join(device, 'root.json'));
  const config = path.join(device, 'agent.yaml');
  const writeConfig = (address) => fs.writeFileSync(config, [
    `server: ${address}`, 'device_id: interop-tuf-agent-0001',
    `state_dir: ${device}/state`, `cache_dir: ${device}/cache`,
    `decision_file: ${device}/run/decision.json`, `env_file: ${device}/run/engine.env`,
    'budget: 30', 'call_timeout: 10', 'trust:', `  root: ${device}/root.json`,
    `  metadata_url: ${metadata.url}`, ''].join('\n'));
  try {
    writeConfig(server.address);
    const boot = await agent(['boot', '--config', config]);
    assert.equal(boot.status, 0, boot.stderr);
    assert.match(boot.stderr, /trust: followed the root from v1 to v2/);
    assert.match(boot.stderr, /trust: metadata current: root v2, timestamp v1, snapshot v1, targets v1/);
    const decision = JSON.parse(fs.readFileSync(path.join(device, 'run', 'decision.json'), 'utf8'));
    const chosen = repository.artifacts[decision.weight_path.name];
    assert.ok(chosen, `the server chose ${decision.weight_path.name}`);
    assert.match(boot.stderr, new RegExp(`trust: target ${chosen.targetPath} verified: ` +
      `${chosen.bytes.length} bytes, sha256 ${sha256(chosen.bytes)}, for x86_cpu, signed by targets v1`));
    assert.equal(decision.decision_source, 'server');
    assert.equal(decision.artifact.target_path, chosen.targetPath);
    assert.deepEqual(fs.readFileSync(decision.artifact_path), chosen.bytes);

    const status = JSON.parse((await agent(['trust', 'status', '--config', config, '-o', 'json'])).stdout);
    assert.equal(status.roles.root.version, 2);
    assert.equal(status.roles.root.threshold, 2);
    assert.deepEqual(status.roles.root.keyids, repository.root2.roles.root.keyIDs);
    assert.equal(status.roles.targets.target_count, Object.keys(repository.artifacts).length);
    assert.deepEqual(status.delegations.map((role) => [role.role, role.paths]),
      [['edge-team', ['models/edge/*']]]);

    // The delegated role's arm64 build, named for this x86 device by the
    // server: the agent loads edge-team (signed by its delegated key) and
    // refuses the build for its hardware class.
    await server.stop();
    server = await startServer(repository.artifacts, mirror.url,
      { [decision.weight_path.name]: repository.arm });
    writeConfig(server.address);
    const refused = await agent(['boot', '--config', config]);
    assert.equal(refused.status, 3, refused.stderr);
    assert.match(refused.stderr,
      /target "models\/edge\/w4a16-arm\.bin" \(edge-team\.json\): signed for hardware classes arm64_cpu, not x86_cpu/);
    assert.match(refused.stderr, /using the last good decision/);
  } finally {
    await server.stop();
  }
});
