// What the browser suites share: free loopback ports, child processes whose output is kept for
// the failure report (and can be waited on for what they say), and the page's own test of
// "every cell has run and all its output is in".
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { chromium } from 'playwright-core';

// Where the build and its venvs are: ctest's environment (TEST_ENV in tests/CMakeLists.txt), or
// the source tree's build/ when a suite is run by hand.
const here = path.dirname(fileURLToPath(import.meta.url));
export const SOURCE = process.env.BELLJAR_SOURCE ?? path.resolve(here, '..', '..');
export const BELLJAR = process.env.BELLJAR ?? path.join(SOURCE, 'build', 'belljar');
export const FRONTENDS = process.env.BELLJAR_FRONTENDS ?? path.join(SOURCE, 'build', 'venvs', 'frontends');
export const SANDBOX_PYTHON = process.env.BELLJAR_SANDBOX_VENV_PYTHON
  ?? path.join(SOURCE, 'build', 'venvs', 'sandbox-python', 'bin', 'python');
export const ISOLATION = process.env.BELLJAR_TEST_ISOLATION ?? 'strict';

// A notebook of code cells for `kernel`: a list of sources, or {tag: source} (each cell tagged,
// so a test finds its output by the vector's name).
export function notebookJson(cells, kernel) {
  const entries = Array.isArray(cells) ? cells.map((source) => [null, source]) : Object.entries(cells);
  return JSON.stringify({
    nbformat: 4, nbformat_minor: 5,
    metadata: { kernelspec: { name: kernel, display_name: kernel, language: 'python' } },
    cells: entries.map(([tag, source]) => ({
      cell_type: 'code', id: crypto.randomUUID().slice(0, 8), metadata: tag === null ? {} : { tags: [tag] },
      execution_count: null, outputs: [], source,
    })),
  }, null, 1);
}

// The two kernelspecs the output suites compare: `belljar` (the default --active-output) and
// `belljar-allow`, the control that lets everything through.
export function installOutputKernels(prefix, python, isolation) {
  for (const [name, mode] of [['belljar', []], ['belljar-allow', ['--active-output', 'allow']]]) {
    const install = spawnSync(BELLJAR, ['install', '--prefix', prefix, '--name', name, '--python', python,
      '--timeout', '30', '--isolation', isolation, ...mode], { encoding: 'utf8' });
    assert.equal(install.status, 0, `belljar install: ${install.stderr}`);
  }
}

// fetch's options with a deadline: a server that never answers fails the step instead of
// holding the test until ctest's timeout.
export function bounded(options = {}, timeoutMs = 30_000) {
  return { ...options, signal: AbortSignal.timeout(timeoutMs) };
}

// `promise`, or an error naming `what` once timeoutMs has passed: a step with no deadline of
// its own (a browser that never starts) fails with the logs instead of hanging.
export async function withDeadline(promise, timeoutMs, what) {
  let timer;
  const late = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: not done within ${timeoutMs} ms`)), timeoutMs);
  });
  try {
    return await Promise.race([promise, late]);
  } finally {
    clearTimeout(timer);
  }
}

export function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

// A child process whose output is kept (for the failure report) and can be waited on.
export function start(command, args, options) {
  const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'], ...options });
  child.log = '';
  child.stdout.on('data', (chunk) => { child.log += chunk; });
  child.stderr.on('data', (chunk) => { child.log += chunk; });
  child.exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  return child;
}

// The first match of `pattern` in what the child wrote, as soon as it writes it; an error if it
// exits first or has not written it within timeoutMs.
export function said(child, what, pattern, timeoutMs) {
  return new Promise((resolve, reject) => {
    const done = (settle, value) => {
      clearTimeout(timer);
      child.stdout.off('data', look);
      child.stderr.off('data', look);
      child.off('exit', exited);
      settle(value);
    };
    const look = () => {
      const match = child.log.match(pattern);
      if (match) done(resolve, match);
    };
    const exited = () => done(reject, new Error(`${what}: the process exited\n${child.log}`));
    const timer = setTimeout(
      () => done(reject, new Error(`${what}: not said within ${timeoutMs} ms\n${child.log}`)), timeoutMs);
    // After start()'s own listeners, so child.log already holds the chunk.
    child.stdout.on('data', look);
    child.stderr.on('data', look);
    child.once('exit', exited);
    look();
  });
}

// Resolves once predicate(arg) holds in the page (predicate: a function that refers to nothing
// outside it; arg may hold element handles). It is looked at again on each change of the page
// and each idle status the kernel handled (Notebook's finished_iopub event), never on a clock.
export async function whenPage(page, what, predicate, arg, timeoutMs) {
  const holds = page.evaluate(([source, value]) => {
    const test = (0, eval)(`(${source})`);
    const events = window.Jupyter?.notebook?.events;
    return new Promise((resolve) => {
      const check = () => {
        if (!test(value)) return;
        observer.disconnect();
        events?.off('finished_iopub.Kernel', check);
        resolve();
      };
      const observer = new MutationObserver(check);
      observer.observe(document, { subtree: true, childList: true, attributes: true, characterData: true });
      events?.on('finished_iopub.Kernel', check);
      check();
    });
  }, [predicate.toString(), arg]);
  let timer;
  const late = new Promise((resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: not within ${timeoutMs} ms`)), timeoutMs);
  });
  try {
    await Promise.race([holds, late]);
  } finally {
    clearTimeout(timer);
  }
}

// In the page (Notebook 6): every code cell has its execution count, and the kernel has had
// both the reply (shell) and the idle status (iopub, after all its output) of the execute each
// cell sent last (the kernel keeps its callbacks, marked so, until the cell runs again): every
// output of every cell has been put in the page.
export function allCellsDone() {
  const notebook = window.Jupyter?.notebook;
  const cells = notebook?.get_cells().filter((cell) => cell.cell_type === 'code') ?? [];
  return cells.length > 0 && cells.every((cell) => {
    const prompt = cell.element[0].querySelector('.input_prompt')?.textContent ?? '';
    const callbacks = cell.last_msg_id ? notebook.kernel._msg_callbacks[cell.last_msg_id] : null;
    return /\[\d+\]/.test(prompt) && callbacks !== null
      && (callbacks === undefined || (callbacks.shell_done && callbacks.iopub_done));
  });
}

export async function stop(child) {
  if (!child || child.exitCode !== null || child.signalCode !== null) return;
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
  await child.exited;
  clearTimeout(timer);
}

// A Jupyter server's environment with every place it reads or writes in the test's own `dirs`
// (home, runtime, config, data, and the kernelspec's prefix first on JUPYTER_PATH).
export function jupyterEnvironment(dirs) {
  return {
    ...process.env,
    HOME: dirs.home,
    JUPYTER_PATH: path.join(dirs.prefix, 'share', 'jupyter'),
    JUPYTER_RUNTIME_DIR: dirs.runtime,
    JUPYTER_CONFIG_DIR: dirs.config,
    JUPYTER_DATA_DIR: dirs.data,
    IPYTHONDIR: path.join(dirs.home, '.ipython'),
  };
}

// The frontends built from JupyterLab's components (BELLJAR_FRONTEND=lab|notebook), served by the
// frontends venv's `jupyter <app>`: the title, where a notebook opens (`workspace`, in JupyterLab,
// a workspace of its own, so that a page opened later restores none of an earlier page's tabs),
// the app's class for its options.
export const LAB_FRONTENDS = {
  lab: {
    title: 'JupyterLab 4', app: 'lab', appClass: 'LabApp',
    open: (file, workspace) => (workspace ? `/lab/workspaces/${workspace}/tree/${file}` : `/lab/tree/${file}`),
  },
  notebook: { title: 'Notebook 7', app: 'notebook', appClass: 'JupyterNotebookApp', open: (file) => `/notebooks/${file}` },
};

// The notebook in view (JupyterLab keeps other tabs in the page, hidden).
export const PANEL = '.jp-NotebookPanel:not(.lm-mod-hidden)';

// In the page: every code cell of the notebook in view shows its execution count. JupyterLab
// sets the count once the execute's future is done, that is once it has both the reply and
// the idle status that follows all of the cell's output: every output is in.
export function allCellsRan(panelSelector) {
  const cells = [...document.querySelectorAll(`${panelSelector} .jp-CodeCell`)];
  return cells.length > 0 && cells.every(
    (cell) => /^\[\d+\]/.test(cell.querySelector('.jp-InputPrompt')?.textContent ?? ''));
}

// In the page: the notebook in view is `file`, and its kernel is connected, ready and idle.
export function kernelReady(file) {
  const panel = window.jupyterapp?.shell?.currentWidget;
  const kernel = panel?.sessionContext?.session?.kernel;
  return panel?.context?.path === file && panel.sessionContext.isReady
    && kernel?.connectionStatus === 'connected' && kernel.status === 'idle';
}

// JupyterLab 4 or Notebook 7 from the frontends venv (`frontends`) on a free loopback port with
// `token`, every place it reads or writes in the test's `dirs` (which has `settings` and
// `workspaces` too), and the user's settings as a learner would set them once: every cell in the
// page (not only those scrolled into view, so that screenshots and checks see them all), and no
// news fetched from the internet. window.jupyterapp is exposed: the tests read it only to know
// when a notebook's kernel is ready. Returns the server's process and base URL.
export async function startJupyterLab({ frontend, frontends, dirs, token, env }) {
  const settings = (plugin, values) => {
    const file = path.join(dirs.settings, '@jupyterlab', plugin);
    fs.mkdirSync(path.dirname(file), { recursive: true });
    fs.writeFileSync(file, JSON.stringify(values));
  };
  settings('notebook-extension/tracker.jupyterlab-settings', { windowingMode: 'none' });
  settings('apputils-extension/notification.jupyterlab-settings', { fetchNews: 'false', checkForUpdates: false });
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const server = start(path.join(frontends, 'bin', 'jupyter'), [frontend.app, '--no-browser', '--ip=127.0.0.1',
    `--port=${port}`, '--port-retries=0', `--IdentityProvider.token=${token}`, `--ServerApp.root_dir=${dirs.notebooks}`,
    `--${frontend.appClass}.expose_app_in_browser=True`, ...(process.getuid() === 0 ? ['--allow-root'] : [])],
  {
    env: {
      ...jupyterEnvironment(dirs), JUPYTERLAB_SETTINGS_DIR: dirs.settings, JUPYTERLAB_WORKSPACES_DIR: dirs.workspaces, ...env,
    },
    cwd: dirs.notebooks,
  });
  try {
    await said(server, `jupyter ${frontend.app}`, /is running at/, 90_000);
    assert.ok((await serverStatus(`${base}/api/status?token=${token}`)).ok, server.log);
  } catch (error) {
    // The server goes with the failure: left running it kept node's test runner waiting for
    // the whole suite's timeout (ten minutes) after a start that failed in two seconds.
    await stop(server);
    throw new Error(`${frontend.app} did not start: ${error.message}` +
      `${error.cause ? ` (${error.cause.message ?? error.cause})` : ''}\n${server.log}`);
  }
  return { server, base };
}

// The server's status, once it answers: a connection refused or reset just after it said it
// runs is tried again, within 30 s in all (each attempt bounded too).
async function serverStatus(url) {
  const deadline = Date.now() + 30_000;
  for (;;) {
    try {
      return await fetch(url, bounded({}, Math.max(1_000, deadline - Date.now())));
    } catch (error) {
      if (Date.now() >= deadline) throw error;
      await new Promise((resolve) => { setTimeout(resolve, 250); });
    }
  }
}

// Opens a notebook in JupyterLab or Notebook 7 and waits until its kernel (belljar, its sandbox
// started) is ready: connected, kernel_info answered, idle. Before that, Run All would ask which
// kernel to start.
export async function openInLab(page, { base, token, frontend, file, workspace, timeoutMs }) {
  await page.goto(`${base}${frontend.open(file, workspace)}?token=${token}`);
  await whenPage(page, `${file}'s kernel ready`, kernelReady, file, timeoutMs);
}

// Picks `item` from the menu bar's `top` menu.
export async function labMenu(page, top, item) {
  await page.click(`.lm-MenuBar-itemLabel:text-is("${top}")`);
  await page.click(`.lm-Menu-itemLabel:text-is("${item}")`);
}

// Drags a slider's handle with the mouse, as a person does, and lets go at `fraction` of its
// track's width.
export async function dragSlider(page, handle, track, fraction) {
  await handle.scrollIntoViewIfNeeded();  // the mouse acts in the viewport
  const from = await handle.boundingBox();
  const along = await track.boundingBox();
  await page.mouse.move(from.x + from.width / 2, from.y + from.height / 2);
  await page.mouse.down();
  await page.mouse.move(along.x + along.width * fraction, along.y + along.height / 2, { steps: 12 });
  await page.mouse.up();
}

// The walkthrough's widget exercise as a learner does it, without editing code: drag the workload
// slider from 10**6 (the second of five stops) to 10**8, then pick temperature 1.0 in interact's
// dropdown (the chat stand-in then samples more of its facts, so the answer changes); each
// change re-runs `experiment` in the sandbox and its output replaces the last. `parts` locates
// the exercise's pieces in the frontend at hand: cell, output, handle, track, readout, dropdown;
// shot(step) keeps a screenshot after 'slider' and 'dropdown'. Returns the final output's text.
export async function driveTheExercise(page, parts, shot, timeoutMs) {
  const { cell, output } = parts;
  const until = async (test, arg, what) => {
    try {
      await whenPage(page, what, test, [await output.elementHandle(), arg], timeoutMs);
    } catch (error) {
      error.message += `\n--- the exercise's output ---\n${await output.innerText().catch((e) => e.message)}`;
      await cell.screenshot({ path: shot('failed') }).catch(() => {});
      throw error;
    }
    return output.innerText();
  };
  const shows = (pattern, what) => until(([element, source]) => new RegExp(source).test(element.innerText),
    pattern.source, what);
  const answerIn = (text) => text.split('\n').find((line) => line.includes('(answered by'));
  await shows(/workload 1,000,000: \d+\.\d\d s \(the kernel's cap: 30 s\)/, 'the first run, from Run All');
  const firstAnswer = answerIn(await output.innerText());

  await dragSlider(page, parts.handle, parts.track, 0.75);
  assert.equal(await parts.readout.innerText(), '100000000');
  const moved = await shows(/workload 100,000,000: \d+\.\d\d s/, 'the re-run after the drag');
  assert.doesNotMatch(moved, /workload 1,000,000:/, 'the new output replaced the old');
  await cell.screenshot({ path: shot('slider') });

  await parts.dropdown.selectOption({ label: '1.0' });
  await until(([element, before]) => {
    const answer = element.innerText.split('\n').find((line) => line.includes('(answered by'));
    return answer !== undefined && answer !== before;
  }, firstAnswer, 'the re-run at temperature 1.0');
  await cell.screenshot({ path: shot('dropdown') });
  const text = await output.innerText();
  assert.match(text, /workload 100,000,000: \d+\.\d\d s/);
  assert.match(answerIn(text), /Limits stop runaway code/);
  assert.ok(answerIn(text).length > firstAnswer.length, `${firstAnswer}\n${answerIn(text)}`);
  return text;
}

// Debian's Chromium, headless, with a profile of its own (never a downloaded browser).
export function launchChromium(userDataDir, viewport = { width: 1280, height: 900 }) {
  return chromium.launchPersistentContext(userDataDir, {
    executablePath: '/usr/bin/chromium',
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
      '--disable-component-update', '--no-first-run'],
    viewport,
  });
}

// The course as the demo sets it up (scripts/demo.sh): the chat stand-in on a free loopback port,
// over HTTPS with a demo CA made for the run (in `tls`), wanting `serverSecret` as its key; and
// the kernelspec `belljar` with the course's policy in a private prefix (the demo CA trusted with
// --upstream-ca), its sandbox on `python`.
// Returns the stand-in's process and port.
export async function startCourse({ source, belljar, prefix, tls, python, isolation, serverSecret }) {
  const ca = spawnSync(path.join(source, 'scripts', 'demo-ca.sh'), [tls, 'localhost'], { encoding: 'utf8' });
  if (ca.status !== 0) throw new Error(`demo-ca.sh: ${ca.stderr}`);
  const chat = start('/usr/bin/python3', [path.join(source, 'notebooks', 'services', 'chat_standin.py'),
    '--port', '0', '--tls-cert', path.join(tls, 'localhost.crt'), '--tls-key', path.join(tls, 'localhost-key.txt')],
  { env: { ...process.env, OPENAI_API_KEY: serverSecret } });
  const chatPort = (await said(chat, 'chat stand-in', /127\.0\.0\.1:(\d+)/, 20_000))[1];
  const install = spawnSync(belljar, ['install', '--prefix', prefix, '--name', 'belljar',
    '--python', python, '--timeout', '30', '--secret', `OPENAI_API_KEY@localhost:${chatPort}`,
    '--allow-local-net', `localhost:${chatPort}`, '--upstream-ca', path.join(tls, 'ca.crt'),
    '--set-env', `CHAT_API_BASE=https://localhost:${chatPort}/v1`, '--isolation', isolation],
  { encoding: 'utf8' });
  if (install.status !== 0) {
    await stop(chat);
    throw new Error(`belljar install: ${install.stderr}`);
  }
  return { chat, chatPort };
}

// Closes the server's terminals (a probe may have opened one) and shuts its kernels down through
// its API (so that no sandbox outlives the test), then stops the server.
export async function stopServer(server, base, token) {
  if (server && server.exitCode === null) {
    try {
      for (const { name } of await (await fetch(`${base}/api/terminals?token=${token}`, bounded())).json())
        await fetch(`${base}/api/terminals/${name}?token=${token}`, bounded({ method: 'DELETE' }));
      const kernels = await (await fetch(`${base}/api/kernels?token=${token}`, bounded())).json();
      for (const { id } of kernels) await fetch(`${base}/api/kernels/${id}?token=${token}`, bounded({ method: 'DELETE' }));
    } catch (error) {
      process.stderr.write(`shutting the kernels down: ${error}\n`);
    }
  }
  await stop(server);
}

// A suite's teardown: its browser context, then the server with its kernels and terminals, the
// chat stand-in if it had one, and its scratch directory.
export async function endSuite({ context, server, base, token, chat, tmp }) {
  await context?.close();
  await stopServer(server, base, token);
  if (chat) await stop(chat);
  fs.rmSync(tmp, { recursive: true, force: true });
}
