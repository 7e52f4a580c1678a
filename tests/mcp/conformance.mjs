// MCP conformance of `agentenv mcp`, driven by the official TypeScript SDK
// client: handshake, tools/list, tool calls whose structuredContent the SDK
// validates against each tool's outputSchema, and the error paths.
//
// Usage: node tests/mcp/conformance.mjs <path to agentenv> (ctest runs it
// through client.sh, which skips when node or the SDK is missing).
// Needs tests/mcp/node_modules (scripts/install-deps.sh installs it).
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
if (!existsSync(join(here, 'node_modules', '@modelcontextprotocol', 'sdk'))) {
  console.error(`FAIL: ${join(here, 'node_modules')} has no @modelcontextprotocol/sdk; run scripts/install-deps.sh`);
  process.exit(1);
}
const { Client } = await import('@modelcontextprotocol/sdk/client/index.js');
const { StdioClientTransport } = await import('@modelcontextprotocol/sdk/client/stdio.js');
const { AjvJsonSchemaValidator } = await import('@modelcontextprotocol/sdk/validation/ajv');
const types = await import('@modelcontextprotocol/sdk/types.js');
const { LATEST_PROTOCOL_VERSION, McpError, ErrorCode, JSONRPCMessageSchema, InitializeResultSchema } = types;

const bin = process.argv[2];
if (!bin || !existsSync(bin)) {
  console.error(`usage: node conformance.mjs <agentenv binary> (got '${bin ?? ''}')`);
  process.exit(2);
}

const tmp = mkdtempSync(join(tmpdir(), 'agentenv-mcp-'));
const root = join(tmp, 'repo');
const work = join(root, 'work', 'current');
let failures = 0;

async function step(name, fn) {
  try {
    await fn();
    console.log(`ok   ${name}`);
  } catch (e) {
    failures++;
    console.log(`FAIL ${name}\n     ${String(e?.stack ?? e).split('\n').join('\n     ')}`);
  }
}

// Counts validations so the test knows the SDK's outputSchema check ran
// (a silent skip would make every structuredContent "valid").
class CountingValidator {
  constructor() {
    this.inner = new AjvJsonSchemaValidator();
    this.compiled = 0;
    this.validated = 0;
  }
  getValidator(schema) {
    this.compiled++;
    const v = this.inner.getValidator(schema);
    return (input) => {
      this.validated++;
      return v(input);
    };
  }
}

// Every message the server sends, checked against the SDK's JSON-RPC schema.
function recordIncoming(transport, seen) {
  let handler;
  Object.defineProperty(transport, 'onmessage', {
    get: () => handler,
    set: (fn) => {
      handler = (msg) => {
        seen.push(msg);
        fn?.(msg);
      };
    },
  });
}

try {
  mkdirSync(join(tmp, 'src', 'etc'), { recursive: true });
  writeFileSync(join(tmp, 'src', 'etc', 'app.conf'), 'mode=good\n');
  execFileSync(bin, ['init', '--root', root, '--from', join(tmp, 'src')], { stdio: ['ignore', 'ignore', 'inherit'] });

  const validator = new CountingValidator();
  const client = new Client({ name: 'agentenv-conformance', version: '1.0.0' }, { jsonSchemaValidator: validator });
  const transport = new StdioClientTransport({ command: bin, args: ['mcp', '--root', root], stderr: 'pipe' });
  let serverStderr = '';
  transport.stderr?.on('data', (d) => (serverStderr += d));
  const seen = [];
  recordIncoming(transport, seen);
  const tools = new Map();

  await step('initialize: handshake at the latest protocol version', async () => {
    await client.connect(transport);
    assert.equal(LATEST_PROTOCOL_VERSION, '2025-11-25', 'the SDK in use speaks 2025-11-25');
    const init = seen.find((m) => m.result?.protocolVersion);
    assert.ok(init, 'an initialize result was seen');
    assert.equal(init.result.protocolVersion, '2025-11-25');
    assert.equal(client.getServerVersion()?.name, 'agentenv');
    assert.ok(client.getServerCapabilities()?.tools, 'tools capability');
    assert.ok(client.getInstructions()?.length > 0, 'instructions');
  });

  await step('tools/list: schemas are objects and the SDK caches an output validator per tool', async () => {
    const list = await client.listTools();
    for (const t of list.tools) {
      tools.set(t.name, t);
      assert.equal(t.inputSchema.type, 'object', `${t.name} inputSchema`);
      assert.equal(t.outputSchema?.type, 'object', `${t.name} outputSchema`);
      assert.ok(t.description.length > 20, `${t.name} description`);
    }
    for (const name of ['snapshot', 'rollback', 'log', 'diff', 'show', 'head', 'status', 'tag']) {
      assert.ok(tools.has(name), `tool ${name}`);
    }
    assert.equal(validator.compiled, list.tools.length, 'one output validator per tool');
    assert.equal(tools.get('rollback').annotations?.destructiveHint, true);
    assert.equal(tools.get('log').annotations?.readOnlyHint, true);
  });

  // Every successful call below is validated by the SDK itself (it throws
  // on a mismatch); `validated` proves that it did.
  async function call(name, args) {
    const before = validator.validated;
    const r = await client.callTool({ name, arguments: args });
    if (!r.isError) {
      assert.ok(r.structuredContent, `${name} returned structuredContent`);
      assert.equal(validator.validated, before + 1, `${name}: the SDK validated structuredContent`);
      // The text is a summary for a model, never the whole data again.
      const text = r.content[0].text;
      assert.ok(text.length > 0, `${name}: a text summary`);
      assert.ok(!/[0-9a-f]{64}/.test(text), `${name}: short ids in the text: ${text}`);
    }
    return r;
  }

  let first;
  await step('snapshot: a change becomes a node', async () => {
    first = (await call('head', {})).structuredContent.node;
    writeFileSync(join(work, 'etc', 'app.conf'), 'mode=broken\n');
    writeFileSync(join(work, 'added.txt'), 'new\n');
    const r = await call('snapshot', { message: 'before the risky step' });
    assert.equal(r.isError, false);
    assert.equal(r.structuredContent.created, true);
    assert.equal(r.structuredContent.node.title, 'before the risky step');
    assert.equal(r.structuredContent.node.parent, first.id);
    const again = await call('snapshot', {});
    assert.equal(again.structuredContent.created, false, 'nothing changed: no node');
    assert.equal(again.structuredContent.node, null);
  });

  await step('diff: between nodes and against the live tree', async () => {
    const r = await call('diff', { from: first.short, to: 'HEAD' });
    const byPath = Object.fromEntries(r.structuredContent.changes.map((c) => [c.path, c.op]));
    assert.equal(byPath['added.txt'] ?? byPath['/added.txt'], '+', JSON.stringify(r.structuredContent));
    assert.equal(byPath['etc/app.conf'] ?? byPath['/etc/app.conf'], 'M');
    assert.equal(r.structuredContent.total, 2);
    assert.equal(r.structuredContent.truncated, false);
    writeFileSync(join(work, 'scratch.txt'), 'uncommitted\n');
    const live = await call('diff', {});
    assert.equal(live.structuredContent.total, 1, JSON.stringify(live.structuredContent));
  });

  await step('rollback: the live tree returns and uncommitted work is saved', async () => {
    const r = await call('rollback', { ref: first.short });
    assert.equal(r.isError, false);
    assert.equal(r.structuredContent.node.id, first.id);
    assert.match(r.structuredContent.saved ?? '', /^[0-9a-f]{64}$/, 'the uncommitted change was saved as a node');
    assert.equal(readFileSync(join(work, 'etc', 'app.conf'), 'utf8'), 'mode=good\n');
    assert.ok(!existsSync(join(work, 'added.txt')));
    assert.ok(!existsSync(join(work, 'scratch.txt')));
  });

  await step('log: newest first with the head flag on the rolled-back node', async () => {
    const r = await call('log', { limit: 10 });
    const nodes = r.structuredContent.nodes;
    assert.equal(nodes.length, 3, JSON.stringify(nodes.map((n) => n.title)));
    assert.ok(nodes[0].seq > nodes[1].seq && nodes[1].seq > nodes[2].seq);
    assert.deepEqual(nodes.filter((n) => n.head).map((n) => n.id), [first.id]);
  });

  await step('show, status, branches, tag: validated results', async () => {
    const show = await call('show', { ref: 'HEAD' });
    assert.equal(show.structuredContent.node.id, first.id);
    const st = await call('status', {});
    assert.equal(st.structuredContent.dirty, false);
    const br = await call('branches', {});
    const log = (await call('log', {})).structuredContent.nodes;
    assert.deepEqual(br.structuredContent.branches.map((b) => b.id), [log[0].id], 'the abandoned line stays a branch');
    const tag = await call('tag', { name: 'good' });
    assert.equal(tag.structuredContent.id, first.id);
    const tags = await call('tag', {});
    assert.deepEqual(tags.structuredContent.tags.map((t) => t.name), ['good']);
  });

  await step('rollback to an unknown ref: isError, says it did not happen, changes nothing', async () => {
    writeFileSync(join(work, 'keep.txt'), 'still here\n');
    const r = await call('rollback', { ref: 'no-such-node' });
    assert.equal(r.isError, true);
    const text = r.content.map((c) => c.text).join('\n');
    assert.match(text, /did not happen/);
    assert.match(text, /no-such-node/);
    assert.equal(readFileSync(join(work, 'keep.txt'), 'utf8'), 'still here\n');
    const head = await call('head', {});
    assert.equal(head.structuredContent.node.id, first.id);
  });

  await step('file tools: write, patch, read at a node, list, search, history; the SDK validates each', async () => {
    const w = await call('write_file', { path: 'etc/new/app.ini', content: 'a=1\nb=2\n' });
    assert.equal(w.structuredContent.node.title, 'write_file etc/new/app.ini');
    const p = await call('write_file', { path: 'etc/new/app.ini', patch: '@@ -2 +2 @@\n-b=2\n+b=3\n' });
    assert.equal(readFileSync(join(work, 'etc', 'new', 'app.ini'), 'utf8'), 'a=1\nb=3\n');
    const old = await call('read_file', { path: 'etc/new/app.ini', ref: w.structuredContent.node.short });
    assert.equal(old.structuredContent.text, 'a=1\nb=2\n');
    const ls = await call('list_dir', { path: 'etc', depth: 2 });
    assert.ok(ls.structuredContent.entries.some((e) => e.path === 'etc/new/app.ini'));
    const found = await call('search', { pattern: '^b=3$' });
    assert.deepEqual(found.structuredContent.matches.map((m) => m.path), ['etc/new/app.ini']);
    const hist = await call('file_history', { path: 'etc/new/app.ini' });
    assert.deepEqual(hist.structuredContent.changes.map((c) => c.node.id), [p.structuredContent.node.id, w.structuredContent.node.id]);
    symlinkSync('/etc/new/app.ini', join(work, 'etc', 'link.ini'));
    await call('snapshot', { message: 'link' });
    const res = await client.readResource({ uri: 'agentenv://node/HEAD/etc/link.ini' });
    assert.equal(res.contents[0].text, 'a=1\nb=3\n', 'the resource follows a link inside the tree');
  });

  await step('wrongly typed arguments: isError result, server keeps serving', async () => {
    const r = await call('log', { limit: 'ten' });
    assert.equal(r.isError, true);
    assert.match(r.content[0].text, /limit/);
    assert.equal((await call('head', {})).isError, false);
  });

  await step('unknown tool: JSON-RPC error -32602', async () => {
    await assert.rejects(client.callTool({ name: 'no_such_tool', arguments: {} }), (e) => {
      assert.ok(e instanceof McpError, String(e));
      assert.equal(e.code, ErrorCode.InvalidParams);
      return true;
    });
  });

  await step('ping', async () => {
    await client.ping();
  });

  await step('every message from the server is valid JSON-RPC', async () => {
    assert.ok(seen.length >= 15);
    for (const m of seen) JSONRPCMessageSchema.parse(m);
  });

  await client.close();
  if (failures && serverStderr) console.log(`server stderr:\n${serverStderr}`);

  // Raw exchanges for what the SDK client never sends: older versions,
  // malformed lines.
  await step('raw: version negotiation and malformed input', async () => {
    const replies = await rawSession(bin, root, [
      { jsonrpc: '2.0', id: 1, method: 'initialize',
        params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'old', version: '1' } } },
      { jsonrpc: '2.0', id: 2, method: 'initialize',
        params: { protocolVersion: '1999-01-01', capabilities: {}, clientInfo: { name: 'odd', version: '1' } } },
      '{not json',
      [{ jsonrpc: '2.0', id: 3, method: 'ping' }],
      { jsonrpc: '2.0', method: 'notifications/initialized' },
      { jsonrpc: '2.0', id: 4, method: 'no/such/method' },
      { jsonrpc: '2.0', id: 5, method: 'ping' },
    ]);
    assert.equal(replies.length, 6, JSON.stringify(replies));
    // JSON-RPC 2.0: an error about a message whose id could not be read
    // carries "id": null. The SDK's schema has no null id (MCP's makes the
    // id of an error optional), so those are checked by hand.
    for (const r of replies) {
      if (r.id === null) assert.deepEqual(Object.keys(r).sort(), ['error', 'id', 'jsonrpc']);
      else JSONRPCMessageSchema.parse(r);
    }
    assert.equal(InitializeResultSchema.parse(replies[0].result).protocolVersion, '2025-06-18');
    assert.equal(InitializeResultSchema.parse(replies[1].result).protocolVersion, '2025-11-25');
    assert.equal(replies[2].error.code, -32700);
    assert.equal(replies[2].id, null);
    assert.equal(replies[3].error.code, -32600);
    assert.equal(replies[3].id, null);
    assert.equal(replies[4].error.code, -32601);
    assert.deepEqual(replies[5], { jsonrpc: '2.0', id: 5, result: {} });
  });
} finally {
  rmSync(tmp, { recursive: true, force: true });
}

// Sends `messages` (objects, or raw strings) one per line and returns every
// reply line once the server exits on end of input.
function rawSession(binary, repoRoot, messages) {
  return new Promise((resolve, reject) => {
    const child = spawn(binary, ['mcp', '--root', repoRoot], { stdio: ['pipe', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.on('error', reject);
    child.on('close', (code) => {
      if (code !== 0) return reject(new Error(`agentenv mcp exited ${code}`));
      resolve(out.split('\n').filter((l) => l.trim()).map((l) => JSON.parse(l)));
    });
    for (const m of messages) child.stdin.write((typeof m === 'string' ? m : JSON.stringify(m)) + '\n');
    child.stdin.end();
  });
}

console.log(failures ? `${failures} step(s) FAILED` : 'all steps passed');
process.exit(failures ? 1 : 0);
