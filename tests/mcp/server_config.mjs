// How the tests start `belljar mcp`: from the mcpServers block the README gives to agents, so
// the documented configuration is the one exercised. Test-only flags are appended (later
// policy flags win): the sandbox's interpreter, a short timeout, the isolation under test.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
export const SOURCE = process.env.BELLJAR_SOURCE ?? path.resolve(here, '..', '..');
export const BELLJAR = process.env.BELLJAR ?? path.join(SOURCE, 'build', 'belljar');
export const ISOLATION = process.env.BELLJAR_TEST_ISOLATION ?? 'strict';
export const POLICY_TIMEOUT = 5;

// The first ```json block of README.md that holds "mcpServers".
export function readmeMcpConfig() {
  const readme = fs.readFileSync(path.join(SOURCE, 'README.md'), 'utf8');
  for (const match of readme.matchAll(/```json\n([\s\S]*?)```/g)) {
    if (match[1].includes('"mcpServers"')) return JSON.parse(match[1]);
  }
  throw new Error('README.md has no ```json block with "mcpServers"');
}

// A fresh workspace the sandbox user can write (it is `nobody` when the tests run as root),
// with a secret and symlinks that point out of it.
export function makeWorkspace() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'belljar-mcp-'));
  fs.chmodSync(dir, 0o777);
  fs.writeFileSync(path.join(dir, '.env'), 'API_TOKEN=hunter2-not-for-the-agent\n');
  fs.writeFileSync(path.join(dir, 'outside-target.txt'), 'inside\n');
  fs.symlinkSync('/etc/passwd', path.join(dir, 'passwd-link'));
  fs.symlinkSync('/etc', path.join(dir, 'etc-link'));
  return dir;
}

// A FIFO in the workspace, for a cell to wait on (open(path).read()) until the test writes it
// (with fs.promises.writeFile: its open waits for the reader off the event loop).
export function fifoIn(workspace, name) {
  const fifo = path.join(workspace, name);
  execFileSync('mkfifo', ['-m', '0666', fifo]);
  return fifo;
}

// {command, args} for StdioClientTransport or child_process.spawn.
export function serverParameters(workspace) {
  const entry = readmeMcpConfig().mcpServers.belljar;
  const args = entry.args.map((arg) => (arg === '/path/to/workspace' ? workspace : arg));
  if (!args.includes(workspace)) throw new Error('README args have no /path/to/workspace placeholder');
  return {
    command: entry.command === '/path/to/belljar' ? BELLJAR : entry.command,
    args: [...args, '--python', '/usr/bin/python3', '--timeout', String(POLICY_TIMEOUT), '--isolation', ISOLATION],
    // Where the servers' audit logs go, as ctest sets it (tests/CMakeLists.txt): the SDK gives a
    // server only HOME, PATH and a few more, so without it they would land in the runner's home.
    ...(process.env.XDG_STATE_HOME ? { env: { XDG_STATE_HOME: process.env.XDG_STATE_HOME } } : {}),
  };
}
