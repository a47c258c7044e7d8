// `belljar mcp --http` through the TypeScript SDK's Streamable HTTP client: the server started
// as the README shows it (with the test's token in BELLJAR_MCP_TOKEN), code run in the MCP
// session's own sandbox and in an opened one, output streamed as progress while a cell runs, a
// long cell run as a task and cancelled, and the MCP session ended by DELETE.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import { after, before, describe, it } from 'node:test';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CallToolResultSchema, CreateTaskResultSchema } from '@modelcontextprotocol/sdk/types.js';

import { CALL, run, texts } from './sdk_session.mjs';
import { makeWorkspace, serverParameters } from './server_config.mjs';

const TOKEN = `belljar-test-${randomBytes(16).toString('hex')}`;

describe('the MCP server over Streamable HTTP through the TypeScript SDK', () => {
  let server, workspace, url, client, transport;
  let serverLog = '';

  before(async () => {
    workspace = makeWorkspace();
    const { command, args, env } = serverParameters(workspace);
    server = spawn(command, [...args, '--http', '127.0.0.1:0'], {
      stdio: ['ignore', 'ignore', 'pipe'],
      env: { ...process.env, ...(env ?? {}), BELLJAR_MCP_TOKEN: TOKEN },
    });
    url = await new Promise((resolve, reject) => {
      server.stderr.on('data', (chunk) => {
        serverLog += chunk;
        const found = serverLog.match(/serving MCP \(Streamable HTTP\) at (http:\/\/\S+)/);
        if (found) resolve(found[1]);
      });
      server.on('exit', (status) => reject(new Error(`belljar mcp exited ${status}:\n${serverLog}`)));
    });
    transport = new StreamableHTTPClientTransport(new URL(url), {
      requestInit: { headers: { Authorization: `Bearer ${TOKEN}` } },
    });
    client = new Client({ name: 'belljar-tests', version: '1.0.0' });
    await client.connect(transport);
  });

  after(async () => {
    await transport?.terminateSession().catch(() => {});
    await client?.close();
    if (server && server.exitCode === null) {
      const exited = new Promise((resolve) => server.on('exit', resolve));
      server.kill('SIGTERM');
      assert.equal(await exited, 0);
    }
    fs.rmSync(workspace, { recursive: true, force: true });
    if (process.exitCode) process.stderr.write(`--- belljar mcp --http stderr ---\n${serverLog}\n`);
  });

  it('refuses a client without the token', async () => {
    const bare = new Client({ name: 'no-token', version: '1.0.0' });
    await assert.rejects(bare.connect(new StreamableHTTPClientTransport(new URL(url))), /bearer token is required/);
  });

  it('keeps state in the MCP session\'s own sandbox and streams a cell\'s output as progress', async () => {
    assert.ok(transport.sessionId, 'the server gave an Mcp-Session-Id');
    await run(client, 'x = 20');
    assert.match(texts(await run(client, 'x * 2 + 2')), /42/);
    const progress = [];
    const ticked = await client.callTool(
      { name: 'run_python', arguments: { code: 'import time\nfor i in range(3):\n    print("tick", i, flush=True)\n    time.sleep(0.8)' } },
      CallToolResultSchema, { ...CALL, onprogress: (p) => progress.push(p.message ?? '') });
    assert.match(texts(ticked), /tick 2/);
    assert.ok(progress.some((m) => /tick/.test(m)), JSON.stringify(progress));
  });

  it('opens a session of its own and cancels a long task in it', async () => {
    const tool = (name, args = {}) => client.callTool({ name, arguments: args }, undefined, CALL);
    const handle = (await tool('open_session')).structuredContent.session;
    assert.match(texts(await run(client, 'x', { session: handle })), /NameError/);
    const created = await client.request(
      { method: 'tools/call',
        params: { name: 'run_python', arguments: { code: 'import time\nprint("in", flush=True)\ntime.sleep(60)', session: handle },
          task: { ttl: 60_000 } } },
      CreateTaskResultSchema, CALL);
    const tasks = client.experimental.tasks;
    let seen;
    do {
      seen = await tasks.getTask(created.task.taskId, CALL);
    } while (!/in/.test(seen.statusMessage ?? ''));
    assert.equal((await tasks.cancelTask(created.task.taskId, CALL)).status, 'cancelled');
    assert.match(texts(await run(client, '"lives"', { session: handle })), /lives/);
    await tool('close_session', { session: handle });
    await assert.rejects(run(client, '1', { session: handle }), /unknown session/);
  });
});
