// The walkthrough as a learner runs it: Debian's Jupyter Notebook server on loopback, the
// notebook opened in headless Chromium, Cell → Run All clicked, and what the page rendered
// checked (text, the PNG plot, the pandas table, the limit's error, the network cells). As the
// demo runs it: the chat stand-in serves HTTPS with a demo CA (scripts/demo-ca.sh) the kernel
// trusts with --upstream-ca, and wants the course's key, which the kernel binds to it.
// Everything the server, the kernel and the browser write lives in one temporary directory;
// a full-page screenshot and one of the widget exercise after its slider was dragged are kept in
// BELLJAR_ARTIFACTS (printed at the end).
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';

import {
  BELLJAR, ISOLATION, SOURCE, allCellsDone, bounded, driveTheExercise, endSuite, freePort, jupyterEnvironment,
  launchChromium, said, start, startCourse, whenPage, withDeadline,
} from './harness.mjs';

const ARTIFACTS = process.env.BELLJAR_ARTIFACTS ?? path.join(SOURCE, 'build', 'tests', 'artifacts');
const NOTEBOOK_SERVER = '/usr/bin/jupyter-notebook';
const PYTHON = '/usr/bin/python3';

const RUN_ALL_TIMEOUT = 240_000;  // every cell, the 2 s limit and a cold kernel start included
const WIDGET_RUN_TIMEOUT = 90_000;  // one re-run of the exercise: 10**8 squares on a busy machine
const WORKSPACE_SECRET = 'sk-browser-workspace-secret-0123456789';
const SERVER_SECRET = 'sk-browser-server-environment-secret-0123456789';  // the course's key
const PLACEHOLDER = 'belljar-secret-OPENAI_API_KEY-[0-9a-f]{32}';

describe('the walkthrough in Jupyter Notebook in headless Chromium', () => {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'belljar-browser-'));
  const dirs = Object.fromEntries(['home', 'runtime', 'config', 'data', 'prefix', 'notebooks', 'chromium', 'tls']
    .map((name) => [name, path.join(tmp, name)]));
  const screenshot = path.join(ARTIFACTS, 'walkthrough.png');
  const widgetScreenshot = path.join(ARTIFACTS, 'walkthrough-widgets.png');
  const token = crypto.randomBytes(24).toString('hex');
  let chat, server, context, page, base, chatPort;
  let cells = [];      // per code cell: {source, tags, prompt, outputs: [{classes, text, html}]}
  let pageText = '';

  before(async () => {
    try {
      await withDeadline(runTheWalkthrough(), 240_000 + RUN_ALL_TIMEOUT, 'setting up and running the walkthrough');
    } catch (error) {
      error.message += `\n--- jupyter-notebook log (its end) ---\n${(server?.log ?? '').slice(-6000)}`
        + `\n--- chat stand-in log ---\n${(chat?.log ?? '').slice(-2000)}`;
      throw error;
    }
  });

  async function runTheWalkthrough() {
    for (const dir of Object.values(dirs)) fs.mkdirSync(dir, { recursive: true });
    fs.chmodSync(dirs.notebooks, 0o777);  // the workspace; the sandbox user is `nobody` under root

    // The course's chat service and the kernelspec with its policy, as scripts/demo.sh sets them up.
    ({ chat, chatPort } = await startCourse({ source: SOURCE, belljar: BELLJAR, prefix: dirs.prefix, tls: dirs.tls,
      python: PYTHON, isolation: ISOLATION, serverSecret: SERVER_SECRET }));

    fs.copyFileSync(path.join(SOURCE, 'notebooks', 'walkthrough.ipynb'), path.join(dirs.notebooks, 'walkthrough.ipynb'));
    fs.writeFileSync(path.join(dirs.notebooks, '.env'), `OPENAI_API_KEY=${WORKSPACE_SECRET}\n`);

    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    const env = {
      ...jupyterEnvironment(dirs),
      OPENAI_API_KEY: SERVER_SECRET,  // the kernel inherits it; the sandbox must not
    };
    server = start(NOTEBOOK_SERVER, ['--no-browser', '--ip=127.0.0.1', `--port=${port}`, '--port-retries=0',
      `--NotebookApp.token=${token}`, `--notebook-dir=${dirs.notebooks}`,
      ...(process.getuid() === 0 ? ['--allow-root'] : [])], { env, cwd: dirs.notebooks });
    // It says it is running once it listens.
    await said(server, 'jupyter-notebook', /is running at/, 60_000);
    assert.ok((await fetch(`${base}/api/status?token=${token}`, bounded())).ok, server.log);

    context = await launchChromium(dirs.chromium);
    page = context.pages()[0] ?? await context.newPage();
    await page.goto(`${base}/notebooks/walkthrough.ipynb?token=${token}`);
    await page.waitForSelector('#kernel_indicator_icon.kernel_idle_icon', { timeout: 90_000 });

    // Run everything as a learner does: the Cell menu, then Run All.
    await page.click('#celllink');
    await page.click('#run_all_cells > a');
    try {
      await whenPage(page, 'Run All', allCellsDone, null, RUN_ALL_TIMEOUT);
    } finally {
      await keepScreenshot().catch((error) => process.stderr.write(`no screenshot: ${error}\n`));
    }

    cells = await page.$$eval('.code_cell', (elements) => elements.map((cell) => {
      const index = [...document.querySelectorAll('.cell')].indexOf(cell);
      const model = window.Jupyter.notebook.get_cell(index);  // source and tags, read only
      return {
        source: model.get_text(),
        tags: model.metadata.tags ?? [],
        prompt: cell.querySelector('.input_prompt').textContent,
        outputs: [...cell.querySelectorAll('.output_area')].map((area) => ({
          classes: [...area.querySelectorAll('.output_subarea')].flatMap((s) => [...s.classList]),
          text: area.innerText,
          html: area.innerHTML,
        })),
      };
    }));
    pageText = await page.innerText('#notebook-container');
  }

  // The notebook scrolls inside #site, not the document: grow the viewport to the whole
  // notebook first so that the screenshot shows every cell.
  async function keepScreenshot() {
    const height = await page.evaluate(() => {
      const header = document.querySelector('#header')?.offsetHeight ?? 0;
      return header + document.querySelector('#notebook').scrollHeight + 40;
    });
    const size = { width: 1280, height: Math.min(Math.max(height, 900), 30_000) };
    if (size.height !== page.viewportSize().height) {
      // The notebook sizes #site in its own resize handler, bound at load: a handler bound now
      // runs after it.
      await page.evaluate(() => {
        window.belljarResized = new Promise((resolve) => window.addEventListener('resize', resolve, { once: true }));
      });
      await page.setViewportSize(size);
      await page.evaluate(() => window.belljarResized.then(() => undefined));
    }
    fs.mkdirSync(ARTIFACTS, { recursive: true });
    await page.screenshot({ path: screenshot, fullPage: true });
    await page.setViewportSize({ width: 1280, height: 900 });
  }

  after(async () => {
    await endSuite({ context, server, base, token, chat, tmp });
    process.stdout.write(`screenshots: ${screenshot} ${widgetScreenshot}\n`);
  });

  const cellWith = (fragment) => {
    const found = cells.find((cell) => cell.source.includes(fragment));
    assert.ok(found, `no code cell with ${fragment}`);
    return found;
  };
  const textOf = (cell) => cell.outputs.map((o) => o.text).join('\n');

  it('ran on the belljar kernelspec installed for the test, with the course policy', async () => {
    const specs = await (await fetch(`${base}/api/kernelspecs?token=${token}`, bounded())).json();
    const { argv } = specs.kernelspecs.belljar.spec;
    assert.equal(fs.realpathSync(argv[0]), fs.realpathSync(BELLJAR));
    assert.ok(argv.includes(`OPENAI_API_KEY@localhost:${chatPort}`), argv.join(' '));
    assert.ok(!argv.join(' ').includes(SERVER_SECRET), 'the kernelspec names the key, never its value');
    assert.equal(await page.innerText('.kernel_indicator_name'), specs.kernelspecs.belljar.spec.display_name);
  });

  it('gave every code cell a prompt number', () => {
    assert.ok(cells.length >= 10, `${cells.length} code cells`);
    const numbers = cells.map((cell) => Number(cell.prompt.match(/\[(\d+)\]/)?.[1]));
    assert.deepEqual(numbers, numbers.map((_, i) => i + 1), 'executed once each, in order');
  });

  it('shows text output: the workspace write and the refused writes', () => {
    const text = textOf(cellWith('results.txt'));
    assert.match(text, /workspace write: written from the sandbox/);
    assert.match(text, /\/etc\/evil\.txt: refused/);
    assert.doesNotMatch(text, /WRITTEN/);
  });

  it('keeps the secrets out: a placeholder for the key, .env masked', () => {
    const text = textOf(cellWith('OPENAI_API_KEY inside the sandbox:'));
    assert.match(text, new RegExp(`OPENAI_API_KEY inside the sandbox: ${PLACEHOLDER}\\n`));
    assert.match(text, /\.env is masked/);
    assert.ok(!pageText.includes(WORKSPACE_SECRET) && !pageText.includes(SERVER_SECRET));
  });

  it('blocks example.com', () => {
    assert.match(textOf(cellWith('http://example.com')), /example\.com: blocked ->/);
  });

  it('shows the chat cell\'s answer: the stand-in got the real key, the sandbox had a placeholder', () => {
    assert.match(textOf(cellWith('def ask(')), /\(answered by gpt-4o-mini\)/);
  });

  it('shows the steal-the-key exercise getting the placeholder back every time', () => {
    const text = textOf(cellWith('stolen = os.environ.get('));
    assert.match(text, new RegExp(`1\\. printed: +${PLACEHOLDER}\\n`));
    assert.match(text, new RegExp(`2\\. echoed back: +Bearer ${PLACEHOLDER}\\n`));
    assert.match(text, new RegExp(`3\\. written, read back: ${PLACEHOLDER}`));
  });

  it('shows the TimeoutError of the %%limits cell as an error output, and the session survives', () => {
    const limited = cellWith('%%limits --timeout 2');
    const errors = limited.outputs.filter((o) => o.classes.includes('output_error'));
    assert.equal(errors.length, 1, JSON.stringify(limited.outputs.map((o) => o.classes)));
    assert.match(errors[0].text, /TimeoutError/);
    assert.match(textOf(cellWith('print(survivor')), /still here - the loop counted to \d+/);
  });

  it('shows no error output anywhere else', () => {
    const unexpected = cells.filter((cell) => !cell.tags.includes('raises-exception')
      && cell.outputs.some((o) => o.classes.includes('output_error')));
    assert.deepEqual(unexpected.map((cell) => `${cell.source}\n${textOf(cell)}`), []);
  });

  it('renders the plot as a PNG image', async () => {
    const plot = cellWith('plt.show()');
    assert.ok(plot.outputs.some((o) => /<img [^>]*src="data:image\/png;base64,/.test(o.html)), 'an <img> with a PNG');
    const sizes = await page.$$eval('.output_area img[src^="data:image/png"]',
      (images) => images.map((image) => [image.naturalWidth, image.naturalHeight]));
    assert.ok(sizes.length >= 1 && sizes.every(([w, h]) => w > 100 && h > 100), JSON.stringify(sizes));
  });

  it('renders the pandas DataFrame as an HTML table', () => {
    const table = cellWith('pd.DataFrame(').outputs.find((o) => o.classes.includes('output_html'));
    assert.ok(table, 'an HTML output');
    assert.match(table.html, /<table[^>]*class="dataframe"/);
    assert.match(table.text, /workspace only/);
    assert.match(table.text, /time cap/);
  });

  it('shows the audit records of the cells that ran', () => {
    const audit = cellWith('%audit').outputs.find((o) => o.classes.includes('output_html'));
    assert.ok(audit, 'an HTML output');
    assert.match(audit.html, /<th>limit hit<\/th>/);
    assert.match(audit.html, /<td>timeout<\/td>/, 'the %%limits cell\'s record');
  });

  // The exercise as a learner does it without editing code: drag the workload slider, pick a
  // temperature; each change re-runs `experiment` in the sandbox and its output replaces the last.
  it('drives the widget exercise: the slider and the dropdown re-run it in the sandbox', async () => {
    const cell = page.locator('.code_cell', { hasText: 'widgets.interact(' });
    const text = await driveTheExercise(page, {
      cell,
      output: cell.locator('.output_wrapper').first(),  // the Output widget nests its own
      handle: cell.locator('.widget-hslider .ui-slider-handle'),
      track: cell.locator('.widget-hslider .slider'),
      readout: cell.locator('.widget-hslider .widget-readout'),
      dropdown: cell.locator('select'),
    }, () => widgetScreenshot, WIDGET_RUN_TIMEOUT);
    assert.ok(!text.includes(SERVER_SECRET) && !text.includes(WORKSPACE_SECRET));
  });
});
