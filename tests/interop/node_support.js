// Helpers of the Node interop suite: the server process, weightpathctl, and
// protobuf's JSON mapping for what proto-loader hands back.
'use strict';

const { spawn, execFileSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const readline = require('node:readline');

const protobuf = require('protobufjs');

// CTest sets these; a suite run without them must fail, not skip.
function requiredEnvironment(names) {
  const values = {};
  for (const name of names) {
    if (!process.env[name]) throw new Error(`${name} is not set (run this suite through ctest)`);
    values[name] = process.env[name];
  }
  return values;
}

// Starting on a loaded 2-core CI machine can be slow.
const START_TIMEOUT_MS = 30000;

// weightpath-server on ports it picks itself (127.0.0.1:0), read back from
// its "listening grpc=ADDR metrics=ADDR" line.
class ServerProcess {
  static start(binary, workDir, extraArgs) {
    const logPath = path.join(workDir, 'server.log');
    const log = fs.openSync(logPath, 'w');
    // The suites' requests stand for single-file agents: the embedded demo's
    // directory builds would be refused to them (accepts_directory_builds).
    const catalog = extraArgs.some((arg) => arg.startsWith('--catalog='))
      ? [] : [`--catalog=${path.join(__dirname, '..', 'data', 'single_file_catalog.yaml')}`];
    const child = spawn(binary,
      ['--listen=127.0.0.1:0', '--metrics_listen=127.0.0.1:0', ...catalog, ...extraArgs],
      { stdio: ['ignore', 'pipe', log] });
    fs.closeSync(log);
    return new Promise((resolve, reject) => {
      const fail = (why) => {
        child.kill('SIGKILL');
        reject(new Error(`weightpath-server did not start: ${why}\nlog:\n` +
          fs.readFileSync(logPath, 'utf8')));
      };
      const timer = setTimeout(() => fail('no listening line'), START_TIMEOUT_MS);
      child.on('exit', (code, signal) => fail(`exited (code ${code}, signal ${signal})`));
      readline.createInterface({ input: child.stdout }).on('line', (line) => {
        const grpcAddress = /^listening grpc=(\S+)/.exec(line);
        if (!grpcAddress) return;
        clearTimeout(timer);
        child.removeAllListeners('exit');
        resolve(new ServerProcess(child, grpcAddress[1], logPath));
      });
    });
  }

  constructor(child, address, logPath) {
    this.child = child;
    this.address = address;
    this.logPath = logPath;
  }

  // SIGTERM, and SIGKILL if it has not stopped within its grace period.
  stop() {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return Promise.resolve();
    return new Promise((resolve) => {
      const kill = setTimeout(() => this.child.kill('SIGKILL'), 15000);
      this.child.on('exit', () => { clearTimeout(kill); resolve(); });
      this.child.kill('SIGTERM');
    });
  }
}

// Runs a program to completion; its stdout, or an error with its stderr.
function run(binary, args) {
  try {
    return execFileSync(binary, args, { encoding: 'utf8', timeout: 30000 });
  } catch (error) {
    throw new Error(`${binary} ${args.join(' ')} failed (${error.status}): ${error.stderr}`);
  }
}

// Calls `attempt` until it succeeds or fails with a code outside
// `retryCodes`, for at most `budgetMs`.
async function retry(attempt, retryCodes, budgetMs) {
  const giveUp = Date.now() + budgetMs;
  for (;;) {
    try {
      return await attempt();
    } catch (error) {
      if (!retryCodes.includes(error.code) || Date.now() > giveUp) throw error;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
}

function timestampJson(object) {
  const seconds = Number(object.seconds);
  const nanos = object.nanos || 0;
  const iso = new Date(seconds * 1000).toISOString().replace('.000Z', '');
  if (nanos === 0) return `${iso}Z`;
  // Protobuf prints 3, 6 or 9 fractional digits, as few as the value needs.
  let digits = String(nanos).padStart(9, '0');
  while (digits.endsWith('000')) digits = digits.slice(0, -3);
  return `${iso}.${digits}Z`;
}

// protobufjs's bundled struct.proto names Value's fields in camelCase, a
// descriptor fetched by reflection in snake_case: accept both.
function structValueJson(value) {
  const kind = value.kind && value.kind.replace(/_([a-z])/g, (_, letter) => letter.toUpperCase());
  const member = (camel) => value[camel] !== undefined ? value[camel]
    : value[camel.replace(/[A-Z]/g, (letter) => `_${letter.toLowerCase()}`)];
  switch (kind) {
    case 'nullValue': return null;
    case 'numberValue': case 'stringValue': case 'boolValue': return member(kind);
    case 'structValue': return structJson(member(kind));
    case 'listValue': return member(kind).values.map(structValueJson);
    default: throw new Error(`google.protobuf.Value with no kind: ${JSON.stringify(value)}`);
  }
}

// A map field's [key, value] pairs. proto-loader gives a map as an object;
// protobufjs's Root.fromDescriptor (types from reflection) keeps it as the
// repeated key/value entries it is on the wire.
function mapEntries(value) {
  if (Array.isArray(value)) return value.map((entry) => [entry.key, entry.value]);
  return Object.entries(value || {});
}

// protoc turns `map<K, V> some_name` into a repeated nested SomeNameEntry.
function isMapEntryField(field) {
  const entry = field.resolvedType;
  if (!field.repeated || !(entry instanceof protobuf.Type) || entry.parent !== field.parent) {
    return false;
  }
  const camel = field.name.replace(/_([a-z0-9])/g, (_, c) => c.toUpperCase());
  return entry.name === `${camel[0].toUpperCase()}${camel.slice(1)}Entry` &&
    entry.fieldsById[1] && entry.fieldsById[1].name === 'key' &&
    entry.fieldsById[2] && entry.fieldsById[2].name === 'value';
}

function structJson(object) {
  const out = {};
  for (const [key, value] of mapEntries(object.fields)) out[key] = structValueJson(value);
  return out;
}

function scalarJson(field, value) {
  if (field.resolvedType instanceof protobuf.Enum) return value;  // by name (enums: String)
  if ((field.type === 'double' || field.type === 'float') && !Number.isFinite(value)) {
    return Number.isNaN(value) ? 'NaN' : (value > 0 ? 'Infinity' : '-Infinity');
  }
  return value;  // 64-bit integers and bytes are already strings (longs/bytes: String)
}

function valueJson(field, value) {
  return field.resolvedType instanceof protobuf.Type
    ? toProtoJson(field.resolvedType, value) : scalarJson(field, value);
}

// A proto-loader object (keepCase, longs/enums/bytes: String, defaults,
// oneofs) in protobuf's JSON mapping as weightpathctl prints it: proto field
// names, primitive fields always printed, repeated and map fields always
// printed, an unset message or proto3 `optional` field left out. Driven by
// the message's own descriptor, so fields added to the API are compared too.
function toProtoJson(type, object) {
  switch (type.fullName) {
    case '.google.protobuf.Struct': return structJson(object);
    case '.google.protobuf.Value': return structValueJson(object);
    case '.google.protobuf.ListValue': return object.values.map(structValueJson);
    case '.google.protobuf.Timestamp': return timestampJson(object);
    default:
      if (type.fullName.startsWith('.google.protobuf.')) {
        throw new Error(`no JSON mapping written here for ${type.fullName}`);
      }
  }
  const out = {};
  for (const field of type.fieldsArray) {
    field.resolve();
    const value = object[field.name];
    if (field.map) {
      const entries = {};
      for (const [key, item] of mapEntries(value)) entries[key] = valueJson(field, item);
      out[field.name] = entries;
    } else if (isMapEntryField(field)) {
      const valueField = field.resolvedType.fieldsById[2].resolve();
      const entries = {};
      for (const [key, item] of mapEntries(value)) entries[key] = valueJson(valueField, item);
      out[field.name] = entries;
    } else if (field.repeated) {
      out[field.name] = (value || []).map((item) => valueJson(field, item));
    } else if (field.partOf || field.resolvedType instanceof protobuf.Type) {
      // Fields with presence: printed only when set.
      if (value !== undefined && value !== null) out[field.name] = valueJson(field, value);
    } else {
      out[field.name] = scalarJson(field, value);
    }
  }
  return out;
}

// Every path where two JSON values differ, as "a.b[2].c: expected X, got Y".
function differences(expected, actual, where = '') {
  const show = (value) => (value === undefined ? '(absent)' : JSON.stringify(value));
  if (Array.isArray(expected) && Array.isArray(actual)) {
    const found = [];
    for (let i = 0; i < Math.max(expected.length, actual.length); ++i) {
      found.push(...differences(expected[i], actual[i], `${where}[${i}]`));
    }
    return found;
  }
  const isObject = (value) => value !== null && typeof value === 'object' && !Array.isArray(value);
  if (isObject(expected) && isObject(actual)) {
    const found = [];
    for (const key of [...new Set([...Object.keys(expected), ...Object.keys(actual)])].sort()) {
      found.push(...differences(expected[key], actual[key], where ? `${where}.${key}` : key));
    }
    return found;
  }
  if (expected === actual) return [];
  return [`${where || '(top)'}: expected ${show(expected)}, got ${show(actual)}`];
}

module.exports = {
  requiredEnvironment, ServerProcess, run, retry, toProtoJson, differences,
};
