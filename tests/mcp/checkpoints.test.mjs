// The agent's loop on stdio, through the TypeScript SDK: two sessions, data loaded, a checkpoint,
// the state wrecked and rolled back (the workspace's changes listed), another session's handle
// refused, a long call run as a task and cancelled; the sessions serve on.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';

import { CallToolResultSchema, CreateTaskResultSchema } from '@modelcontextprotocol/sdk/types.js';

import { CALL, SdkSession, run, texts, tool as call } from './sdk_session.mjs';

describe('checkpoints through the MCP TypeScript SDK', () => {
  const session = new SdkSession();
  before(() => session.open());
  after(() => session.close());

  const tool = (name, args) => call(session.client, name, args);

  it('keeps a session, returns to it after a bad step, and leaves the other alone', async () => {
    const a = (await tool('open_session')).structuredContent.session;
    const b = (await tool('open_session')).structuredContent.session;
    await run(session.client, 'table = {"rows": list(range(100))}', { session: a });
    await run(session.client, 'mine = "b"', { session: b });
    const kept = (await tool('checkpoint', { session: a, name: 'loaded' })).structuredContent;
    assert.match(kept.checkpoint, /^ckpt_[0-9a-f]{32}$/);
    await run(session.client, 'table.clear()\nopen("junk.txt", "w").write("x")', { session: a });
    const rolled = await tool('rollback', { session: a, checkpoint: 'loaded' });
    assert.equal(rolled.isError, false, texts(rolled));
    assert.deepEqual(rolled.structuredContent.workspace, { made: ['junk.txt'], removed: [], renamed: [] });
    assert.match(texts(await run(session.client, 'len(table["rows"])', { session: a })), /: 100$/);
    const elsewhere = await tool('rollback', { session: b, checkpoint: kept.checkpoint });
    assert.equal(elsewhere.isError, true);
    assert.match(texts(elsewhere), /no checkpoint/);
    assert.match(texts(await run(session.client, 'mine', { session: b })), /'b'/);
    const listed = (await tool('list_checkpoints', { session: a })).structuredContent.checkpoints;
    assert.deepEqual(listed.map((c) => c.name), ['loaded']);
    await assert.rejects(tool('checkpoint', { session: a, name: 'x;y' }), (e) => e.code === -32602);
  });

  it('cancels a long call run as a task, and the session rolls back after it', async () => {
    await run(session.client, 'n = 1');
    await tool('checkpoint', { name: 'before-task' });
    const created = await session.client.request(
      { method: 'tools/call',
        params: { name: 'run_python',
          arguments: { code: 'import time\nn = 2\nprint("running", flush=True)\ntime.sleep(60)' },
          task: { ttl: 60_000 } } },
      CreateTaskResultSchema, CALL);
    const tasks = session.client.experimental.tasks;
    let seen;
    do {
      seen = await tasks.getTask(created.task.taskId, CALL);
    } while (!/running/.test(seen.statusMessage ?? ''));
    assert.equal((await tasks.cancelTask(created.task.taskId, CALL)).status, 'cancelled');
    await assert.rejects(tasks.getTaskResult(created.task.taskId, CallToolResultSchema, CALL), /cancelled/);
    assert.match(texts(await run(session.client, 'n')), /: 2$/);
    await tool('rollback', { checkpoint: 'before-task' });
    assert.match(texts(await run(session.client, 'n')), /: 1$/);
  });
});
