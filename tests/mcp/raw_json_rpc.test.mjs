// belljar mcp on the wire: raw lines through a plain child process, for what a well-behaved
// SDK never sends (malformed JSON-RPC) and for the ordering guarantees.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import readline from 'node:readline';
import { after, before, describe, it } from 'node:test';

import { fifoIn, makeWorkspace, serverParameters } from './server_config.mjs';

// A server process and the JSON messages it printed, one per stdout line.
class RawServer {
  constructor(workspace) {
    const { command, args } = serverParameters(workspace);
    this.child = spawn(command, args, { stdio: ['pipe', 'pipe', 'pipe'] });
    this.messages = [];
    this.stdoutLines = [];
    this.stderr = '';
    this.waiters = [];
    this.child.stderr.on('data', (chunk) => { this.stderr += chunk; });
    readline.createInterface({ input: this.child.stdout }).on('line', (line) => {
      this.stdoutLines.push(line);
      this.messages.push(JSON.parse(line));  // every stdout line must be JSON-RPC
      this.waiters = this.waiters.filter((w) => !w());
    });
    this.exited = new Promise((resolve) => this.child.on('exit', (code, signal) => resolve({ code, signal })));
  }

  sendLine(line) { this.child.stdin.write(line + '\n'); }
  send(message) { this.sendLine(JSON.stringify(message)); }

  // The first message (from `from` on) that satisfies predicate.
  waitFor(predicate, from = 0, timeoutMs = 30_000) {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`timed out; got ${JSON.stringify(this.messages)}\n${this.stderr}`)), timeoutMs);
      const check = () => {
        const found = this.messages.slice(from).find(predicate);
        if (found) { clearTimeout(timer); resolve(found); return true; }
        return false;
      };
      if (!check()) this.waiters.push(check);
    });
  }

  response(id, from = 0) { return this.waitFor((m) => m.id === id && ('result' in m || 'error' in m), from); }

  async request(id, method, params) {
    const from = this.messages.length;
    this.send({ jsonrpc: '2.0', id, method, ...(params ? { params } : {}) });
    return this.response(id, from);
  }
}

function initializeParams(protocolVersion) {
  return { protocolVersion, capabilities: {}, clientInfo: { name: 'raw', version: '0' } };
}

describe('belljar mcp on the wire', () => {
  let server, workspace;

  before(() => {
    workspace = makeWorkspace();
    server = new RawServer(workspace);
  });

  after(async () => {
    server.child.stdin.end();
    await server.exited;
    fs.rmSync(workspace, { recursive: true, force: true });
  });

  it('negotiates the protocol revision', async () => {
    // 2026-07-28 has no handshake: initialize answers the newest revision that has one.
    const cases = [['2025-11-25', '2025-11-25'], ['2025-06-18', '2025-06-18'], ['2025-03-26', '2025-03-26'],
      ['2024-11-05', '2024-11-05'], ['2026-07-28', '2025-11-25'], ['1999-01-01', '2025-11-25']];
    let id = 100;
    for (const [asked, answered] of cases) {
      const reply = await server.request(++id, 'initialize', initializeParams(asked));
      assert.equal(reply.result.protocolVersion, answered, `asked ${asked}`);
      assert.equal(reply.result.serverInfo.name, 'belljar');
      assert.deepEqual(reply.result.capabilities.tools, { listChanged: false });
    }
    // The session goes on with the last negotiation: the current revision.
    server.send({ jsonrpc: '2.0', method: 'notifications/initialized' });
  });

  it('answers malformed JSON-RPC with the matching error, and carries on', async () => {
    const cases = [
      ['{"jsonrpc": "2.0", "id": 1, "method": "ping"', null, -32700],  // cut short
      ['this is not json', null, -32700],
      ['[]', null, -32600],                                             // batches: not supported
      ['42', null, -32600],
      ['{"jsonrpc": "1.0", "id": 2, "method": "ping"}', 2, -32600],
      ['{"jsonrpc": "2.0", "id": 3}', 3, -32600],                         // no method
      ['{"jsonrpc": "2.0", "id": 4, "method": 7}', 4, -32600],
      ['{"jsonrpc": "2.0", "id": {"a": 1}, "method": "ping"}', null, -32600],
      ['{"jsonrpc": "2.0", "id": 5, "method": "resources/list"}', 5, -32601],
      ['{"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": ["run_python"]}', 6, -32602],
      ['{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "format_disk"}}', 7, -32602],
      ['{"jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": {"name": "run_python", "arguments": {"cod": "1"}}}', 8, -32602],
      ['{"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "read_file", "arguments": {"path": "a", "max_bytes": -1}}}', 9, -32602],
      ['{"jsonrpc": "2.0", "id": "ten", "method": "initialize", "params": {}}', 'ten', -32602],
    ];
    for (const [line, id, code] of cases) {
      const from = server.messages.length;
      server.sendLine(line);
      const reply = await server.waitFor((m) => 'error' in m, from);
      assert.equal(reply.error.code, code, line);
      assert.equal(reply.id, id, line);
      assert.equal(typeof reply.error.message, 'string');
    }
    // A notification nobody knows gets no answer; a blank line is no message at all.
    const from = server.messages.length;
    server.send({ jsonrpc: '2.0', method: 'notifications/whatever' });
    server.sendLine('');
    const pong = await server.request(11, 'ping');
    assert.deepEqual(pong.result, {});
    assert.equal(server.messages.length, from + 1);
  });

  it('answers pings at once while a cell runs, and tool calls in order', async () => {
    // The first cell runs until the test has its answers: it reads a FIFO the test writes then.
    const go = fifoIn(workspace, 'ordered-go');
    const from = server.messages.length;
    server.send({ jsonrpc: '2.0', id: 20, method: 'tools/call', params: { name: 'run_python', arguments: { code: `open(${JSON.stringify(go)}).read()\n"first"` } } });
    server.send({ jsonrpc: '2.0', id: 21, method: 'tools/call', params: { name: 'run_python', arguments: { code: '"second"' } } });
    const pong = await server.request(22, 'ping');
    assert.deepEqual(pong.result, {});
    const tools = await server.request(23, 'tools/list');
    assert.equal(tools.result.tools.length, 12);  // nine, and the three session tools
    await fs.promises.writeFile(go, 'go');
    await server.response(21, from);
    const order = server.messages.slice(from).map((m) => m.id);
    assert.deepEqual(order, [22, 23, 20, 21]);
    assert.match(server.messages.find((m) => m.id === 20).result.content[0].text, /'first'/);
    assert.match(server.messages.find((m) => m.id === 21).result.content[0].text, /'second'/);
  });

  it('drops a cancelled request: the cell is interrupted and never answered', async () => {
    const from = server.messages.length;
    server.send({ jsonrpc: '2.0', id: 30, method: 'tools/call', params: { name: 'run_python', arguments: { code: 'import time; time.sleep(60)' }, _meta: { progressToken: 'p30' } } });
    server.send({ jsonrpc: '2.0', id: 31, method: 'tools/call', params: { name: 'run_python', arguments: { code: '"queued, then cancelled"' } } });
    const progress = await server.waitFor((m) => m.method === 'notifications/progress', from);
    assert.equal(progress.params.progressToken, 'p30');
    server.send({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 31, reason: 'not needed' } });
    server.send({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 30, reason: 'too slow' } });
    const next = await server.request(32, 'tools/call', { name: 'run_python', arguments: { code: 'import sys; sys.last_type.__name__' } });
    assert.match(next.result.content[0].text, /KeyboardInterrupt/);
    const answered = server.messages.slice(from).filter((m) => m.id === 30 || m.id === 31);
    assert.deepEqual(answered, []);
  });

  it('writes nothing but JSON-RPC on stdout and exits when stdin closes', async () => {
    await server.request(40, 'tools/call', { name: 'run_python', arguments: { code: "print('to the client, not to stdout')" } });
    for (const line of server.stdoutLines) assert.equal(JSON.parse(line).jsonrpc, '2.0');
    server.child.stdin.end();
    const { code } = await server.exited;
    assert.equal(code, 0);
  });
});

describe('belljar mcp with an older client', () => {
  it('leaves out what 2024-11-05 does not know and still reports the facts', async () => {
    const workspace = makeWorkspace();
    const server = new RawServer(workspace);
    try {
      await server.request(1, 'initialize', initializeParams('2024-11-05'));
      server.send({ jsonrpc: '2.0', method: 'notifications/initialized' });
      const { result } = await server.request(2, 'tools/list');
      for (const tool of result.tools) {
        assert.ok(!('outputSchema' in tool) && !('annotations' in tool), tool.name);
        assert.equal(tool.inputSchema.type, 'object');
      }
      const call = await server.request(3, 'tools/call', { name: 'run_python', arguments: { code: '1 + 1' } });
      assert.ok(!('structuredContent' in call.result));
      assert.match(call.result.content.at(-1).text, /^facts: .*"wall_ms"/);
    } finally {
      server.child.stdin.end();
      await server.exited;
      fs.rmSync(workspace, { recursive: true, force: true });
    }
  });
});
