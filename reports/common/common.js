/* common.js: helpers shared by the standalone reports (the run-profile report,
   reports/run_profile/report.js, and the placement viewer,
   reports/placement/viewer.js).  Each writer (harness/ipu_e2e/report.py,
   placement_report.py) inlines this file before the report's own script; it
   defines one global, window.ipuReport:
     clamp(v, lo, hi)          v limited to [lo, hi];
     fail(prefix, message)     shows message in the page's #error box and logs
                               "prefix: message" as a console error;
     fitCanvas(canvas, font)   sizes the canvas's backing store to its CSS box
                               (device pixel ratio), clears it and returns
                               { ctx, w, h } with ctx in CSS pixels and font set;
     localPoint(canvas, event) the event's position in the canvas's CSS pixels;
     showTip(box, kind, nodes, event)
                               fills the tooltip element box with nodes, marks
                               it data-kind=kind and shows it beside the
                               pointer, inside the window;
     bytes(n)                  one number format for byte counts everywhere:
                               "586,960 B (573.2 KiB)";
     count(n)                  and for cycles and other counts: "10,018,721"
                               (an em dash when n is not a number);
     ms(v)                     milliseconds to the microsecond: "6,679.147 ms";
     tick(n)                   a byte count on a chart's axis: "512 KiB", "1.5 MiB";
     shapeText(shape)          a shape as the compiler writes it ("11x256 f143")
                               with its element type as users know it
                               ("11x256 fp8e4m3"; f152: fp8e5m2, f16: fp16,
                               f32: fp32);
     placeText(phase, iteration)
                               the one label of a program position on every
                               time axis: "phase 2055 · it 3" (no iteration
                               outside a Repeat);
     axisTicks(at, lo, hi, n)  which positions of [lo, hi) a time axis labels
                               (at(i) gives position i's {phase, iteration}, in
                               execution order): the first position of each
                               Repeat iteration when the range spans several
                               (thinned to at most n), else n evenly spaced;
                               every time chart ticks by this rule, so two
                               charts showing one position label it alike;
     dragZoom(node, toIndex, zoom, click)
                               drag across node to zoom: toIndex(event) maps
                               the pointer to a position, zoom(lo, hi) gets
                               the range dragged over (hi exclusive), and a
                               press without a drag is click(index, event);
     element(tag, attrs, parent, text)
                               a new element with these attributes (and
                               text), appended to parent when given;
     svgElement(tag, attrs, parent)
                               the same for an SVG element;
     dataTable(node, head, rows)
                               fills a table: head is [[name, cell class]],
                               rows are arrays of cell texts;
     tileTicks(ctx, tiles, x, height)
                               labels a heatmap's tiles (rows) at its left,
                               right-aligned at x, a round count apart;
     place()                   the place in the URL hash (#tile=17&phase=243&
                               iteration=3&address=642664): an object of
                               integers;
     hashOf(place)             a place as the URL hash's text, without '#';
     onPlaceChange(fn)         calls fn(place()) when the hash is changed from
                               outside the page (edited, or a link to it);
     setPlace(place)           writes it to the hash (no history entry),
                               points every report link at it and tells the
                               page (an "ipu-place" event on document);
     embeddedJSON(id)          (a promise of) the JSON in the script element
                               id: as text, or gzip-compressed in base64 when
                               the element says data-encoding="gzip-base64"
                               (decoded with the browser's DecompressionStream);
     links(current)            fills <nav id="report-nav"> with links to the
                               other reports of the run, as the writer put them
                               in <script id="report-links"> (relative paths
                               by kind: index, placement, memory, run_profile);
                               each link carries the place.
   Every report numbers program steps by the package's phase (init and main
   control ops counted together, op g having phase 2g, its compute or host
   half, and 2g + 1, its exchange half), so a place means one thing in all. */
(function () {
  "use strict";

  const clamp = (v, lo, hi) => Math.min(hi, Math.max(lo, v));

  function fail(prefix, message) {
    const box = document.getElementById("error");
    box.textContent = message;
    box.hidden = false;
    console.error(prefix + ": " + message);
  }

  function fitCanvas(canvas, font) {
    const ratio = window.devicePixelRatio || 1;
    const w = canvas.clientWidth, hgt = canvas.clientHeight;
    const bw = Math.max(1, Math.round(w * ratio)), bh = Math.max(1, Math.round(hgt * ratio));
    if (canvas.width !== bw) canvas.width = bw;
    if (canvas.height !== bh) canvas.height = bh;
    const ctx = canvas.getContext("2d");
    ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
    ctx.clearRect(0, 0, w, hgt);
    ctx.font = font;
    return { ctx, w, h: hgt };
  }

  function localPoint(canvas, event) {
    const rect = canvas.getBoundingClientRect();
    return { x: event.clientX - rect.left, y: event.clientY - rect.top };
  }

  function showTip(box, kind, nodes, event) {
    box.replaceChildren(...nodes);
    box.dataset.kind = kind;
    box.hidden = false;
    box.style.left = Math.max(4, Math.min(event.clientX + 14, window.innerWidth - box.offsetWidth - 6)) + "px";
    box.style.top = Math.max(4, Math.min(event.clientY + 14, window.innerHeight - box.offsetHeight - 6)) + "px";
  }

  function bytes(n) {
    const text = Number(n).toLocaleString("en-US") + " B";
    if (n >= 1 << 20) return text + " (" + (n / (1 << 20)).toFixed(1) + " MiB)";
    if (n >= 1024) return text + " (" + (n / 1024).toFixed(1) + " KiB)";
    return text;
  }

  const isNumber = (v) => typeof v === "number" && Number.isFinite(v);
  const count = (n) => (isNumber(n) ? n.toLocaleString("en-US", { maximumFractionDigits: 0 }) : "\u2014");
  const ms = (v) => (isNumber(v) ? v.toLocaleString("en-US", { minimumFractionDigits: 3, maximumFractionDigits: 3 }) +
    " ms" : "\u2014");

  const tick = (n) => (n >= 1 << 20 ? (n / (1 << 20)).toFixed(1) + " MiB" : n >= 1024 ? Math.round(n / 1024) + " KiB"
    : n + " B");

  const ELEMENT_TYPES = { f143: "fp8e4m3", f152: "fp8e5m2", f16: "fp16", f32: "fp32" };
  const shapeText = (shape) => String(shape).replace(/\b(f143|f152|f16|f32)\b/g, (t) => ELEMENT_TYPES[t]);

  function placeText(phase, iteration) {
    return "phase " + phase + (Number.isInteger(iteration) ? " \u00b7 it " + iteration : "");
  }

  function axisTicks(at, lo, hi, n) {
    const starts = [];
    for (let i = lo; i < hi; i++) {
      const it = at(i).iteration;
      if (Number.isInteger(it) && (i === 0 || at(i - 1).iteration !== it)) starts.push(i);
    }
    if (starts.length >= 2) {
      const every = Math.ceil(starts.length / Math.max(1, n));
      return starts.filter((_, k) => k % every === 0);
    }
    const out = [], step = Math.max(1, Math.ceil((hi - lo) / Math.max(1, n)));
    for (let i = lo; i < hi; i += step) out.push(i);
    return out;
  }

  function element(tag, attrs, parent, text) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
    if (text !== undefined) node.textContent = text;
    if (parent) parent.append(node);
    return node;
  }

  function svgElement(tag, attrs, parent) {
    const node = document.createElementNS("http://www.w3.org/2000/svg", tag);
    for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
    if (parent) parent.append(node);
    return node;
  }

  function dataTable(node, head, rows) {
    node.textContent = "";
    const tr = element("tr", {}, element("thead", {}, node));
    for (const [name] of head) element("th", {}, tr, name);
    const body = element("tbody", {}, node);
    for (const row of rows) {
      const line = element("tr", {}, body);
      row.forEach((v, i) => element("td", { class: head[i][1] || "" }, line, v));
    }
  }

  /* At least TILE_TICK_PIXELS apart: 1, 2, 4 ... tiles. */
  const TILE_TICK_PIXELS = 26;

  function tileTicks(ctx, tiles, x, height) {
    ctx.font = "10px system-ui, sans-serif";
    ctx.fillStyle = "#5d6773";
    ctx.textAlign = "right";
    ctx.textBaseline = "middle";
    let every = 1;
    while ((every * height) / tiles < TILE_TICK_PIXELS && every < tiles) every *= 2;
    for (let t = 0; t < tiles; t += every) ctx.fillText(String(t), x, ((t + 0.5) * height) / tiles);
  }

  const DRAG_PIXELS = 4;

  function dragZoom(node, toIndex, zoom, click) {
    let from = null;
    node.addEventListener("pointerdown", (event) => {
      if (event.button !== 0) return;
      from = { x: event.clientX, index: toIndex(event) };
      node.setPointerCapture(event.pointerId);
    });
    node.addEventListener("pointerup", (event) => {
      if (!from) return;
      const start = from;
      from = null;
      if (Math.abs(event.clientX - start.x) < DRAG_PIXELS) { click(start.index, event); return; }
      const end = toIndex(event);
      zoom(Math.min(start.index, end), Math.max(start.index, end) + 1);
    });
    node.addEventListener("pointercancel", () => { from = null; });
  }

  const PLACE_KEYS = ["tile", "phase", "iteration", "address"];

  function place() {
    const found = {};
    for (const part of window.location.hash.replace(/^#/, "").split("&")) {
      const [key, value] = part.split("=");
      if (PLACE_KEYS.includes(key) && /^\d+$/.test(value || "")) found[key] = parseInt(value, 10);
    }
    return found;
  }

  function hashOf(where) {
    return PLACE_KEYS.filter((k) => Number.isInteger(where[k])).map((k) => k + "=" + where[k]).join("&");
  }

  const LINK_LABELS = { index: "Run index", placement: "Placement", memory: "Memory profile",
    run_profile: "Run profile" };
  let linkNodes = [];

  function links(current) {
    const nav = document.getElementById("report-nav"), data = document.getElementById("report-links");
    if (!nav || !data) return;
    const targets = JSON.parse(data.textContent || "{}");
    linkNodes = [];
    nav.replaceChildren();
    for (const kind of Object.keys(LINK_LABELS)) {
      if (kind === current || typeof targets[kind] !== "string") continue;
      const a = document.createElement("a");
      a.textContent = LINK_LABELS[kind];
      a.dataset.report = kind;
      a.dataset.base = targets[kind];
      a.href = targets[kind];
      nav.append(a);
      if (kind !== "index") linkNodes.push(a);
    }
  }

  function setPlace(where) {
    const hash = hashOf(where);
    window.history.replaceState(null, "", hash ? "#" + hash : window.location.pathname + window.location.search);
    for (const a of linkNodes) a.href = a.dataset.base + (hash ? "#" + hash : "");
    document.dispatchEvent(new CustomEvent("ipu-place", { detail: where }));
  }

  async function embeddedJSON(id) {
    const node = document.getElementById(id);
    if (!node) return null;
    if (node.dataset.encoding !== "gzip-base64") return JSON.parse(node.textContent);
    const binary = atob(node.textContent.trim());
    const bytes = new Uint8Array(binary.length);
    for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
    const text = await new Response(new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"))).text();
    return JSON.parse(text);
  }

  function onPlaceChange(fn) {
    window.addEventListener("hashchange", () => fn(place()));
  }

  window.ipuReport = Object.freeze({ clamp, fail, fitCanvas, localPoint, showTip, bytes, count, ms, tick, shapeText, placeText,
    axisTicks, dragZoom, element, svgElement, dataTable, tileTicks, place,
    hashOf, embeddedJSON, onPlaceChange, setPlace, links });
})();
