// TUF metadata between independent implementations, both ways:
//  - a repository made and signed with @tufjs/models (Node's TUF library,
//    not our code) is accepted by `weightpathctl repo verify`, which runs
//    the C++ client workflow (trust/) a device runs;
//  - a repository made by `weightpathctl repo` is accepted by tuf-js's own
//    Updater, fetching over HTTP from a loopback server, through a root
//    rotation and a timestamp key rotation.
// A canonical-JSON, key id or signature disagreement fails here.
//
// Run by CTest (tests/interop/CMakeLists.txt), which sets WEIGHTPATH_CTL_BINARY.
'use strict';

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const fs = require('node:fs');
const http = require('node:http');
const os = require('node:os');
const path = require('node:path');
const { execFileSync } = require('node:child_process');

const {
  Metadata, Root, Timestamp, Snapshot, Targets, Key, MetaFile, TargetFile, Signature,
} = require('@tufjs/models');
// Not re-exported by the package index; the lock pins the layout.
const { DelegatedRole, Role } = require('@tufjs/models/dist/role');
const { Delegations } = require('@tufjs/models/dist/delegations');
const { canonicalize } = require('@tufjs/canonical-json');
const { Updater } = require('tuf-js');

const support = require('./node_support');

const env = support.requiredEnvironment(['WEIGHTPATH_CTL_BINARY']);
const DAY_MS = 24 * 3600 * 1000;

let workDir;

before(() => {
  workDir = fs.mkdtempSync(path.join(os.tmpdir(), 'wp-interop-tuf-'));
});

after(() => {
  fs.rmSync(workDir, { recursive: true, force: true });
});

// TUF's expiry form: no fractions of a second.
function expiresIn(days) {
  return new Date(Date.now() + days * DAY_MS).toISOString().replace(/\.\d{3}Z$/, 'Z');
}

function sha256(bytes) {
  return crypto.createHash('sha256').update(bytes).digest('hex');
}

// An ed25519 key as TUF lists it, its key id computed with tuf-js's own
// canonical JSON, and the private half.
function newKey() {
  const { publicKey, privateKey } = crypto.generateKeyPairSync('ed25519');
  // The last 32 bytes of the SubjectPublicKeyInfo are the raw key.
  const raw = publicKey.export({ format: 'der', type: 'spki' }).subarray(-32).toString('hex');
  const body = { keytype: 'ed25519', scheme: 'ed25519', keyval: { public: raw } };
  const keyID = sha256(canonicalize(body));
  return {
    key: new Key({ keyID, keyType: 'ed25519', scheme: 'ed25519', keyVal: { public: raw } }),
    privateKey,
    pem: privateKey.export({ format: 'pem', type: 'pkcs8' }),
  };
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

function ctl(args) {
  return support.run(env.WEIGHTPATH_CTL_BINARY, args);
}

// weightpathctl's exit code and stderr, for the runs that must fail.
function ctlFails(args) {
  try {
    execFileSync(env.WEIGHTPATH_CTL_BINARY, args, { encoding: 'utf8', stdio: 'pipe' });
  } catch (error) {
    return { status: error.status, stderr: error.stderr };
  }
  throw new Error(`weightpathctl ${args.join(' ')} succeeded`);
}

// A repository made with @tufjs/models only: root v1 -> v2 (a second root
// key, threshold 2, signed by both thresholds), a target with weightpath's
// custom fields, a delegated role one level deep, consistent snapshots.
function buildTufJsRepository(dir) {
  fs.mkdirSync(dir, { recursive: true });
  const keys = {};
  for (const name of ['root1', 'root2', 'targets', 'snapshot', 'timestamp', 'edge']) keys[name] = newKey();
  const write = (name, bytes) => fs.writeFileSync(path.join(dir, name), bytes);

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
  const root2Bytes = sign(new Metadata(root2), keys.root1, keys.root2);
  write('2.root.json', root2Bytes);
  write('root.json', root2Bytes);

  const edgeTarget = Buffer.from('edge build');
  const edge = new Targets({ version: 1, expires: expiresIn(30) });
  edge.addTarget(new TargetFile({
    path: 'models/edge/w4a16-tinygemm.bin', length: edgeTarget.length,
    hashes: { sha256: sha256(edgeTarget) },
    unrecognizedFields: { custom: {
      model: 'spark-1.7b', weight_path: 'w4a16-tinygemm', version: '2026.11.2',
      hardware_classes: ['arm64_cpu'],
    } },
  }));
  const edgeBytes = sign(new Metadata(edge), keys.edge);
  write('1.edge-team.json', edgeBytes);

  const artifact = Buffer.from('int4 weights');
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
  targets.addTarget(new TargetFile({
    path: 'models/spark/w4a8-amx.bin', length: artifact.length, hashes: { sha256: sha256(artifact) },
    unrecognizedFields: { custom: {
      model: 'spark-1.7b', weight_path: 'w4a8-amx', version: '2026.11.1',
      hardware_classes: ['x86_cpu'],
    } },
  }));
  const targetsBytes = sign(new Metadata(targets), keys.targets);
  write('1.targets.json', targetsBytes);

  const snapshot = new Snapshot({
    version: 1, expires: expiresIn(7),
    meta: { 'targets.json': metaFor(targetsBytes, 1), 'edge-team.json': metaFor(edgeBytes, 1) },
  });
  const snapshotBytes = sign(new Metadata(snapshot), keys.snapshot);
  write('1.snapshot.json', snapshotBytes);

  const timestamp = new Timestamp({ version: 1, expires: expiresIn(1), snapshotMeta: metaFor(snapshotBytes, 1) });
  write('timestamp.json', sign(new Metadata(timestamp), keys.timestamp));
  return { keys, artifact, timestamp, snapshotBytes };
}

// A static file server over `dir` on a free loopback port, like the
// mirror a device fetches from.
function serve(dir) {
  const server = http.createServer((request, response) => {
    const name = decodeURIComponent(new URL(request.url, 'http://x').pathname);
    const file = path.join(dir, path.normalize(name));
    if (!file.startsWith(dir + path.sep) || !fs.existsSync(file) || !fs.statSync(file).isFile()) {
      response.writeHead(404);
      response.end();
      return;
    }
    response.writeHead(200, { 'content-type': 'application/octet-stream' });
    response.end(fs.readFileSync(file));
  });
  return new Promise((resolve) => {
    server.listen(0, '127.0.0.1', () => resolve({
      server, url: `http://127.0.0.1:${server.address().port}`,
      close: () => new Promise((done) => server.close(done)),
    }));
  });
}

test('a repository signed with @tufjs/models is accepted by weightpathctl repo verify', async () => {
  const dir = path.join(workDir, 'tufjs-repo');
  const built = buildTufJsRepository(dir);

  // tuf-js accepts its own repository: the fixture is valid TUF.
  const served = await serve(dir);
  try {
    const cache = fs.mkdtempSync(path.join(workDir, 'tufjs-cache-'));
    fs.copyFileSync(path.join(dir, '1.root.json'), path.join(cache, 'root.json'));
    const updater = new Updater({ metadataDir: cache, metadataBaseUrl: served.url, targetDir: cache });
    const info = await updater.getTargetInfo('models/edge/w4a16-tinygemm.bin');
    assert.ok(info, 'tuf-js finds the delegated target');
  } finally {
    await served.close();
  }

  const verified = JSON.parse(ctl(['repo', 'verify', '--metadata-dir', dir,
    '--root', path.join(dir, '1.root.json'), '--target', 'models/spark/w4a8-amx.bin', '-o', 'json']));
  assert.equal(verified.root.version, 2);
  assert.equal(verified.root.roles.root.threshold, 2);
  assert.equal(verified.timestamp.version, 1);
  assert.equal(verified.targets.version, 1);
  assert.deepEqual(verified.target, {
    path: 'models/spark/w4a8-amx.bin', length: built.artifact.length, sha256: sha256(built.artifact),
    role: 'targets', custom: {
      hardware_classes: ['x86_cpu'], model: 'spark-1.7b', version: '2026.11.1', weight_path: 'w4a8-amx',
    },
  });
  assert.deepEqual(verified.target_files.map((t) => `${t.path}@${t.role}`),
    ['models/edge/w4a16-tinygemm.bin@edge-team', 'models/spark/w4a8-amx.bin@targets']);

  // The same repository with a timestamp signed by the wrong key is refused.
  const forged = new Metadata(Timestamp.fromJSON(built.timestamp.toJSON()));
  fs.writeFileSync(path.join(dir, 'timestamp.json'), sign(forged, built.keys.snapshot));
  const refused = ctlFails(['repo', 'verify', '--metadata-dir', dir, '--root', path.join(dir, '1.root.json')]);
  assert.equal(refused.status, 1);
  assert.match(refused.stderr, /timestamp\.json: 0 of the 1 signatures required from the timestamp keys of root v2 \(below threshold\)/);
});

test('a repository made by weightpathctl repo is accepted by tuf-js Updater', async () => {
  const repo = path.join(workDir, 'wp-repo');
  const keysDir = path.join(workDir, 'wp-keys');
  const artifacts = path.join(workDir, 'artifacts');
  fs.mkdirSync(path.join(artifacts, 'models', 'spark'), { recursive: true });
  const artifact = Buffer.from('amx int4 weights for the interop suite');
  const artifactPath = path.join(artifacts, 'models', 'spark', 'w4a8-amx.bin');
  fs.writeFileSync(artifactPath, artifact);

  ctl(['repo', 'init', '--repo', repo, '--generate-keys', keysDir]);
  const key = (role) => path.join(keysDir, `${role}.pem`);
  ctl(['repo', 'add-target', '--repo', repo, '--path', 'models/spark/w4a8-amx.bin', '--file', artifactPath,
    '--model', 'spark-1.7b', '--weight-path', 'w4a8-amx', '--version', '2026.11.1',
    '--hardware-classes', 'x86_cpu,arm64_cpu']);
  ctl(['repo', 'sign', '--repo', repo, '--role', 'targets', '--key', key('targets')]);
  ctl(['repo', 'timestamp', '--repo', repo, '--key', key('timestamp'), '--snapshot-key', key('snapshot')]);

  const metadata = await serve(path.join(repo, 'metadata'));
  const mirror = await serve(artifacts);
  try {
    // A device's cache: provisioned with 1.root.json only.
    const cache = fs.mkdtempSync(path.join(workDir, 'device-'));
    fs.copyFileSync(path.join(repo, 'metadata', '1.root.json'), path.join(cache, 'root.json'));
    const updater = () => new Updater({
      metadataDir: cache, metadataBaseUrl: metadata.url, targetDir: cache, targetBaseUrl: mirror.url,
      // The artifact mirror keeps plain names; TUF's hash-prefixed target
      // names are a repository layout weightpath does not require.
      config: { prefixTargetsWithHash: false },
    });

    const first = updater();
    const info = await first.getTargetInfo('models/spark/w4a8-amx.bin');
    assert.ok(info);
    assert.equal(info.length, artifact.length);
    assert.deepEqual(info.hashes, { sha256: sha256(artifact) });
    assert.deepEqual(info.custom, {
      hardware_classes: ['x86_cpu', 'arm64_cpu'], model: 'spark-1.7b', version: '2026.11.1',
      weight_path: 'w4a8-amx',
    });
    const downloaded = await first.downloadTarget(info, path.join(cache, 'artifact.bin'));
    assert.deepEqual(fs.readFileSync(downloaded), artifact);

    // Root rotation (a second root key, threshold 2, signed by both
    // thresholds) and a timestamp key rotation, with a new key made by
    // Node; the device that trusted root v1 follows both.
    const newRoot = newKey();
    const newTimestamp = newKey();
    const pemFile = (name, pem) => {
      const file = path.join(keysDir, name);
      fs.writeFileSync(file, pem, { mode: 0o600 });
      return file;
    };
    const newRootFile = pemFile('root-2.pem', newRoot.pem);
    const newTimestampFile = pemFile('timestamp-2.pem', newTimestamp.pem);
    ctl(['repo', 'rotate-root', '--repo', repo, '--role', 'timestamp', '--keys', newTimestampFile]);
    ctl(['repo', 'sign', '--repo', repo, '--role', 'root', '--key', key('root')]);
    ctl(['repo', 'timestamp', '--repo', repo, '--key', newTimestampFile]);
    ctl(['repo', 'rotate-root', '--repo', repo, '--role', 'root', '--keys', `${key('root')},${newRootFile}`,
      '--threshold', '2']);
    ctl(['repo', 'sign', '--repo', repo, '--role', 'root', '--key', `${key('root')},${newRootFile}`]);
    ctl(['repo', 'add-target', '--repo', repo, '--path', 'models/spark/bf16.bin', '--length', '5',
      '--sha256', sha256('bf16!'), '--model', 'spark-1.7b', '--weight-path', 'bf16', '--version', '2026.11.3',
      '--hardware-classes', 'cuda_discrete']);
    ctl(['repo', 'sign', '--repo', repo, '--role', 'targets', '--key', key('targets')]);
    ctl(['repo', 'timestamp', '--repo', repo, '--key', newTimestampFile, '--snapshot-key', key('snapshot')]);

    const second = updater();
    await second.refresh();
    const rotated = JSON.parse(fs.readFileSync(path.join(cache, 'root.json'), 'utf8'));
    assert.equal(rotated.signed.version, 3);
    assert.equal(rotated.signed.roles.root.threshold, 2);
    assert.deepEqual(rotated.signed.roles.timestamp.keyids, [newTimestamp.key.keyID]);
    const bf16 = await second.getTargetInfo('models/spark/bf16.bin');
    assert.ok(bf16);
    assert.equal(bf16.custom.weight_path, 'bf16');
    assert.ok(await second.getTargetInfo('models/spark/w4a8-amx.bin'));

    // tuf-js refuses what it should: an old timestamp replayed.
    const stale = fs.readFileSync(path.join(repo, 'metadata', 'timestamp.json'));
    ctl(['repo', 'timestamp', '--repo', repo, '--key', newTimestampFile]);
    const third = updater();
    await third.refresh();
    fs.writeFileSync(path.join(repo, 'metadata', 'timestamp.json'), stale);
    await assert.rejects(updater().refresh(), /less than current version/);
  } finally {
    await metadata.close();
    await mirror.close();
  }
});

// A directory build's manifest as an independent implementation writes it:
// every file's path, size and SHA-256, sorted bytewise by path, in TUF's
// canonical JSON (the form trust/build_manifest.h documents).
function buildManifest(dir) {
  const files = [];
  const walk = (relative) => {
    for (const entry of fs.readdirSync(path.join(dir, relative), { withFileTypes: true })) {
      const name = relative ? `${relative}/${entry.name}` : entry.name;
      if (entry.isDirectory()) {
        walk(name);
      } else {
        const bytes = fs.readFileSync(path.join(dir, name));
        files.push({ path: name, sha256: sha256(bytes), size_bytes: bytes.length });
      }
    }
  };
  walk('');
  files.sort((a, b) => Buffer.compare(Buffer.from(a.path), Buffer.from(b.path)));
  return { files, bytes: Buffer.from(canonicalize({ files, format: 'weightpath-build-manifest/1' })) };
}

function writeModelDirectory(dir, seed) {
  const files = {
    'config.json': `{"model_type":"qwen3","seed":${seed}}\n`,
    'tokenizer.json': '{"version":"1.0"}\n',
    'tokenizer_config.json': '{"eos_token":"<|endoftext|>"}\n',
    'model-00001-of-00002.safetensors': `shard one ${seed}`.repeat(500),
    'model-00002-of-00002.safetensors': `shard two ${seed}`.repeat(500),
    'nested/generation_config.json': '{"temperature":0.6}\n',
  };
  for (const [name, text] of Object.entries(files)) {
    fs.mkdirSync(path.dirname(path.join(dir, name)), { recursive: true });
    fs.writeFileSync(path.join(dir, name), text);
  }
}

test('a directory build signed by weightpathctl is read by tuf-js, its manifest byte-identical to ours', async () => {
  const repo = path.join(workDir, 'dir-repo');
  const keysDir = path.join(workDir, 'dir-keys');
  const model = path.join(workDir, 'model-dir');
  writeModelDirectory(model, 1);
  const target = 'models/spark/bf16/2026.12.1';
  ctl(['repo', 'init', '--repo', repo, '--generate-keys', keysDir]);
  const key = (role) => path.join(keysDir, `${role}.pem`);
  const manifestOut = path.join(workDir, 'manifest.json');
  ctl(['repo', 'add-target', '--repo', repo, '--path', target, '--dir', model, '--manifest-out', manifestOut,
    '--model', 'spark-1.7b', '--weight-path', 'bf16', '--version', '2026.12.1', '--hardware-classes', 'cuda_discrete']);
  ctl(['repo', 'sign', '--repo', repo, '--role', 'targets', '--key', key('targets')]);
  ctl(['repo', 'timestamp', '--repo', repo, '--key', key('timestamp'), '--snapshot-key', key('snapshot')]);

  // Node's manifest of the same directory is the bytes weightpathctl wrote.
  const ours = buildManifest(model);
  assert.deepEqual(fs.readFileSync(manifestOut), ours.bytes);

  // tuf-js verifies the target (the manifest) and reads the file list from
  // its custom; a device checks each file against that list.
  const mirrorDir = path.join(workDir, 'dir-mirror');
  fs.mkdirSync(path.join(mirrorDir, path.dirname(target)), { recursive: true });
  fs.copyFileSync(manifestOut, path.join(mirrorDir, target));
  const metadata = await serve(path.join(repo, 'metadata'));
  const mirror = await serve(mirrorDir);
  try {
    const cache = fs.mkdtempSync(path.join(workDir, 'dir-device-'));
    fs.copyFileSync(path.join(repo, 'metadata', '1.root.json'), path.join(cache, 'root.json'));
    const updater = new Updater({
      metadataDir: cache, metadataBaseUrl: metadata.url, targetDir: cache, targetBaseUrl: mirror.url,
      config: { prefixTargetsWithHash: false },
    });
    const info = await updater.getTargetInfo(target);
    assert.ok(info);
    assert.equal(info.length, ours.bytes.length);
    assert.deepEqual(info.hashes, { sha256: sha256(ours.bytes) });
    assert.deepEqual(info.custom.files, ours.files);
    assert.equal(info.custom.weight_path, 'bf16');
    const downloaded = await updater.downloadTarget(info, path.join(cache, 'manifest.json'));
    assert.deepEqual(JSON.parse(fs.readFileSync(downloaded, 'utf8')).files, ours.files);
  } finally {
    await metadata.close();
    await mirror.close();
  }
});

test('a directory build signed with @tufjs/models is checked by weightpathctl repo verify --dir', () => {
  const dir = path.join(workDir, 'tufjs-dir-repo');
  fs.mkdirSync(dir, { recursive: true });
  const model = path.join(workDir, 'tufjs-model');
  writeModelDirectory(model, 2);
  const keys = {};
  for (const name of ['root', 'targets', 'snapshot', 'timestamp']) keys[name] = newKey();
  const write = (name, bytes) => fs.writeFileSync(path.join(dir, name), bytes);
  const root = new Root({ version: 1, expires: expiresIn(365), consistentSnapshot: true });
  for (const role of ['root', 'targets', 'snapshot', 'timestamp']) root.addKey(keys[role].key, role);
  write('1.root.json', sign(new Metadata(root), keys.root));

  const manifest = buildManifest(model);
  const target = 'models/spark/w4a8-amx/2026.12.1';
  const targets = new Targets({ version: 1, expires: expiresIn(90) });
  targets.addTarget(new TargetFile({
    path: target, length: manifest.bytes.length, hashes: { sha256: sha256(manifest.bytes) },
    unrecognizedFields: { custom: {
      model: 'spark-1.7b', weight_path: 'w4a8-amx', version: '2026.12.1', hardware_classes: ['x86_cpu'],
      files: manifest.files,
    } },
  }));
  const targetsBytes = sign(new Metadata(targets), keys.targets);
  write('1.targets.json', targetsBytes);
  const snapshotBytes = sign(new Metadata(new Snapshot({
    version: 1, expires: expiresIn(7), meta: { 'targets.json': metaFor(targetsBytes, 1) },
  })), keys.snapshot);
  write('1.snapshot.json', snapshotBytes);
  write('timestamp.json', sign(new Metadata(new Timestamp({
    version: 1, expires: expiresIn(1), snapshotMeta: metaFor(snapshotBytes, 1),
  })), keys.timestamp));

  const verify = ['repo', 'verify', '--metadata-dir', dir, '--root', path.join(dir, '1.root.json'),
    '--target', target, '--dir', model];
  const verified = JSON.parse(ctl([...verify, '-o', 'json']));
  assert.deepEqual(verified.directory_verified, { path: model, files: 6, size_bytes:
    manifest.files.reduce((sum, file) => sum + file.size_bytes, 0) });

  // One byte of one shard changed, then a file added: each named.
  const shard = path.join(model, 'model-00002-of-00002.safetensors');
  const bytes = fs.readFileSync(shard);
  bytes[10] ^= 1;
  fs.writeFileSync(shard, bytes);
  let refused = ctlFails(verify);
  assert.notEqual(refused.status, 0);
  assert.match(refused.stderr, /"model-00002-of-00002\.safetensors": sha256 [0-9a-f]{64}, the signed build says/);
  bytes[10] ^= 1;
  fs.writeFileSync(shard, bytes);
  fs.writeFileSync(path.join(model, 'extra.bin'), 'not signed');
  refused = ctlFails(verify);
  assert.match(refused.stderr, /"extra\.bin": not in the signed build \(extra file\)/);
});

test('timestamps weightpath-server signs with --timestamp_key are accepted by tuf-js Updater', async () => {
  const server = support.requiredEnvironment(['WEIGHTPATH_SERVER_BINARY']).WEIGHTPATH_SERVER_BINARY;
  const repo = path.join(workDir, 'server-repo');
  const keysDir = path.join(workDir, 'server-keys');
  ctl(['repo', 'init', '--repo', repo, '--generate-keys', keysDir]);
  const key = (role) => path.join(keysDir, `${role}.pem`);
  // One target per weight path the server's default policy can return.
  for (const name of ['bf16', 'export-qnn-w8a16', 'fp16', 'w4a8-amx', 'w4a16-tinygemm']) {
    ctl(['repo', 'add-target', '--repo', repo, '--path', `models/spark/${name}.bin`, '--length', '7',
      '--sha256', sha256(name), '--model', 'Spark-X2.5-1.7B', '--weight-path', name,
      '--version', '1', '--hardware-classes', 'x86_cpu']);
  }
  ctl(['repo', 'sign', '--repo', repo, '--role', 'targets', '--key', key('targets')]);
  ctl(['repo', 'timestamp', '--repo', repo, '--key', key('timestamp'), '--snapshot-key', key('snapshot'),
    '--expires', '4s']);
  const timestampFile = path.join(repo, 'metadata', 'timestamp.json');
  const published = () => JSON.parse(fs.readFileSync(timestampFile, 'utf8')).signed.version;
  const before = published();

  const running = await support.ServerProcess.start(server, workDir, [
    '--store=none', `--catalog=${repo}`, `--catalog_root=${path.join(repo, 'metadata', '1.root.json')}`,
    '--catalog_artifact_url=http://127.0.0.1:1/artifacts', `--catalog_state_dir=${path.join(workDir, 'state')}`,
    `--timestamp_key=${key('timestamp')}`, '--timestamp_lifetime=4s']);
  const metadata = await serve(path.join(repo, 'metadata'));
  try {
    // The server re-signs once less than half the lifetime is left.
    const deadline = Date.now() + 30000;
    while (published() < before + 2) {
      assert.ok(Date.now() < deadline, `timestamp still v${published()}: ${fs.readFileSync(running.logPath, 'utf8')}`);
      await new Promise((done) => setTimeout(done, 100));
    }
    // A device provisioned with 1.root.json, and tuf-js's own checks of it.
    const cache = fs.mkdtempSync(path.join(workDir, 'server-device-'));
    fs.copyFileSync(path.join(repo, 'metadata', '1.root.json'), path.join(cache, 'root.json'));
    const updater = new Updater({
      metadataDir: cache, metadataBaseUrl: metadata.url, targetDir: cache,
      config: { prefixTargetsWithHash: false },
    });
    const info = await updater.getTargetInfo('models/spark/w4a8-amx.bin');
    assert.ok(info);
    assert.equal(info.custom.weight_path, 'w4a8-amx');
    const trusted = JSON.parse(fs.readFileSync(path.join(cache, 'timestamp.json'), 'utf8'));
    assert.ok(trusted.signed.version >= before + 2, `tuf-js trusts timestamp v${trusted.signed.version}`);
    assert.ok(new Date(trusted.signed.expires) > new Date());
  } finally {
    await metadata.close();
    await running.stop();
  }
});
