// Sessions as handles on stdio, through the TypeScript SDK: open_session starts a sandbox of its
// own, any tool takes its handle as `session`, sessions run side by side (a cell blocked in one
// does not hold up another), a task is followed to the session that runs it, and
// close_session ends one while the others serve on.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';

import { CallToolResultSchema, CreateTaskResultSchema } from '@modelcontextprotocol/sdk/types.js';

import { CALL, SdkSession, run, texts, tool as call } from './sdk_session.mjs';
import { fifoIn } from './server_config.mjs';

describe('sessions as handles through the MCP TypeScript SDK', () => {
  const session = new SdkSession();
  before(() => session.open());
  after(() => session.close());

  const tool = (name, args) => call(session.client, name, args);

  it('runs two opened sessions side by side, each with its own state', async () => {
    const a = (await tool('open_session')).structuredContent.session;
    const b = (await tool('open_session')).structuredContent.session;
    assert.match(a, /^[0-9a-f-]{36}$/);
    assert.notEqual(a, b);
    await run(session.client, 'who = "own"');
    await run(session.client, 'who = "a"', { session: a });
    await run(session.client, 'who = "b"', { session: b });
    // A cell in a waits on a gate; b answers meanwhile, and then a does.
    const gate = fifoIn(session.workspace, 'sessions-gate');
    const blocked = run(session.client, `open(${JSON.stringify(gate)}).read()\nwho`, { session: a });
    const meanwhile = await run(session.client, 'who', { session: b });
    assert.match(texts(meanwhile), /'b'/);
    await (await import('node:fs/promises')).writeFile(gate, 'go\n');
    assert.match(texts(await blocked), /'a'/);
    assert.match(texts(await run(session.client, 'who')), /'own'/);
    const listed = (await tool('list_sessions')).structuredContent.sessions;
    assert.equal(listed.length, 3);
    assert.deepEqual(listed.filter((s) => !s.own).map((s) => s.session).sort(), [a, b].sort());
    for (const handle of [a, b]) await tool('close_session', { session: handle });
    assert.equal((await tool('list_sessions')).structuredContent.sessions.length, 1);
  });

  it('follows a task to its session, and lists every session\'s tasks', async () => {
    const c = (await tool('open_session')).structuredContent.session;
    const created = await session.client.request(
      { method: 'tools/call',
        params: { name: 'run_python', arguments: { code: 'import time\nprint("in c", flush=True)\ntime.sleep(60)', session: c },
          task: { ttl: 60_000 } } },
      CreateTaskResultSchema, CALL);
    const tasks = session.client.experimental.tasks;
    let seen;
    do {
      seen = await tasks.getTask(created.task.taskId, CALL);
    } while (!/in c/.test(seen.statusMessage ?? ''));
    const listed = await tasks.listTasks(undefined, CALL);
    assert.ok(listed.tasks.some((t) => t.taskId === created.task.taskId && t.status === 'working'));
    assert.equal((await tasks.cancelTask(created.task.taskId, CALL)).status, 'cancelled');
    await assert.rejects(tasks.getTaskResult(created.task.taskId, CallToolResultSchema, CALL), /cancelled/);
    // The session lives on after the cancel; closed, its handle is refused.
    assert.match(texts(await run(session.client, '"c lives"', { session: c })), /c lives/);
    await tool('close_session', { session: c });
    await assert.rejects(run(session.client, '1', { session: c }), /unknown session/);
    await assert.rejects(tool('close_session', { session: c }), /unknown session/);
  });
});
