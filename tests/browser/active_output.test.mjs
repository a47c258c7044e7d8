// Active output in the real browser, in three frontends (BELLJAR_FRONTEND): Debian's classic
// Jupyter Notebook 6.4 (`classic`, the sandbox on Debian's Python with ipywidgets 6), and
// JupyterLab 4 (`lab`) and Notebook 7 (`notebook`) from the frontends venv (the sandbox on a
// learner's venv with ipywidgets 8). The server is on loopback with a token, the browser is
// headless Chromium, and a notebook (written by the test) has one cell per way of running script
// from output. Each script tries what an attacker with script in the page could do: create a
// file through the server's REST API (PUT /api/contents) and open a terminal (POST
// /api/terminals), once with the _xsrf cookie as X-XSRFToken and once with the token JupyterLab
// puts in its page config (#jupyter-config-data) as `Authorization: token ...`. After Run All, a
// click on every javascript: link (in the page and in every frame) and on every widget error
// box, no file may exist and no terminal may be open. A control run on a kernel with
// --active-output allow does create files: the probe works, and the control's list says which
// vectors the frontend itself runs (JupyterLab sanitizes some on its own; see CONTROLLED).
// In JupyterLab and Notebook 7 one more notebook is saved and the page reloaded: ipywidgets 8
// rebuilds every model from the kernel's `update_states` (round three: an HTML value set to
// markup after display ran there, raw); on the allow kernel the probe runs again after the reload.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';

import {
  BELLJAR, FRONTENDS, ISOLATION, LAB_FRONTENDS, PANEL, SANDBOX_PYTHON, SOURCE, allCellsDone, allCellsRan, bounded,
  endSuite, freePort, installOutputKernels, jupyterEnvironment, kernelReady, labMenu, launchChromium, notebookJson,
  openInLab, said, start, startJupyterLab, whenPage, withDeadline,
} from './harness.mjs';

const FRONTEND_NAME = process.env.BELLJAR_FRONTEND ?? 'classic';
const CLASSIC = FRONTEND_NAME === 'classic';
const FRONTEND = CLASSIC ? { title: 'Jupyter Notebook 6', app: 'classic' } : LAB_FRONTENDS[FRONTEND_NAME];
assert.ok(FRONTEND, `BELLJAR_FRONTEND is classic, lab or notebook, not ${FRONTEND_NAME}`);
const PYTHON = CLASSIC ? '/usr/bin/python3' : SANDBOX_PYTHON;
const RUN_ALL_TIMEOUT = 180_000;
// The vectors shown in an isolated frame under --active-output isolate; their scripts don't run.
const FRAMED = ['html-script', 'execute-result'];
const RELOAD_VECTOR = 'widget-html-after-reload';

// The vectors run again on the `allow` kernel, and of those the ones whose probe must run there
// and write its file; the control's list is exact, so a frontend that starts running another
// shows. Vectors that navigate the page away are never in a control: they would end the run.
// What JupyterLab 4 and Notebook 7 keep from running on their own (so belljar's defence there is
// not what the test shows): an <svg onload> put in with innerHTML; image/svg+xml (drawn as an
// <img>); <script> in markdown (marked's output is not run); a javascript: link with no target
// (given target=_blank, rel=noopener, it runs nowhere); a frame from a data: URL (an opaque
// origin); MathJax 3's \href{javascript:} in LaTeX, markdown or a Label (its `safe` filter makes
// no link) and \require of a workspace file; a description_allow_html description (sanitized);
// stream text and tracebacks (escaped); and the markdown image (no GET of jupyter_server 2 opens
// a terminal).
const CONTROLLED = CLASSIC ? {
  run: ['application-javascript', 'html-script', 'widget-html', 'comm-target-module', 'widget-version',
    'markdown-fence-language', 'markdown-image'],
  writes: ['application-javascript', 'comm-target-module', 'html-script', 'markdown-fence-language', 'widget-html',
    'widget-version'],
} : {
  run: ['application-javascript', 'html-script', 'html-img-onerror', 'html-svg-onload', 'html-iframe-srcdoc',
    'html-javascript-link', 'html-javascript-link-self', 'html-svg-javascript-link', 'html-form-javascript-action',
    'html-data-iframe', 'svg-script', 'markdown-raw-html', 'markdown-script', 'markdown-javascript-link', 'markdown-latex-href',
    'latex-mathjax-href', 'latex-require', 'update-display', 'execute-result', 'pager-payload', 'stream-text',
    'widget-description', 'widget-html', 'widget-htmlmath', 'widget-label-href', 'widget-view-markup', 'widget-version',
    'widget-error-markup', 'widget-jslink', 'markdown-image', 'error-traceback'],
  writes: ['application-javascript', 'execute-result', 'html-form-javascript-action', 'html-iframe-srcdoc',
    'html-img-onerror', 'html-javascript-link-self', 'html-script', 'html-svg-javascript-link', 'markdown-raw-html',
    'pager-payload', 'update-display', 'widget-error-markup', 'widget-html', 'widget-htmlmath', 'widget-jslink',
    'widget-version', 'widget-view-markup'],
};

// The attack, run wherever a vector gets script to run. It reports where it ran on the console,
// and each request's answer.
function probe(id, origin) {
  return `(async () => {
  const id = ${JSON.stringify(id)};
  const here = String(self.origin);  // 'null' in an opaque origin (a sandboxed frame)
  const origin = here !== 'null' ? here : ${JSON.stringify(origin)};
  let xsrf = '', token = '';
  try { xsrf = decodeURIComponent((document.cookie.match(/(?:^|; )_xsrf=([^;]*)/) || [])[1] || ''); } catch (e) {}
  try { token = JSON.parse(document.getElementById('jupyter-config-data').textContent).token || ''; } catch (e) {}
  console.log('belljar-probe ran ' + id + ' in ' + here);
  const credentials = [['xsrf', { 'X-XSRFToken': xsrf }]];
  if (token) credentials.push(['token', { Authorization: 'token ' + token }]);
  const body = JSON.stringify({ type: 'file', format: 'text', content: 'written by ' + id });
  for (const [how, auth] of credentials) {
    const headers = { 'Content-Type': 'application/json', ...auth };
    const answers = [];
    for (const [method, url, data] of [['PUT', '/api/contents/pwned-' + id + '.txt', body], ['POST', '/api/terminals']]) {
      try {
        answers.push(method + ' ' + (await fetch(origin + url, { method, credentials: 'include', headers, body: data })).status);
      } catch (e) { answers.push(method + ' ' + e.name); }
    }
    console.log('belljar-probe answered ' + id + ' by ' + how + ': ' + answers.join(', '));
  }
  console.log('belljar-probe settled ' + id + ' in ' + here);  // its requests are answered
})();`;
}
// The probe as an expression without quotes of its own, for attributes and URLs.
const evalOf = (id, origin) => `eval(atob('${Buffer.from(probe(id, origin)).toString('base64')}'))`;

// A requirejs module that runs `code` when loaded and offers `name` (a comm target, a class).
const amd = (code, name) => `define([], function () { ${code}; return { ${JSON.stringify(name)}: function () {} }; });`;

// Python source of one cell per vector; py() quotes a JS string as a Python literal.
const py = (text) => JSON.stringify(text);
const show = (bundle) => `display(${bundle}, raw=True)`;

// A widget model opened by hand, in ipywidgets 8's protocol 2 (state under data.state, the
// protocol's version in the metadata), shown by a widget-view output that names it.
const widget8 = (state) => 'from comm import create_comm\n' +
  `c = create_comm(target_name='jupyter.widget', data={'state': ${state}, 'buffer_paths': []}, metadata={'version': '2.1.0'})\n` +
  show("{'application/vnd.jupyter.widget-view+json': {'model_id': c.comm_id, 'version_major': 2, 'version_minor': 0}}");
const controls8 = (model, view, rest) => `{'_model_module': '@jupyter-widgets/controls', '_model_module_version': '2.0.0',
 '_model_name': '${model}', '_view_module': '@jupyter-widgets/controls', '_view_module_version': '2.0.0', '_view_name': '${view}', ${rest}}`;

function vectorCells(origin, prefix) {
  const e = (id) => evalOf(`${prefix}${id}`, origin);
  const js = (id) => probe(`${prefix}${id}`, origin);
  const img = (id) => `<img src="x" onerror="${e(id)}">`;
  const cells = {
    'application-javascript': show(`{'application/javascript': ${py(js('application-javascript'))}}`),
    'html-script': show(`{'text/html': ${py(`<b>html</b><script>${js('html-script')}</script>`)}}`),
    'html-img-onerror': show(`{'text/html': ${py(img('html-img-onerror'))}}`),
    'html-svg-onload': show(`{'text/html': ${py(`<svg onload="${e('html-svg-onload')}"><rect width="9" height="9"/></svg>`)}}`),
    'html-iframe-srcdoc': show(`{'text/html': ${py(`<iframe srcdoc="&lt;script&gt;${e('html-iframe-srcdoc')}&lt;/script&gt;"></iframe>`)}}`),
    'html-javascript-link': show(`{'text/html': ${py(`<a href="javascript:${e('html-javascript-link')}">click</a>`)}}`),
    // An SVG link is no HTMLAnchorElement: JupyterLab gives it no target; href and xlink:href.
    'html-svg-javascript-link': show(`{'text/html': ${py(`<svg width="60" height="20"><a href="javascript:${e('html-svg-javascript-link')}"><text x="0" y="15">click</text></a>` +
      `<a xlink:href="javascript:${e('html-svg-javascript-link')}"><text x="30" y="15">click</text></a></svg>`)}}`),
    // A form whose action is a javascript: URL runs it when submitted (the test clicks its button).
    'html-form-javascript-action': show(`{'text/html': ${py(`<form action="javascript:${e('html-form-javascript-action')}"><button>go</button></form>`)}}`),
    // A frame from a data: URL has an opaque origin of its own.
    'html-data-iframe': show(`{'text/html': ${py(`<iframe src="data:text/html;base64,${Buffer.from(`<script>${js('html-data-iframe')}</script>`).toString('base64')}"></iframe>`)}}`),
    'svg-script': show(`{'image/svg+xml': ${py(`<svg xmlns="http://www.w3.org/2000/svg" width="20" height="20" onload="${e('svg-script')}"><script>${js('svg-script-element')}</script><rect width="9" height="9"/></svg>`)}}`),
    'markdown-raw-html': show(`{'text/markdown': ${py(`markdown ${img('markdown-raw-html')}`)}}`),
    'markdown-javascript-link': show(`{'text/markdown': ${py(`[click](javascript:${e('markdown-javascript-link')})`)}}`),
    'latex-mathjax-href': show(`{'text/latex': ${py(`$\\href{javascript:${e('latex-mathjax-href')}}{click}$`)}}`),
    'update-display': `h = display({'text/plain': 'first'}, raw=True, display_id=True)\n` +
      `h.update({'text/html': ${py(img('update-display'))}}, raw=True)`,
    'execute-result': `class Active:\n    def _repr_html_(self):\n        return ${py(`<script>${js('execute-result')}</script>`)}\nActive()`,
    'pager-payload': 'import belljar_worker.current as s\n' +
      `s.session._take_payload = lambda: (delattr(s.session, '_take_payload'), [{'source': 'page', 'start': 0, 'data': {'text/plain': 'paged', 'text/html': ${py(img('pager-payload'))}}}])[1]`,
    // A frame may navigate itself: a GET to the server (GET /terminals/new opens a terminal in
    // Notebook 6).
    'html-self-navigation': show(`{'text/html': ${py(`<meta http-equiv="refresh" content="0;url=${origin}/terminals/new"><img src="${origin}/terminals/new"><script>location.href = ${JSON.stringify(origin + '/terminals/new')};</script>`)}}`),
    'stream-text': `print(${py(img('stream-text'))})`,
    // A markdown image: a zero-click GET with the page's cookies (in Notebook 6 it opens a terminal).
    'markdown-image': show(`{'text/markdown': ${py(`![x](${origin}/terminals/new/bjimg${prefix.replace(/\W/g, '')})`)}}`),
  };
  return { ...cells, ...(CLASSIC ? classicVectors(origin, prefix, e, js) : labVectors(origin, prefix, e, js, img)),
    // Last: an error stops Run All.
    'error-traceback': `raise ValueError(${py(img('error-traceback'))})` };
}

// Notebook 6 and ipywidgets 6 (protocol 1): requirejs loads what a comm or a model names.
function classicVectors(origin, prefix, e, js) {
  return {
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
  };
}

// JupyterLab's own renderers and ipywidgets 8 (protocol 2). JupyterLab has no requirejs: a comm's
// target_module and a model's module name load nothing (it asks its registry of extensions), and
// a fence's language is looked up in CodeMirror's list; those Notebook 6 vectors have no
// counterpart here. What it has instead: output the session produced is trusted, so text/html
// and markdown (marked) go in with innerHTML, unsanitized, and their <script>s are run; MathJax 3
// typesets LaTeX; ipywidgets 8's error box puts a failed model's error into the page as markup.
function labVectors(origin, prefix, e, js, img) {
  return {
    // JupyterLab opens a link that names no target in a new window (target=_blank, rel=noopener),
    // where a javascript: URL runs nowhere; one that names _self keeps it.
    'html-javascript-link-self': show(`{'text/html': ${py(`<a target="_self" href="javascript:${e('html-javascript-link-self')}">click</a>`)}}`),
    // MathJax typesets TeX in markdown too.
    'markdown-latex-href': show(`{'text/markdown': ${py(`x $\\href{javascript:${e('markdown-latex-href')}}{click}$`)}}`),
    'markdown-script': show(`{'text/markdown': ${py(`markdown <script>${js('markdown-script')}</script>`)}}`),
    // MathJax 3's require extension loads a TeX package by name; a workspace file by path?
    'latex-require': `open('${prefix}evil-mathjax.js', 'w').write(${py(js('latex-require'))})\n` +
      show(`{'text/latex': ${py(`$\\require{/files/${prefix}evil-mathjax.js}\\require{[/files]/${prefix}evil-mathjax.js} x$`)}}`),
    // ipywidgets 8: a description is markup only with description_allow_html (then JupyterLab's
    // sanitizer cleans it); an HTML widget's value goes in with innerHTML; a Label is typeset.
    'widget-description': `import ipywidgets as w\nw.IntSlider(description=${py(img('widget-description'))}, description_allow_html=True)`,
    'widget-html': `import ipywidgets as w\nw.HTML(value=${py(img('widget-html'))})`,
    'widget-htmlmath': `import ipywidgets as w\nw.HTMLMath(value=${py(img('widget-htmlmath'))})`,
    'widget-label-href': `import ipywidgets as w\nw.Label(value=${py(`$\\href{javascript:${e('widget-label-href')}}{click}$`)})`,
    // Round three: jslink copies a Text's value (text, passed as is) into an HTML value in the page.
    'widget-jslink': `import ipywidgets as w\nt = w.Text(value=${py(img('widget-jslink'))}); h = w.HTML('linked')\n` +
      "j = w.jslink((t, 'value'), (h, 'value'))\ndisplay(h)",
    // A model opened by hand (no ipywidgets in the sandbox's code) and a widget-view output of it.
    'widget-view-markup': widget8(controls8('HTMLModel', 'HTMLView',
      `'value': ${py(img('widget-view-markup'))}, 'description': ${py(img('widget-view-markup-description'))}, 'description_allow_html': True`)),
    // A model the manager cannot make: ipywidgets 8's error box, once clicked, shows the error
    // (its message holds the module's name, or the version asked of a known module) with innerHTML.
    'widget-error-markup': widget8(`{'_model_module': ${py(`<img src=x onerror="${e('widget-error-markup')}">`)},
 '_model_module_version': '1.0.0', '_model_name': 'X', '_view_module': 'x', '_view_module_version': '1.0.0', '_view_name': 'X'}`),
    'widget-version': widget8(controls8('HTMLModel', 'HTMLView', "'value': 'v'").replace("'_model_module_version': '2.0.0'",
      `'_model_module_version': ${py(`<img src=x onerror="${e('widget-version')}">`)}`)),
  };
}


// In the page (JupyterLab): MathJax has typeset every LaTeX output and widget label of the notebook
// in view that holds TeX (JupyterLab typesets after the cell is done, on its own schedule).
function typeset(panel) {
  return [...document.querySelectorAll(`${panel} .jp-RenderedLatex, ${panel} .widget-label`)]
    .every((element) => element.querySelector('mjx-container') || !element.textContent.includes('$'));
}

describe(`active output in ${FRONTEND.title} in headless Chromium`, () => {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), `belljar-active-${FRONTEND.app}-`));
  const dirs = Object.fromEntries(['home', 'runtime', 'config', 'data', 'prefix', 'notebooks', 'chromium', 'settings',
    'workspaces'].map((name) => [name, path.join(tmp, name)]));
  const token = crypto.randomBytes(24).toString('hex');
  const consoleLines = [];
  let server, context, base;
  let isolated = {}, control = {}, reloaded = {}, reloadedControl = {};

  before(async () => {
    try {
      await withDeadline((async () => {
        await setUp();
        isolated = await runNotebook('vectors.ipynb', 'belljar', vectorCells(base, ''), []);
        const all = vectorCells(base, 'control-');
        control = await runNotebook('control.ipynb', 'belljar-allow',
          Object.fromEntries(CONTROLLED.run.map((id) => [id, all[id]])), CONTROLLED.writes.map((id) => `control-${id}`));
        if (!CLASSIC) {
          reloaded = await reloadNotebook('reload.ipynb', 'belljar', '');
          reloadedControl = await reloadNotebook('reload-control.ipynb', 'belljar-allow', 'control-');
        }
      })(), 720_000, 'setting up and running the notebooks');
    } catch (error) {
      error.message += `\n--- jupyter ${FRONTEND.app} log (its end) ---\n${(server?.log ?? '').slice(-6000)}`;
      throw error;
    }
  });

  async function setUp() {
    for (const dir of Object.values(dirs)) fs.mkdirSync(dir, { recursive: true });
    fs.chmodSync(dirs.notebooks, 0o777);
    installOutputKernels(dirs.prefix, PYTHON, ISOLATION);
    if (CLASSIC) {
      const port = await freePort();
      base = `http://127.0.0.1:${port}`;
      server = start('/usr/bin/jupyter-notebook', ['--no-browser', '--ip=127.0.0.1', `--port=${port}`,
        '--port-retries=0', `--NotebookApp.token=${token}`, `--notebook-dir=${dirs.notebooks}`,
        ...(process.getuid() === 0 ? ['--allow-root'] : [])], { env: jupyterEnvironment(dirs), cwd: dirs.notebooks });
      // It says it is running once it listens.
      await said(server, 'jupyter-notebook', /is running at/, 60_000);
      assert.ok((await fetch(`${base}/api/status?token=${token}`, bounded())).ok, server.log);
    } else {
      ({ server, base } = await startJupyterLab({ frontend: FRONTEND, frontends: FRONTENDS, dirs, token }));
    }
    context = await launchChromium(dirs.chromium);
    // Every page's console, popups (a javascript: link with target=_blank) included.
    context.on('console', (message) => consoleLines.push(message.text()));
  }

  // Waits for events, not time: every probe that must run has said so on the console, every
  // probe that ran has said its requests were answered, and every image the page holds has
  // loaded or failed (the markdown image's request is the attack). Past 30 s it fails, saying
  // what ran.
  async function probesSettled(page, firstLine, mustRun) {
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
        context.off('console', check);
        resolve();
      };
      const timer = setTimeout(() => {
        context.off('console', check);
        reject(new Error(`the probes did not all run and settle: ${lines().join('; ')}`));
      }, 30_000);
      context.on('console', check);  // after the listener that keeps consoleLines
    });
    for (const frame of page.frames()) {
      await frame.waitForFunction(() => [...document.images].every((image) => image.complete), null,
        { timeout: 30_000 }).catch(() => {});  // a frame that went away holds no image
    }
  }

  // Opens the notebook in a page of its own, runs every cell, waits for its typesetting, and
  // does what a curious learner does: clicks every javascript: link (page and frames) and every
  // widget error box. Returns the page.
  async function runAll(file) {
    const page = await context.newPage();
    if (CLASSIC) {
      await page.goto(`${base}/notebooks/${file}?token=${token}`);
      await page.waitForSelector('#kernel_indicator_icon.kernel_idle_icon', { timeout: 90_000 });
      await page.click('#celllink');
      await page.click('#run_all_cells > a');
      await whenPage(page, 'Run All', allCellsDone, null, RUN_ALL_TIMEOUT);
      // MathJax typesets what it was given in its queue's order: this runs once all of it is done.
      await page.evaluate(() => new Promise((resolve) => (window.MathJax?.Hub ? window.MathJax.Hub.Queue(() => resolve()) : resolve())));
    } else {
      await openInLab(page, { base, token, frontend: FRONTEND, file, workspace: path.basename(file, '.ipynb'), timeoutMs: 90_000 });
      await labMenu(page, 'Run', 'Run All Cells');
      await whenPage(page, 'Run All', allCellsRan, PANEL, RUN_ALL_TIMEOUT);
      await whenPage(page, 'LaTeX typeset', typeset, PANEL, 60_000);
    }
    const clicked = [];  // each javascript: link: its probe's id, its target, whether the click went through
    for (const frame of page.frames()) {
      for (const link of await frame.$$('a[href^="javascript:" i]').catch(() => [])) {
        const [href, target] = await link.evaluate((a) => [a.getAttribute('href'), a.getAttribute('target')])
          .catch(() => ['', '']);
        const code = Buffer.from(decodeURIComponent(href).match(/atob\('([^']+)'\)/)?.[1] ?? '', 'base64').toString();
        const outcome = await link.click({ timeout: 2000, force: true }).then(() => 'clicked', (error) => error.name);
        clicked.push(`${code.match(/const id = "([^"]+)"/)?.[1]} (target ${target || 'none'}): ${outcome}`);
      }
    }
    for (const frame of page.frames()) {
      for (const button of await frame.$$('form[action^="javascript:" i] button').catch(() => [])) {
        clicked.push(`a form's button: ${await button.click({ timeout: 2000, force: true }).then(() => 'clicked', (error) => error.name)}`);
      }
    }
    for (const box of await page.$$('.jupyter-widgets-error-widget')) await box.click({ timeout: 2000, force: true }).catch(() => {});
    return { page, clicked };
  }

  // Runs the notebook, waits for the probes (`mustRun` among them) to run and settle, and says
  // what happened.
  async function runNotebook(file, kernel, cells, mustRun) {
    fs.writeFileSync(path.join(dirs.notebooks, file), notebookJson(cells, kernel));
    const firstLine = consoleLines.length;
    const { page, clicked } = await runAll(file);
    await probesSettled(page, firstLine, mustRun);
    const outputs = await page.$$eval(CLASSIC ? '.code_cell' : `${PANEL} .jp-CodeCell`, (elements, classic) => elements.map((cell) => ({
      text: classic ? (cell.querySelector('.widget-area')?.innerText ?? '') + (cell.querySelector('.output_wrapper')?.innerText ?? '')
        : cell.querySelector('.jp-Cell-outputArea')?.innerText ?? '',
      frames: cell.querySelectorAll('.belljar-isolated iframe[sandbox=""]').length,
      widgets: cell.querySelectorAll(classic ? '.widget-area .jupyter-widgets' : '.jupyter-widgets:not(.jp-OutputArea-output)').length,
    })), CLASSIC);
    const terminals = await (await fetch(`${base}/api/terminals?token=${token}`, bounded())).json();
    // Shut this notebook's kernel down before the next run.
    const sessions = await (await fetch(`${base}/api/sessions?token=${token}`, bounded())).json();
    for (const { kernel: { id } } of sessions) await fetch(`${base}/api/kernels/${id}?token=${token}`, bounded({ method: 'DELETE' }));
    const lines = consoleLines.slice(firstLine);
    await page.close();
    return {
      files: fs.readdirSync(dirs.notebooks).filter((name) => name.startsWith('pwned-')).sort(),
      terminals: terminals.map((t) => t.name),
      outputs: Object.fromEntries(Object.keys(cells).map((id, i) => [id, outputs[i]])),
      ran: lines.filter((line) => line.startsWith('belljar-probe ran ')),
      answered: lines.filter((line) => line.startsWith('belljar-probe answered ')),
      clicked,
    };
  }

  // Round three: an HTML widget shown plain, then given markup that acts (the update was
  // cleaned). The notebook is saved and the page reloaded, as a learner reopening it: ipywidgets
  // 8 opens jupyter.widget.control and rebuilds the model from the kernel's update_states. The
  // probe's file is removed before the reload, so a file after it was written by the rebuilt
  // model. `prefix` is the control's (the allow kernel, where the first render runs it too).
  async function reloadNotebook(file, kernel, prefix) {
    const id = `${prefix}${RELOAD_VECTOR}`;
    const cell = 'from IPython.display import display\nimport ipywidgets as w\n' +
      `h = w.HTML(value='<b>kept</b>')\ndisplay(h)\nh.value = ${py(`<img src="x" onerror="${evalOf(id, base)}"><b>kept</b>`)}`;
    fs.writeFileSync(path.join(dirs.notebooks, file), notebookJson({ [RELOAD_VECTOR]: cell }, kernel));
    const firstRun = consoleLines.length;
    const page = await context.newPage();
    await openInLab(page, { base, token, frontend: FRONTEND, file, workspace: path.basename(file, '.ipynb'), timeoutMs: 90_000 });
    await labMenu(page, 'Run', 'Run All Cells');
    await whenPage(page, 'Run All', allCellsRan, PANEL, RUN_ALL_TIMEOUT);
    await probesSettled(page, firstRun, prefix ? [id] : []);  // the control's runs at once too
    await page.keyboard.press('Control+s');
    await whenPage(page, `${file} saved`, () => !window.jupyterapp.shell.currentWidget.context.model.dirty, null, 30_000);
    assert.match(fs.readFileSync(path.join(dirs.notebooks, file), 'utf8'), /widget-view\+json/, 'the view is saved');
    fs.rmSync(path.join(dirs.notebooks, `pwned-${id}.txt`), { force: true });
    const firstLine = consoleLines.length;
    await page.reload();
    await whenPage(page, `${file}'s kernel ready after the reload`, kernelReady, file, 90_000);
    const rebuilt = (panel) => [...document.querySelectorAll(`${panel} .widget-html`)]
      .some((element) => element.textContent.includes('kept'));
    await whenPage(page, 'the HTML widget rebuilt from the kernel', rebuilt, PANEL, 60_000);
    await probesSettled(page, firstLine, prefix ? [id] : []);
    const sessions = await (await fetch(`${base}/api/sessions?token=${token}`, bounded())).json();
    for (const { kernel: { id: kernelId } } of sessions) await fetch(`${base}/api/kernels/${kernelId}?token=${token}`, bounded({ method: 'DELETE' }));
    await page.close();
    return {
      files: fs.readdirSync(dirs.notebooks).filter((name) => name.startsWith(`pwned-${id}`)),
      ran: consoleLines.slice(firstLine).filter((line) => line.startsWith('belljar-probe ran ')),
    };
  }

  after(async () => {
    await endSuite({ context, server, base, token, tmp });
    process.stdout.write(`${FRONTEND.title}, isolate: ${JSON.stringify({ ran: isolated.ran, answered: isolated.answered })}\n` +
      `${FRONTEND.title}, allow: ${JSON.stringify({ files: control.files, ran: control.ran, answered: control.answered, clicked: control.clicked })}\n`);
  });

  it('created no file and no terminal through the server from any vector (default: isolate)', () => {
    assert.deepEqual(isolated.files, [], `files written through the REST API: ${isolated.files.join(', ')}`);
    assert.deepEqual(isolated.terminals, [], 'terminals opened through the REST API');
  });

  it('ran no script from any output: active markup is shown in frames that run none', () => {
    assert.deepEqual(isolated.ran, [], 'no probe ran, in the page or in a frame');
    for (const id of FRAMED) {
      assert.equal(isolated.outputs[id].frames, 1, `${id} is shown in one isolated frame`);
      assert.match(isolated.outputs[id].text, /shown in an isolated frame without its active parts/);
    }
    assert.match(isolated.outputs['application-javascript'].text, /its script was not run/);
  });

  it('showed the widgets, without their active parts, and said what was withheld', () => {
    assert.equal(isolated.outputs['widget-description'].widgets, 1, 'the slider is drawn');
    assert.equal(isolated.outputs['widget-html'].widgets, 1, 'the HTML widget is drawn');
    assert.match(isolated.outputs['widget-html'].text, /widget value\(s\) held active content/);
    assert.match(isolated.outputs['widget-label-href'].text, /\[belljar\] withheld: active content/);
    assert.match(isolated.outputs['widget-version'].text, /comm message\(s\) from the sandbox were withheld/);
    for (const id of CLASSIC ? ['widget-model-module'] : ['widget-error-markup'])
      assert.match(isolated.outputs[id].text, /comm message\(s\) from the sandbox were withheld/, id);
    if (!CLASSIC) {  // a model opened by hand is checked like one ipywidgets opened
      assert.equal(isolated.outputs['widget-view-markup'].widgets, 1, 'the hand-made HTML widget is drawn');
      assert.match(isolated.outputs['widget-view-markup'].text, /2 widget value\(s\) held active content/);
      // The link is withheld (the page would copy the Text's value into the HTML one); the HTML
      // widget itself is drawn.
      assert.match(isolated.outputs['widget-jslink'].text, /comm message\(s\) from the sandbox were withheld \(the first: a link/);
      assert.equal(isolated.outputs['widget-jslink'].widgets, 1, 'the HTML widget is drawn');
    }
  });

  it('showed the markdown and LaTeX vectors as text with a notice', () => {
    for (const id of ['markdown-raw-html', 'markdown-javascript-link', 'latex-mathjax-href', 'markdown-image',
      ...(CLASSIC ? ['markdown-fence-language'] : ['markdown-script', 'latex-require'])])
      assert.match(isolated.outputs[id].text, /not rendered \(active output, --active-output isolate\)/, id);
  });

  it('ran nothing when a reloaded page rebuilt a widget from the kernel (round three)', { skip: CLASSIC }, () => {
    assert.deepEqual(reloaded.files, [], 'the rebuilt HTML widget wrote through the REST API');
    assert.deepEqual(reloaded.ran, [], 'a probe ran after the reload');
  });

  it('control: on the allow kernel the rebuilt widget runs its script after the reload', { skip: CLASSIC }, () => {
    assert.deepEqual(reloadedControl.files, [`pwned-control-${RELOAD_VECTOR}.txt`]);
  });

  it('control: with --active-output allow the same probes do create their files', () => {
    assert.deepEqual(control.files, CONTROLLED.writes.map((id) => `pwned-control-${id}.txt`).sort());
    assert.ok(control.terminals.length >= 1, 'a terminal was opened');
    // Notebook 6's GET /terminals/new/<name> opens a terminal; jupyter_server 2's GETs open none
    // (Notebook 7's /terminals/<name> is a page whose script would need the token).
    assert.equal(control.terminals.includes('bjimgcontrol'), CLASSIC, `the markdown image's terminal: ${control.terminals}`);
  });
});
