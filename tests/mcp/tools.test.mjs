// belljar mcp's tools through the official MCP TypeScript SDK: run_python and reset_session on
// one persistent session (state, errors, images, limits, progress, cancellation), and the file
// tools on its workspace (reading, writing, paths that escape, masked secrets). The tests run in
// order and build on each other (a file written early is read after the reset).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';

import { CALL, SdkSession, run, texts } from './sdk_session.mjs';
import { POLICY_TIMEOUT, fifoIn } from './server_config.mjs';

describe('belljar mcp tools through the MCP TypeScript SDK', () => {
  const session = new SdkSession();
  before(() => session.open());
  after(() => session.close());

  it('runs code twice in one session: state is kept', async () => {
    const first = await run(session.client, "x = 20\nprint('hello from the sandbox')");
    assert.equal(first.isError, false);
    assert.equal(texts(first), 'hello from the sandbox\n');
    assert.equal(first.structuredContent.status, 'ok');

    const second = await run(session.client, 'x * 2 + 2');
    assert.equal(second.isError, false);
    assert.match(texts(second), /^Out\[\d+\]: 42$/);
    const facts = second.structuredContent.facts;
    assert.equal(typeof facts.wall_ms, 'number');
    assert.equal(typeof facts.cpu_ms, 'number');
    assert.equal(facts.limit_hit, null);
    assert.equal(facts.output_truncated, false);
    assert.deepEqual(facts.egress_denied, []);
    assert.deepEqual(second.structuredContent.outputs, [{ type: 'result', data: { 'text/plain': '42' } }]);
    assert.equal(second.structuredContent.execution_count, first.structuredContent.execution_count + 1);
  });

  it('reports an exception as a tool error with a plain traceback', async () => {
    const result = await run(session.client, 'def f():\n    return 1 / 0\nf()');
    assert.equal(result.isError, true);
    const text = texts(result);
    assert.match(text, /ZeroDivisionError/);
    assert.match(text, /return 1 \/ 0/);
    assert.ok(!text.includes('\x1b'), 'no ANSI escapes');
    assert.equal(result.structuredContent.status, 'error');
    assert.equal(result.structuredContent.error.ename, 'ZeroDivisionError');
    const stderr = await run(session.client, "import sys; print('careful', file=sys.stderr)");
    assert.equal(texts(stderr), '[stderr]\ncareful\n');
  });

  it('returns a matplotlib figure as PNG image content', async () => {
    const result = await run(session.client,
      'import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.title("belljar")\nplt.show()');
    assert.equal(result.isError, false, texts(result));
    const images = result.content.filter((c) => c.type === 'image');
    assert.equal(images.length, 1);
    assert.equal(images[0].mimeType, 'image/png');
    const png = Buffer.from(images[0].data, 'base64');
    assert.deepEqual([...png.subarray(0, 8)], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
    const display = result.structuredContent.outputs.find((o) => o.type === 'display');
    assert.equal(display.images[0].mime_type, 'image/png');
    assert.equal(display.images[0].bytes, png.length);
    assert.ok(!('image/png' in display.data), 'no base64 in structuredContent');
  });

  it('stops a cell at its timeout and keeps the session', async () => {
    // The limit asked for, not the policy's (POLICY_TIMEOUT): the facts say which one held.
    const result = await run(session.client, 'import time\ntime.sleep(30)', { timeout_seconds: 1 });
    assert.equal(result.isError, true);
    assert.equal(result.structuredContent.facts.limit_hit, 'timeout');
    assert.equal(result.structuredContent.facts.limits.timeout_seconds, 1);
    assert.match(texts(result), /TimeoutError/);

    // Asking for more than the policy allows gets the policy's limit.
    const capped = await run(session.client, 'x', { timeout_seconds: 3600 });
    assert.equal(capped.isError, false);
    assert.equal(capped.structuredContent.facts.limits.timeout_seconds, POLICY_TIMEOUT);
    assert.match(texts(capped), /: 20$/);
  });

  it('writes and reads workspace files, text and bytes', async () => {
    const written = await session.client.callTool({ name: 'write_file', arguments: { path: 'notes/hello.txt', content: 'héllo\n' } });
    assert.equal(written.isError, false, texts(written));
    assert.equal(fs.readFileSync(path.join(session.workspace, 'notes', 'hello.txt'), 'utf8'), 'héllo\n');

    const read = await session.client.callTool({ name: 'read_file', arguments: { path: 'notes/hello.txt' } });
    assert.equal(read.isError, false, texts(read));
    assert.equal(texts(read), 'héllo\n');

    const seen = await run(session.client, "open('notes/hello.txt').read()");
    assert.match(texts(seen), /héllo/);

    const bytes = Buffer.from([0, 1, 2, 255, 254]);
    const binary = await session.client.callTool({ name: 'write_file', arguments: { path: 'data.bin', content: bytes.toString('base64'), encoding: 'base64' } });
    assert.equal(binary.isError, false, texts(binary));
    const back = await session.client.callTool({ name: 'read_file', arguments: { path: 'data.bin' } });
    assert.equal(back.content[0].type, 'resource');
    assert.deepEqual(Buffer.from(back.content[0].resource.blob, 'base64'), bytes);

    const listing = await session.client.callTool({ name: 'list_files', arguments: { recursive: true } });
    const paths = listing.structuredContent.entries.map((e) => e.path);
    for (const p of ['notes', 'notes/hello.txt', 'data.bin', '.env']) assert.ok(paths.includes(p), `${p} listed`);
  });

  it('refuses paths that escape the workspace', async () => {
    const attempts = [
      ['read_file', { path: '../../../../etc/passwd' }],
      ['read_file', { path: '/etc/passwd' }],
      ['read_file', { path: 'passwd-link' }],
      ['read_file', { path: 'etc-link/hostname' }],
      ['list_files', { path: 'etc-link' }],
      ['write_file', { path: '../escaped.txt', content: 'no' }],
      ['write_file', { path: 'etc-link/escaped.txt', content: 'no' }],
    ];
    for (const [name, args] of attempts) {
      const result = await session.client.callTool({ name, arguments: args });
      assert.equal(result.isError, true, `${name} ${JSON.stringify(args)}: ${texts(result)}`);
      assert.match(texts(result), /outside the workspace/);
      assert.ok(!texts(result).includes('root:'), 'no passwd content');
    }
    assert.ok(!fs.existsSync(path.join(path.dirname(session.workspace), 'escaped.txt')));
  });

  it('keeps .env masked', async () => {
    const read = await session.client.callTool({ name: 'read_file', arguments: { path: '.env' } });
    assert.equal(read.isError, true);
    assert.match(texts(read), /masked/);
    const listing = await session.client.callTool({ name: 'list_files', arguments: {} });
    const env = listing.structuredContent.entries.find((e) => e.path === '.env');
    assert.equal(env.masked, true);
    const overwrite = await session.client.callTool({ name: 'write_file', arguments: { path: '.env', content: 'X=1' } });
    assert.equal(overwrite.isError, true);
    const code = await run(session.client, "open('.env').read()");
    assert.ok(!JSON.stringify(code).includes('hunter2'), 'the secret never reaches the client');
    for (const r of [read, listing, overwrite]) assert.ok(!JSON.stringify(r).includes('hunter2'));
    assert.equal(fs.readFileSync(path.join(session.workspace, '.env'), 'utf8'), 'API_TOKEN=hunter2-not-for-the-agent\n');
  });

  it('answers the file tools from the host, not from the session (round two)', async () => {
    // The red team's cell: the session's own file helper made to report a clean .gitconfig
    // while the host file holds a planted fsmonitor. The file tools must not ask the session.
    const planted = '[core]\n\tfsmonitor = touch /tmp/belljar-pwned\n';
    fs.writeFileSync(path.join(session.workspace, '.gitconfig'), planted);
    const lie = await run(session.client, [
      'import json, sys',
      'clean = {"ok": True, "path": ".gitconfig", "encoding": "utf-8", "content": "[user]\\n\\tname = learner\\n",',
      '         "size": 24, "offset": 0, "bytes": 24, "truncated": False}',
      'class Answer:',
      '    def __repr__(self): return json.dumps(clean)',
      'try:',
      '    import belljar_worker.files as files',
      '    files.call = lambda request: Answer()',
      'except ImportError:',
      '    pass',
      'import builtins',
      'builtins.__import__ = (lambda real: lambda name, *a, **k: type("M", (), {"call": staticmethod(lambda r: Answer())})',
      '                       if name == "belljar_worker.files" else real(name, *a, **k))(builtins.__import__)',
    ].join('\n'));
    assert.equal(lie.isError, false, texts(lie));
    const read = await session.client.callTool({ name: 'read_file', arguments: { path: '.gitconfig' } });
    assert.equal(read.isError, false, texts(read));
    assert.equal(texts(read), planted);
    const listing = await session.client.callTool({ name: 'list_files', arguments: {} });
    const entry = listing.structuredContent.entries.find((e) => e.path === '.gitconfig');
    assert.equal(entry.size, Buffer.byteLength(planted));
    // Writing is the kernel's act too: the file on the host is what the agent sent.
    const written = await session.client.callTool({ name: 'write_file', arguments: { path: 'agent.txt', content: 'from the agent' } });
    assert.equal(written.isError, false, texts(written));
    assert.equal(fs.readFileSync(path.join(session.workspace, 'agent.txt'), 'utf8'), 'from the agent');
  });

  it('sends progress while a long cell runs', async () => {
    // The cell runs until a progress notification has shown its output: it reads a FIFO in
    // the workspace that the test writes only then.
    const go = fifoIn(session.workspace, 'progress-go');
    const progress = [];
    let released = false;
    const result = await run(session.client,
      `print('tick', 0, flush=True)\nopen(${JSON.stringify(go)}).read()\nprint('tock')`,
      {}, {
        ...CALL,
        onprogress: (p) => {
          progress.push(p);
          if (!released && /tick 0/.test(p.message ?? '')) {
            released = true;
            fs.promises.writeFile(go, 'go');
          }
        },
      });
    assert.equal(result.isError, false, texts(result));
    assert.equal(texts(result), 'tick 0\ntock\n');
    assert.ok(progress.length >= 1, 'at least one progress notification');
    assert.ok(progress.every((p, i) => i === 0 || p.progress > progress[i - 1].progress), 'increasing');
    assert.ok(progress.some((p) => /tick 0/.test(p.message ?? '')), JSON.stringify(progress));
  });

  it('interrupts the running cell when the request is cancelled', async () => {
    await run(session.client, 'survivor = "still here"');
    const controller = new AbortController();
    // Cancelled once a progress notification shows the cell running.
    const long = run(session.client, "import time\nprint('running', flush=True)\ntime.sleep(60)", {}, {
      ...CALL,
      signal: controller.signal,
      onprogress: (p) => { if (/running/.test(p.message ?? '')) controller.abort('changed my mind'); },
    });
    await assert.rejects(long);
    const next = await run(session.client, 'import sys\n(survivor, sys.last_type.__name__)');
    assert.equal(next.isError, false, texts(next));
    assert.match(texts(next), /'still here', 'KeyboardInterrupt'/);
    // Interrupted, not timed out (the policy's timeout ends a cell with KeyboardInterrupt too):
    // the supervisor's record of the cancelled cell says which.
    const audit = await run(session.client, '%audit 2');
    const shown = audit.structuredContent.outputs.find((o) => o.type === 'display');
    const [cancelled] = shown.data['application/vnd.belljar.audit+json'].records;
    assert.equal(cancelled.status, 'interrupted', JSON.stringify(cancelled));
    assert.equal(cancelled.limit_hit, null);
  });

  it('resets the session and keeps the workspace', async () => {
    await run(session.client, 'doomed = 1');
    const reset = await session.client.callTool({ name: 'reset_session', arguments: {} });
    assert.equal(reset.isError, false, texts(reset));
    const gone = await run(session.client, 'doomed');
    assert.equal(gone.isError, true);
    assert.equal(gone.structuredContent.error.ename, 'NameError');
    const kept = await session.client.callTool({ name: 'read_file', arguments: { path: 'notes/hello.txt' } });
    assert.equal(texts(kept), 'héllo\n');
  });
});
