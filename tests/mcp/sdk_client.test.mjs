// belljar mcp driven by a client nobody here wrote: the official MCP TypeScript SDK. The
// session itself (initialize, tools/list, argument errors, ping); what the tools do is in
// tools.test.mjs.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';

import { SdkSession, run, texts } from './sdk_session.mjs';

describe('belljar mcp through the MCP TypeScript SDK', () => {
  const session = new SdkSession();
  before(() => session.open());
  after(() => session.close());

  it('initializes as belljar with the tools capability', () => {
    assert.equal(session.client.getServerVersion().name, 'belljar');
    assert.ok(session.client.getServerCapabilities().tools, 'tools capability');
    assert.match(session.client.getInstructions(), /sandbox/);
  });

  it('lists the twelve tools with their schemas', async () => {
    const { tools } = await session.client.listTools();
    const byName = Object.fromEntries(tools.map((t) => [t.name, t]));
    assert.deepEqual(Object.keys(byName).sort(),
      ['checkpoint', 'close_session', 'drop_checkpoint', 'list_checkpoints', 'list_files',
        'list_sessions', 'open_session', 'read_file', 'reset_session', 'rollback', 'run_python',
        'write_file']);
    assert.deepEqual(byName.rollback.inputSchema.required, ['checkpoint']);
    assert.equal(byName.checkpoint.outputSchema.properties.checkpoint.type, 'string');
    assert.equal(byName.run_python.inputSchema.properties.session.type, 'string');
    assert.deepEqual(byName.close_session.inputSchema.required, ['session']);
    assert.deepEqual(byName.run_python.inputSchema.required, ['code']);
    assert.equal(byName.run_python.inputSchema.properties.timeout_seconds.type, 'number');
    assert.equal(byName.run_python.outputSchema.type, 'object');
    assert.deepEqual(byName.read_file.inputSchema.required, ['path']);
    assert.deepEqual(byName.write_file.inputSchema.required, ['path', 'content']);
  });

  it('rejects bad arguments and unknown tools with JSON-RPC errors', async () => {
    await assert.rejects(session.client.callTool({ name: 'run_python', arguments: {} }), (e) => e.code === -32602);
    await assert.rejects(session.client.callTool({ name: 'run_python', arguments: { code: 1 } }), (e) => e.code === -32602);
    await assert.rejects(session.client.callTool({ name: 'no_such_tool', arguments: {} }), (e) => e.code === -32602);
    const still = await run(session.client, '6 * 7');
    assert.match(texts(still), /: 42$/);
  });

  it('answers ping', async () => {
    assert.deepEqual(await session.client.ping(), {});
  });
});
