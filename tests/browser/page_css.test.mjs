// An output's styles apply to that output only, in JupyterLab 4 (or Notebook 7: BELLJAR_FRONTEND)
// in headless Chromium (docs/security.md, "Active output in the browser"). Round three's red team
// hid belljar's own notices and an isolated frame's caption with an inert <style>, relabelled the
// toolbar's kernel as "Python 3 (ipykernel)", and laid a fake "session expired" prompt over the
// notebook. The notebook here shows a notice and a caption, then tries each of those with inert
// markup (a <style>, style attributes with position: fixed and a z-index, a frame stretched over
// the page). After Run All, the notice, the caption and the toolbar's kernel name look as they
// did, and the toolbar, the caption and the first cell are what is under the mouse at their place. The control opens the same
// attack on an `allow` kernel in a second tab of the same page: there it does restyle the first
// tab's notice, caption and toolbar, so the probe works and the test can fail.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';

import {
  BELLJAR, FRONTENDS, ISOLATION, LAB_FRONTENDS, PANEL, SANDBOX_PYTHON, SOURCE, allCellsRan, endSuite,
  installOutputKernels, kernelReady, labMenu, launchChromium, notebookJson, openInLab, startJupyterLab, whenPage,
  withDeadline,
} from './harness.mjs';

const FRONTEND = LAB_FRONTENDS[process.env.BELLJAR_FRONTEND ?? 'lab'];
assert.ok(FRONTEND, `BELLJAR_FRONTEND is lab or notebook, not ${process.env.BELLJAR_FRONTEND}`);
const RUN_ALL_TIMEOUT = 180_000;

// belljar's notices are text outputs; an isolated frame's caption is the div after the frame.
const NOTICE = '.jp-OutputArea-output[data-mime-type="text/plain"]';
const ATTACK_STYLE = `<style>
${NOTICE}, .belljar-isolated > div { display: none !important; }
.jp-Toolbar-kernelName .jp-ToolbarButtonComponent-label { font-size: 0 !important; }
.jp-Toolbar-kernelName .jp-ToolbarButtonComponent-label::after { content: "Python 3 (ipykernel)"; font-size: 13px; }
</style><b>inert</b>`;
const OVERLAY = '<div style="position: fixed; top: 0; left: 0; width: 100vw; height: 100vh; z-index: 2147483647; '
  + 'background: white; font-size: 40px">Your session expired. Sign in again.</div>';

// The notebook: belljar's notice and an isolated frame's caption first, then the attacks.
function cells(framed) {
  const show = (html) => `display({'text/html': ${JSON.stringify(html)}, 'text/plain': 'x'}, raw=True)`;
  return [
    // Markdown with raw HTML is shown as text with a notice; active markup in an isolated frame
    // with its caption.
    `display({'text/markdown': 'x <b>y</b>'}, raw=True)\n${show('<b>x</b><script>1</script>')}`,
    show(ATTACK_STYLE),
    show(OVERLAY),
    show(framed ? '<style>iframe { position: fixed; inset: 0; width: 100vw; height: 100vh; z-index: 2147483647; }</style><b>f</b>'
      : '<style>.belljar-isolated iframe { position: fixed; inset: 0; width: 100vw; height: 100vh; z-index: 2147483647; }</style><b>f</b>'),
  ];
}


// In the page: how belljar's notice, the frame's caption and the toolbar's kernel name of the
// first notebook (`panel`, a selector) look, and what is under the kernel name and the caption.
function looks([panel, noticeSelector]) {
  const root = document.querySelector(panel);
  const notice = root.querySelector(noticeSelector);
  const caption = root.querySelector('.belljar-isolated > div');
  const label = root.querySelector('.jp-Toolbar-kernelName .jp-ToolbarButtonComponent-label');
  const style = (element, pseudo) => (element ? getComputedStyle(element, pseudo) : null);
  // Displayed: by the element's own computed style (also in a hidden tab); visible: on screen.
  const displayed = (element) => !!element && style(element).display !== 'none';
  const visible = (element) => displayed(element) && element.checkVisibility();
  const topAt = (element) => {
    const box = element?.getBoundingClientRect();
    if (!box || !box.width) return null;
    const under = document.elementFromPoint(box.left + box.width / 2, box.top + box.height / 2);
    return under === element || element.contains(under) || under?.contains(element);
  };
  return {
    notice: notice?.textContent ?? null,
    noticeDisplayed: displayed(notice),
    noticeShown: visible(notice),
    caption: caption?.textContent ?? null,
    captionDisplayed: displayed(caption),
    captionShown: visible(caption),
    frameShown: visible(root.querySelector('.belljar-isolated iframe')),
    kernelName: label?.textContent ?? null,
    kernelNameSize: style(label)?.fontSize ?? null,
    kernelNameAfter: style(label, '::after')?.content ?? null,
    kernelNameOnTop: topAt(label),
    captionOnTop: topAt(caption),
    firstCellOnTop: topAt(root.querySelector('.jp-CodeCell .jp-InputArea-editor')),
  };
}

describe(`an output's styles stay in its box, in ${FRONTEND.title} in headless Chromium`, () => {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), `belljar-css-${FRONTEND.app}-`));
  const dirs = Object.fromEntries(['home', 'runtime', 'config', 'data', 'prefix', 'notebooks', 'chromium', 'settings',
    'workspaces'].map((name) => [name, path.join(tmp, name)]));
  const token = crypto.randomBytes(24).toString('hex');
  let server, context, base, page;
  let before_ = {}, after_ = {}, control = {};

  before(async () => {
    try {
      await withDeadline((async () => {
        for (const dir of Object.values(dirs)) fs.mkdirSync(dir, { recursive: true });
        fs.chmodSync(dirs.notebooks, 0o777);
        installOutputKernels(dirs.prefix, SANDBOX_PYTHON, ISOLATION);
        ({ server, base } = await startJupyterLab({ frontend: FRONTEND, frontends: FRONTENDS, dirs, token }));
        context = await launchChromium(dirs.chromium);
        fs.writeFileSync(path.join(dirs.notebooks, 'styles.ipynb'), notebookJson(cells(false), 'belljar'));
        fs.writeFileSync(path.join(dirs.notebooks, 'control.ipynb'), notebookJson(cells(true), 'belljar-allow'));
        page = await context.newPage();
        await openInLab(page, { base, token, frontend: FRONTEND, file: 'styles.ipynb', workspace: 'styles', timeoutMs: 90_000 });
        // The first cell alone: belljar's notice and caption, before any attack.
        await page.click(`${PANEL} .jp-CodeCell .jp-InputArea-editor`);
        await page.keyboard.press('Shift+Enter');
        await whenPage(page, 'the notice and caption', ([panel, notice]) => !!document.querySelector(`${panel} .belljar-isolated > div`)
          && !!document.querySelector(`${panel} ${notice}`), [PANEL, NOTICE], 60_000);
        before_ = await page.evaluate(looks, [PANEL, NOTICE]);
        await labMenu(page, 'Run', 'Run All Cells');
        await whenPage(page, 'Run All', allCellsRan, PANEL, RUN_ALL_TIMEOUT);
        after_ = await page.evaluate(looks, [PANEL, NOTICE]);
        // The control in a second tab of the same page; the first notebook's panel stays in the
        // page, hidden, and keeps its own toolbar.
        const first = `#${await page.$eval(PANEL, (element) => element.id)}`;
        if (FRONTEND.app === 'lab') {
          await page.evaluate(() => window.jupyterapp.commands.execute('docmanager:open', { path: 'control.ipynb' }));
          await whenPage(page, 'control.ipynb\'s kernel ready', kernelReady, 'control.ipynb', 90_000);
          await labMenu(page, 'Run', 'Run All Cells');
          await whenPage(page, 'Run All (control)', allCellsRan, PANEL, RUN_ALL_TIMEOUT);
          control = await page.evaluate(looks, [first, NOTICE]);
          control.overlayOnTop = await page.evaluate((panel) => {
            const editor = document.querySelector(`${panel} .jp-CodeCell .jp-InputArea-editor`);
            const box = editor.getBoundingClientRect();
            return document.elementFromPoint(box.left + box.width / 2, box.top + box.height / 2)?.textContent ?? '';
          }, PANEL);
        }
      })(), 420_000, 'setting up and running both notebooks');
    } catch (error) {
      error.message += `\n--- jupyter ${FRONTEND.app} log (its end) ---\n${(server?.log ?? '').slice(-4000)}`;
      throw error;
    }
  });

  after(async () => {
    process.stdout.write(`before: ${JSON.stringify(before_)}\nafter: ${JSON.stringify(after_)}\n`
      + `control: ${JSON.stringify(control)}\n`);
    await endSuite({ context, server, base, token, tmp });
  });

  it('belljar\'s notice and the isolated frame\'s caption are there before the attack', () => {
    assert.match(before_.notice ?? '', /\[belljar\] not rendered \(active output/);
    assert.match(before_.caption ?? '', /\[belljar\] this output holds active content/);
    assert.ok(before_.noticeShown && before_.captionShown && before_.frameShown, JSON.stringify(before_));
    assert.equal(before_.kernelNameAfter, 'none');
  });

  it('after the styled outputs, they and the toolbar\'s kernel name look as they did, and nothing covers them', () => {
    for (const key of ['notice', 'noticeDisplayed', 'noticeShown', 'caption', 'captionDisplayed', 'captionShown',
      'frameShown', 'kernelName', 'kernelNameSize', 'kernelNameAfter'])
      assert.deepEqual(after_[key], before_[key], `${key}: ${JSON.stringify(after_)}`);
    assert.equal(after_.kernelNameOnTop, true, 'the toolbar\'s kernel name is what is under the mouse there');
    assert.equal(after_.captionOnTop, true, 'the caption is what is under the mouse there');
    assert.equal(after_.firstCellOnTop, true, 'the first cell is what is under the mouse there');
  });

  it('control: the same outputs unchanged (allow) restyle the other tab and cover the page', { skip: FRONTEND.app !== 'lab' }, () => {
    assert.equal(control.noticeDisplayed, false, 'the notice is hidden');
    assert.equal(control.captionDisplayed, false, 'the caption is hidden');
    assert.equal(control.kernelNameSize, '0px');
    assert.equal(control.kernelNameAfter, '"Python 3 (ipykernel)"');
    assert.match(control.overlayOnTop, /session expired/, 'the fake prompt is over the first cell');
  });
});
