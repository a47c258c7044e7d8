// What the browser suites share: free loopback ports, child processes whose output is kept for
// the failure report (and can be waited on for what they say), and the page's own test of
// "every cell has run and all its output is in".
import { spawn } from 'node:child_process';
import net from 'node:net';

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
