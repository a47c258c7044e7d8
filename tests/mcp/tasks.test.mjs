// run_python as an MCP task (2025-11-25), through the TypeScript SDK's task client: the call is
// answered at once with a task, its output so far shows in tasks/get while it runs, tasks/result
// waits for the result, tasks/cancel interrupts the cell (the session lives on), and an id never
// issued, or a tool that is no task, is refused with a clear error.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';

import { CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js';

import { CALL, SdkSession, run, texts } from './sdk_session.mjs';
import { fifoIn } from './server_config.mjs';

const RELATED = 'io.modelcontextprotocol/related-task';

describe('run_python as a task through the MCP TypeScript SDK', () => {
  const session = new SdkSession();
  before(() => session.open());
  after(() => session.close());

  async function startTask(code, ttl = 60_000) {
    const created = await session.client.request(
      { method: 'tools/call', params: { name: 'run_python', arguments: { code }, task: { ttl } } },
      // CreateTaskResult: the task, at once.
      (await import('@modelcontextprotocol/sdk/types.js')).CreateTaskResultSchema, CALL);
    return created.task;
  }

  it('advertises tasks, and run_python alone as one', async () => {
    const capabilities = session.client.getServerCapabilities();
    assert.deepEqual(capabilities.tasks, { list: {}, cancel: {}, requests: { tools: { call: {} } } });
    const { tools } = await session.client.listTools();
    const support = Object.fromEntries(tools.map((t) => [t.name, t.execution?.taskSupport ?? 'forbidden']));
    assert.deepEqual(support, {
      run_python: 'optional', reset_session: 'forbidden', list_files: 'forbidden',
      read_file: 'forbidden', write_file: 'forbidden', open_session: 'forbidden',
      close_session: 'forbidden', list_sessions: 'forbidden', checkpoint: 'forbidden',
      rollback: 'forbidden', list_checkpoints: 'forbidden', drop_checkpoint: 'forbidden',
    });
  });

  it('answers at once, shows the output so far, and gives the result when it is done', async () => {
    const gate = fifoIn(session.workspace, 'task-gate');
    const task = await startTask(
      `print('half way', flush=True)\nopen(${JSON.stringify(gate)}).read()\nprint('done')\n6 * 7`);
    assert.equal(task.status, 'working');
    assert.match(task.taskId, /^[0-9a-f-]{36}$/);
    assert.equal(task.ttl, 60_000);
    const tasks = session.client.experimental.tasks;
    // Polled until the cell's first line shows: the task is working, its output readable.
    let seen;
    do {
      seen = await tasks.getTask(task.taskId, CALL);
    } while (!/half way/.test(seen.statusMessage ?? ''));
    assert.equal(seen.status, 'working');
    const listed = await tasks.listTasks(undefined, CALL);
    assert.ok(listed.tasks.some((t) => t.taskId === task.taskId && t.status === 'working'));
    // tasks/result waits for the end; the cell ends when the gate opens.
    const result = tasks.getTaskResult(task.taskId, CallToolResultSchema, CALL);
    await (await import('node:fs/promises')).writeFile(gate, 'go\n');
    const done = await result;
    assert.equal(done.isError, false);
    assert.match(texts(done), /half way\ndone\n/);
    assert.match(texts(done), /Out\[\d+\]: 42/);
    assert.deepEqual(done._meta[RELATED], { taskId: task.taskId });
    assert.equal((await tasks.getTask(task.taskId, CALL)).status, 'completed');
    // Asked again, the same result: it is kept for the task's ttl.
    const again = await tasks.getTaskResult(task.taskId, CallToolResultSchema, CALL);
    assert.equal(texts(again), texts(done));
  });

  it('cancels a running task with KeyboardInterrupt, and the session lives on', async () => {
    await run(session.client, 'survivor = "still here"');
    const task = await startTask("import time\nprint('running', flush=True)\ntime.sleep(60)");
    const tasks = session.client.experimental.tasks;
    let seen;
    do {
      seen = await tasks.getTask(task.taskId, CALL);
    } while (!/running/.test(seen.statusMessage ?? ''));
    const cancelled = await tasks.cancelTask(task.taskId, CALL);
    assert.equal(cancelled.status, 'cancelled');
    await assert.rejects(tasks.getTaskResult(task.taskId, CallToolResultSchema, CALL), /cancelled/);
    await assert.rejects(tasks.cancelTask(task.taskId, CALL), /already ended/);
    const next = await run(session.client, 'import sys\n(survivor, sys.last_type.__name__)');
    assert.equal(next.isError, false, texts(next));
    assert.match(texts(next), /'still here', 'KeyboardInterrupt'/);
  });

  it('refuses an id never issued, and a tool that does not run as a task', async () => {
    const tasks = session.client.experimental.tasks;
    await assert.rejects(tasks.getTask('00000000-0000-4000-8000-000000000000', CALL), /task not found/);
    await assert.rejects(
      session.client.request(
        { method: 'tools/call', params: { name: 'list_files', arguments: {}, task: {} } },
        CallToolResultSchema, CALL),
      /does not run as a task/);
    // And the server serves on.
    const after = await run(session.client, '1 + 1');
    assert.match(texts(after), /Out\[\d+\]: 2/);
  });
});
