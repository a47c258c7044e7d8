// Active output in the real browser: Debian's Jupyter Notebook server on loopback, headless
// Chromium, a notebook (written by the test) whose every cell tries one way of running script
// from output. Each script tries what the red team did: create a file through the server's REST
// API (PUT /api/contents with the _xsrf cookie as X-XSRFToken) and open a terminal
// (POST /api/terminals). After Run All (and a click on every javascript: link, in the page and
// in every frame), no file may exist and no terminal may be open. A control run of two vectors
// on a kernel with --active-output allow does create its files: the probe works.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';

import {
  allCellsDone, freePort, jupyterEnvironment, launchChromium, said, start, stopServer, whenPage,
} from './harness.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const SOURCE = process.env.BELLJAR_SOURCE ?? path.resolve(here, '..', '..');
const BELLJAR = process.env.BELLJAR ?? path.join(SOURCE, 'build', 'belljar');
const ISOLATION = process.env.BELLJAR_TEST_ISOLATION ?? 'strict';
const NOTEBOOK_SERVER = '/usr/bin/jupyter-notebook';
const PYTHON = '/usr/bin/python3';
const RUN_ALL_TIMEOUT = 120_000;
// The vectors whose script still runs under --active-output isolate, in a sandboxed frame.
const RUN_ISOLATED = ['application-javascript', 'html-script', 'execute-result'];

// The attack, run wherever a vector gets script to run. It reports where it ran on the console.
function probe(id, origin) {
  return `(async () => {
  const id = ${JSON.stringify(id)};
  const here = String(self.origin);  // 'null' in an opaque origin (a sandboxed frame)
  const origin = here !== 'null' ? here : ${JSON.stringify(origin)};
  let xsrf = '';
  try { xsrf = decodeURIComponent((document.cookie.match(/(?:^|; )_xsrf=([^;]*)/) || [])[1] || ''); } catch (e) {}
  console.log('belljar-probe ran ' + id + ' in ' + here);
  const headers = { 'Content-Type': 'application/json', 'X-XSRFToken': xsrf };
  const body = JSON.stringify({ type: 'file', format: 'text', content: 'written by ' + id });
  try { await fetch(origin + '/api/contents/pwned-' + id + '.txt', { method: 'PUT', credentials: 'include', headers, body }); } catch (e) {}
  try { await fetch(origin + '/api/terminals', { method: 'POST', credentials: 'include', headers }); } catch (e) {}
  console.log('belljar-probe settled ' + id + ' in ' + here);  // its requests are answered
})();`;
}
// The probe as an expression without quotes of its own, for attributes and URLs.
const evalOf = (id, origin) => `eval(atob('${Buffer.from(probe(id, origin)).toString('base64')}'))`;

// A requirejs module that runs `code` when loaded and offers `name` (a comm target, a class).
const amd = (code, name) => `define([], function () { ${code}; return { ${JSON.stringify(name)}: function () {} }; });`;

// Python source of one cell per vector; py() quotes a JS string as a Python literal.
const py = (text) => JSON.stringify(text);
function vectorCells(origin, prefix) {
  const e = (id) => evalOf(`${prefix}${id}`, origin);
  const js = (id) => probe(`${prefix}${id}`, origin);
  const show = (bundle) => `display(${bundle}, raw=True)`;
  return {
    'application-javascript': show(`{'application/javascript': ${py(js('application-javascript'))}}`),
    'html-script': show(`{'text/html': ${py(`<b>html</b><script>${js('html-script')}</script>`)}}`),
    'html-img-onerror': show(`{'text/html': ${py(`<img src="x" onerror="${e('html-img-onerror')}">`)}}`),
    'html-svg-onload': show(`{'text/html': ${py(`<svg onload="${e('html-svg-onload')}"><rect width="9" height="9"/></svg>`)}}`),
    'html-iframe-srcdoc': show(`{'text/html': ${py(`<iframe srcdoc="&lt;script&gt;${e('html-iframe-srcdoc')}&lt;/script&gt;"></iframe>`)}}`),
    'html-javascript-link': show(`{'text/html': ${py(`<a href="javascript:${e('html-javascript-link')}">click</a>`)}}`),
    'svg-script': show(`{'image/svg+xml': ${py(`<svg xmlns="http://www.w3.org/2000/svg" width="20" height="20" onload="${e('svg-script')}"><script>${js('svg-script-element')}</script><rect width="9" height="9"/></svg>`)}}`),
    'markdown-raw-html': show(`{'text/markdown': ${py(`markdown <img src="x" onerror="${e('markdown-raw-html')}">`)}}`),
    'markdown-javascript-link': show(`{'text/markdown': ${py(`[click](javascript:${e('markdown-javascript-link')})`)}}`),
    'latex-mathjax-href': show(`{'text/latex': ${py(`$\\href{javascript:${e('latex-mathjax-href')}}{click}$`)}}`),
    'update-display': `h = display({'text/plain': 'first'}, raw=True, display_id=True)\n` +
      `h.update({'text/html': ${py(`<img src="x" onerror="${e('update-display')}">`)}}, raw=True)`,
    'execute-result': `class Active:\n    def _repr_html_(self):\n        return ${py(`<script>${js('execute-result')}</script>`)}\nActive()`,
    'pager-payload': 'import belljar_worker.current as s\n' +
      `s.session._take_payload = lambda: (delattr(s.session, '_take_payload'), [{'source': 'page', 'start': 0, 'data': {'text/plain': 'paged', 'text/html': ${py(`<img src="x" onerror="${e('pager-payload')}">`)}}}])[1]`,
    // A frame may navigate itself: a GET to the server (GET /terminals/new opens a terminal).
    'html-self-navigation': show(`{'text/html': ${py(`<meta http-equiv="refresh" content="0;url=${origin}/terminals/new"><img src="${origin}/terminals/new"><script>location.href = ${JSON.stringify(origin + '/terminals/new')};</script>`)}}`),
    'stream-text': `print(${py(`<img src="x" onerror="${e('stream-text')}">`)})`,
    // Comms: Notebook 6 hands a comm's target_module, and the widget manager a model's module,
    // to requirejs: a workspace file (served at /files/) would run in the page.
    'comm-target-module': `open('evil-comm.js', 'w').write(${py(amd(js('comm-target-module'), 'belljar-probe'))})\n` +
      "from comm import create_comm\nc = create_comm(target_name='belljar-probe', target_module='/files/evil-comm.js')",
    'widget-model-module': `open('evil-widget.js', 'w').write(${py(amd(js('widget-model-module'), 'X'))})\n` +
      "from comm import create_comm\nc = create_comm(target_name='jupyter.widget', data={'_model_module': '/files/evil-widget.js'," +
      " '_model_name': 'X', '_view_module': '/files/evil-widget.js', '_view_name': 'X'})\nc.send({'method': 'display'})",
    // Widget text the page puts in with innerHTML, or typesets with MathJax.
    'widget-description': `import ipywidgets as w\nw.IntSlider(description=${py(`<img src="x" onerror="${e('widget-description')}">`)})`,
    'widget-html': `import ipywidgets as w\nw.HTML(value=${py(`<img src="x" onerror="${e('widget-html')}">`)})`,
    'widget-label-href': `import ipywidgets as w\nw.Label(value=${py(`$\\href{javascript:${e('widget-label-href')}}{click}$`)})`,
    // Round two. An unknown widget class: the widget manager's "could not create model" table
    // puts the version into the page as markup. The version holds no quote or parenthesis: it
    // sends the page to a javascript: URL kept in an earlier, inert output's title.
    'widget-version': (() => {
      const anchor = `bjv${prefix.replace(/\W/g, '')}`;
      return show(`{'text/html': ${py(`<a id="${anchor}" title="javascript:${e('widget-version')}">t</a>`)}}`) +
        "\nfrom comm import create_comm\nc = create_comm(target_name='jupyter.widget', data={'_model_module': 'jupyter-js-widgets'," +
        ` '_model_name': 'NoSuchModel', '_model_module_version': ${py(`<img src=x onerror=location=${anchor}.title>`)}})` +
        "\nc.send({'method': 'display'})";
    })(),
    // A fence's language: Notebook 6 asks requirejs for the highlighting mode, and "x.js?y" is
    // a URL relative to the page, which the server redirects to the workspace file.
    'markdown-fence-language': "import os\nos.makedirs('codemirror/mode', exist_ok=True)\n" +
      `open('codemirror/mode/${prefix}evil.js', 'w').write(${py(amd(js('markdown-fence-language'), 'x'))})\n` +
      show(`{'text/markdown': ${py(`\`\`\`${prefix}evil.js?x\nprint(1)\n\`\`\``)}}`),
    // A markdown image: a zero-click GET with the page's cookies (this one opens a terminal).
    'markdown-image': show(`{'text/markdown': ${py(`![x](${origin}/terminals/new/bjimg${prefix.replace(/\W/g, '')})`)}}`),
    // Last: an error stops Run All.
    'error-traceback': `raise ValueError(${py(`<img src="x" onerror="${e('error-traceback')}">`)})`,
  };
}

function notebook(cells, kernel) {
  return JSON.stringify({
    nbformat: 4, nbformat_minor: 5,
    metadata: { kernelspec: { name: kernel, display_name: kernel, language: 'python' } },
    cells: Object.entries(cells).map(([id, source]) => ({
      cell_type: 'code', id: crypto.randomUUID().slice(0, 8), metadata: { tags: [id] },
      execution_count: null, outputs: [], source,
    })),
  }, null, 1);
}

describe('active output in Jupyter Notebook in headless Chromium', () => {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'belljar-active-'));
  const dirs = Object.fromEntries(['home', 'runtime', 'config', 'data', 'prefix', 'notebooks', 'chromium']
    .map((name) => [name, path.join(tmp, name)]));
  const token = crypto.randomBytes(24).toString('hex');
  const consoleLines = [];
  let server, context, page, base;
  let isolated = {}, control = {};

  before(async () => {
    try {
      await setUp();
      isolated = await runNotebook('vectors.ipynb', 'belljar', vectorCells(base, ''), RUN_ISOLATED);
      const controlled = ['application-javascript', 'html-script', 'widget-html', 'comm-target-module',
        'widget-version', 'markdown-fence-language', 'markdown-image'];
      const all = vectorCells(base, 'control-');
      control = await runNotebook('control.ipynb', 'belljar-allow', Object.fromEntries(controlled.map((id) => [id, all[id]])),
        controlled.filter((id) => id !== 'markdown-image').map((id) => `control-${id}`));
    } catch (error) {
      error.message += `\n--- jupyter-notebook log (its end) ---\n${(server?.log ?? '').slice(-6000)}`;
      throw error;
    }
  });

  async function setUp() {
    for (const dir of Object.values(dirs)) fs.mkdirSync(dir, { recursive: true });
    fs.chmodSync(dirs.notebooks, 0o777);
    for (const [name, mode] of [['belljar', []], ['belljar-allow', ['--active-output', 'allow']]]) {
      const install = spawnSync(BELLJAR, ['install', '--prefix', dirs.prefix, '--name', name, '--python', PYTHON,
        '--timeout', '30', '--isolation', ISOLATION, ...mode], { encoding: 'utf8' });
      assert.equal(install.status, 0, `belljar install: ${install.stderr}`);
    }
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    const env = jupyterEnvironment(dirs);
    server = start(NOTEBOOK_SERVER, ['--no-browser', '--ip=127.0.0.1', `--port=${port}`, '--port-retries=0',
      `--NotebookApp.token=${token}`, `--notebook-dir=${dirs.notebooks}`,
      ...(process.getuid() === 0 ? ['--allow-root'] : [])], { env, cwd: dirs.notebooks });
    // It says it is running once it listens.
    await said(server, 'jupyter-notebook', /is running at/, 60_000);
    assert.ok((await fetch(`${base}/api/status?token=${token}`)).ok, server.log);
    context = await launchChromium(dirs.chromium);
    page = context.pages()[0] ?? await context.newPage();
    page.on('console', (message) => consoleLines.push(message.text()));
  }

  // Waits for events, not time: every probe that must run has said so on the console, every
  // probe that ran has said its requests were answered, and every image the page holds has
  // loaded or failed (the markdown image's request is the attack). Past 30 s it fails, saying
  // what ran.
  async function probesSettled(firstLine, mustRun) {
    const lines = () => consoleLines.slice(firstLine);
    const after = (prefix) => lines().filter((line) => line.startsWith(prefix)).map((line) => line.slice(prefix.length));
    const done = () => {
      const ran = after('belljar-probe ran '), settled = new Set(after('belljar-probe settled '));
      return mustRun.every((id) => ran.some((where) => where.startsWith(`${id} in `))) &&
        ran.every((where) => settled.has(where));
    };
    await new Promise((resolve, reject) => {
      if (done()) return resolve();
      const check = () => {
        if (!done()) return;
        clearTimeout(timer);
        page.off('console', check);
        resolve();
      };
      const timer = setTimeout(() => {
        page.off('console', check);
        reject(new Error(`the probes did not all run and settle: ${lines().join('; ')}`));
      }, 30_000);
      page.on('console', check);  // after the listener that keeps consoleLines
    });
    for (const frame of page.frames()) {
      await frame.waitForFunction(() => [...document.images].every((image) => image.complete), null,
        { timeout: 30_000 }).catch(() => {});  // a frame that went away holds no image
    }
  }

  // Opens the notebook, runs every cell, clicks every javascript: link (page and frames), waits
  // for the probes (`mustRun` among them) to run and settle, and says what happened.
  async function runNotebook(file, kernel, cells, mustRun) {
    fs.writeFileSync(path.join(dirs.notebooks, file), notebook(cells, kernel));
    const firstLine = consoleLines.length;
    await page.goto(`${base}/notebooks/${file}?token=${token}`);
    await page.waitForSelector('#kernel_indicator_icon.kernel_idle_icon', { timeout: 90_000 });
    await page.click('#celllink');
    await page.click('#run_all_cells > a');
    await whenPage(page, 'Run All', allCellsDone, null, RUN_ALL_TIMEOUT);
    // MathJax typesets what it was given in its queue's order: this runs once all of it is done.
    await page.evaluate(() => new Promise((resolve) => (window.MathJax?.Hub ? window.MathJax.Hub.Queue(() => resolve()) : resolve())));
    for (const frame of page.frames()) {
      for (const link of await frame.$$('a[href^="javascript:" i]').catch(() => [])) {
        await link.click({ timeout: 2000, force: true }).catch(() => {});
      }
    }
    await probesSettled(firstLine, mustRun);
    const outputs = await page.$$eval('.code_cell', (elements) => elements.map((cell) => ({
      text: (cell.querySelector('.widget-area')?.innerText ?? '') + (cell.querySelector('.output_wrapper')?.innerText ?? ''),
      frames: cell.querySelectorAll('.belljar-isolated iframe[sandbox="allow-scripts"]').length,
      widgets: cell.querySelectorAll('.widget-area .jupyter-widgets').length,
    })));
    const terminals = await (await fetch(`${base}/api/terminals?token=${token}`)).json();
    // Shut this notebook's kernel down before the next run.
    const sessions = await (await fetch(`${base}/api/sessions?token=${token}`)).json();
    for (const { kernel: { id } } of sessions) await fetch(`${base}/api/kernels/${id}?token=${token}`, { method: 'DELETE' });
    return {
      files: fs.readdirSync(dirs.notebooks).filter((name) => name.startsWith('pwned-')).sort(),
      terminals: terminals.map((t) => t.name),
      outputs: Object.fromEntries(Object.keys(cells).map((id, i) => [id, outputs[i]])),
      ran: consoleLines.slice(firstLine).filter((line) => line.startsWith('belljar-probe ran ')),
    };
  }

  after(async () => {
    await context?.close();
    await stopServer(server, base, token);
    fs.rmSync(tmp, { recursive: true, force: true });
  });

  it('created no file and no terminal through the server from any vector (default: isolate)', () => {
    assert.deepEqual(isolated.files, [], `files written through the REST API: ${isolated.files.join(', ')}`);
    assert.deepEqual(isolated.terminals, [], 'terminals opened through the REST API');
  });

  it('still ran the scripts, isolated in sandboxed frames with an opaque origin', () => {
    for (const id of RUN_ISOLATED) {
      assert.ok(isolated.ran.includes(`belljar-probe ran ${id} in null`), `${id}: ${isolated.ran.join('; ')}`);
      assert.equal(isolated.outputs[id].frames, 1, `${id} is shown in one isolated frame`);
      assert.match(isolated.outputs[id].text, /runs in an isolated frame/);
    }
    const inPage = isolated.ran.filter((line) => !line.endsWith(' in null'));
    assert.deepEqual(inPage, [], 'no probe ran with the page\'s origin');
  });

  it('showed the widgets, without their active parts, and said what was withheld', () => {
    assert.equal(isolated.outputs['widget-description'].widgets, 1, 'the slider is drawn');
    assert.equal(isolated.outputs['widget-html'].widgets, 1, 'the HTML widget is drawn');
    assert.match(isolated.outputs['widget-html'].text, /widget value\(s\) held active content/);
    assert.match(isolated.outputs['widget-label-href'].text, /\[belljar\] withheld: active content/);
    assert.match(isolated.outputs['widget-model-module'].text, /comm message\(s\) from the sandbox were withheld/);
    assert.match(isolated.outputs['widget-version'].text, /comm message\(s\) from the sandbox were withheld/);
  });

  it('showed the markdown and LaTeX vectors as text with a notice', () => {
    for (const id of ['markdown-raw-html', 'markdown-javascript-link', 'latex-mathjax-href',
      'markdown-fence-language', 'markdown-image'])
      assert.match(isolated.outputs[id].text, /not rendered \(active output, --active-output isolate\)/, id);
  });

  it('control: with --active-output allow the same probes do create their files', () => {
    assert.deepEqual(control.files, ['pwned-control-application-javascript.txt', 'pwned-control-comm-target-module.txt',
      'pwned-control-html-script.txt', 'pwned-control-markdown-fence-language.txt', 'pwned-control-widget-html.txt',
      'pwned-control-widget-version.txt']);
    assert.ok(control.terminals.length >= 1, 'a terminal was opened');
    assert.ok(control.terminals.includes('bjimgcontrol'), `the markdown image opened its terminal: ${control.terminals}`);
  });
});
