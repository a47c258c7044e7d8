// The SDK client the suites drive: a fresh workspace and server per suite (started as
// server_config.mjs says), the server's stderr kept for a failure's report, and the two things
// every tool test does with a result (run code; read its text content).
import fs from 'node:fs';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

import { makeWorkspace, serverParameters } from './server_config.mjs';

export const CALL = { timeout: 60_000 };  // per request, in ms: well above the policy's limit

export function texts(result) {
  return result.content.filter((c) => c.type === 'text').map((c) => c.text).join('\n');
}

// A tools/call of `name`, its result.
export async function tool(client, name, args = {}) {
  return client.callTool({ name, arguments: args }, undefined, CALL);
}

export async function run(client, code, extra = {}, options = CALL) {
  return client.callTool({ name: 'run_python', arguments: { code, ...extra } }, undefined, options);
}

// Connected in a suite's before(), closed in its after(): {client, workspace} are set between.
export class SdkSession {
  constructor() { this.serverLog = ''; }

  async open() {
    this.workspace = makeWorkspace();
    const transport = new StdioClientTransport({ ...serverParameters(this.workspace), stderr: 'pipe' });
    transport.stderr.on('data', (chunk) => { this.serverLog += chunk; });
    this.client = new Client({ name: 'belljar-tests', version: '1.0.0' });
    await this.client.connect(transport);
  }

  async close() {
    await this.client?.close();
    fs.rmSync(this.workspace, { recursive: true, force: true });
    if (process.exitCode) process.stderr.write(`--- belljar mcp stderr ---\n${this.serverLog}\n`);
  }
}
