/* viewer.js: the behaviour of the placement viewer.  It reads the compiler's
   placement report (JSON version 1, embedded gzip-compressed in base64 as
   <script id="placement-data">, its listing and footprint after the script;
   engine/src/report/placement.c writes it, and the page decodes each part
   with common.js's embeddedJSON) and shows one tile at a time:
   the address map (byte addresses across accessible SRAM, element boundaries,
   region 1 and the host aperture shaded; first occupants on the main row,
   later allocations at overlapping addresses on reuse rows below; package
   support in purple), the lifetime view (address across, program step down)
   beside the tile's program listing, and the tile's estimate beside its
   placed footprint per step with the report's largest gaps.  Allocations are
   indexed per tile once, into typed arrays; each canvas draws only what is in
   its viewport, and no allocation ever gets a DOM node, so reports of more
   than 600,000 allocations stay responsive.  Controls: zoom buttons,
   Shift-wheel zoom around the pointer, drag-to-zoom on the map or the ruler,
   right-click to undo a zoom, Escape to cancel a drag or unpin, tile and
   address navigation, row heights, reuse rows, highlight, hover, pin, reset.
   The page opens on the tile and step of the largest estimate, or on the
   place in the URL hash (#tile=T&phase=P: the package phase, which every
   report of the run shares; &address=A pins the allocation holding that
   byte then, or the one nearest in time), and keeps the selected tile and step's phase
   there, carried by the links to the run's other reports.
   window.placementViewer exposes positions and state for tests.  fail,
   fitCanvas, localPoint and clamp come from reports/common/common.js
   (window.ipuReport), inlined before this script. */
(async function () {
  "use strict";

  const $ = (id) => document.getElementById(id);
  const { clamp, localPoint, bytes, count, tick } = window.ipuReport;
  const FONT = "11px system-ui, -apple-system, 'Segoe UI', Roboto, 'DejaVu Sans', sans-serif";
  const LEFT = 76, RIGHT = 12;         /* map and ruler plot margins (CSS px) */
  const LIFE_LEFT = 190, LIFE_RULER = 24;
  const MAP_MAX = 440, MIN_SPAN = 16;
  const KIND_NAMES_DEFAULT = ["parameter", "activation", "host staging", "input/output"];
  /* Timings (ms since navigation start, or durations): the benchmark reads them. */
  const stats = { scriptStartMs: performance.now(), parseMs: 0, indexMs: 0, firstPaintMs: null,
    hoverMs: null, hoverMaxMs: 0, hoverCount: 0, draws: 0 };

  /* ---------- helpers ---------- */

  function h(tag, props, children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(props || {})) {
      if (key === "text") node.textContent = value;
      else if (key === "className") node.className = value;
      else if (key === "style") node.style.cssText = value;
      else if (key === "dataset") Object.assign(node.dataset, value);
      else if (key === "onclick") node.addEventListener("click", value);
      else node.setAttribute(key, value);
    }
    for (const child of children || []) if (child != null) node.append(child);
    return node;
  }
  const hex = (n) => "0x" + Math.round(n).toString(16).toUpperCase();
  const isInt = (v) => typeof v === "number" && Number.isInteger(v);

  const fail = (message) => window.ipuReport.fail("placement viewer", message);
  const fitCanvas = (canvas) => window.ipuReport.fitCanvas(canvas, FONT);

  /* A tick step for hex addresses: 1, 2 or 4 times a power of two, at least `min` bytes. */
  function tickStep(min) {
    let step = 1;
    while (step < min) step *= 2;
    return step;
  }

  /* ---------- the data ---------- */

  let R;
  const parseStart = performance.now();
  try {
    R = await window.ipuReport.embeddedJSON("placement-data");
  } catch (error) {
    fail("The embedded placement report cannot be read: " + error.message);
    return;
  }
  stats.parseMs = performance.now() - parseStart;
  if (!R || R.version !== 1 || !R.allocations || !R.device || !R.steps || !isInt(R.tiles)) {
    fail("This is not a version 1 placement report.");
    return;
  }
  const indexStart = performance.now();
  const mark = (what) => { stats[what] = performance.now() - indexStart; };
  const D = R.device, SUP = R.support || {}, A = R.allocations;
  const NT = R.tiles, N = A.tile.length, NS = R.steps.label.length;
  const names = Array.isArray(R.names) ? R.names : [];
  const kindNames = Array.isArray(A.kinds) ? A.kinds : KIND_NAMES_DEFAULT;
  const aTile = new Int32Array(A.tile), aAddr = new Float64Array(A.address), aSize = new Float64Array(A.size);
  const aFirst = new Int32Array(A.first), aLast = new Int32Array(A.last), aName = new Int32Array(A.name);
  const aKind = new Uint8Array(A.kind), aAlias = A.alias ? new Int32Array(A.alias) : new Int32Array(N).fill(-1);
  const aMembers = A.members ? new Uint32Array(A.members) : new Uint32Array(N).fill(1);
  const FULL_LO = D.sram_base, FULL_HI = D.access_end, ELEMENT = D.element_bytes || 16384;
  mark("columnsMs");
  const physical = (t) => t; /* the report's tile ids are physical ids too: the device maps them 1:1 */

  /* Allocations by tile (a counting sort), and the listing's lines by tile. */
  function groupBy(keys, count) {
    const start = new Int32Array(count + 1);
    for (let i = 0; i < keys.length; i++) start[keys[i] + 1]++;
    for (let t = 0; t < count; t++) start[t + 1] += start[t];
    const fill = start.slice(0, count), order = new Int32Array(keys.length);
    for (let i = 0; i < keys.length; i++) order[fill[keys[i]]++] = i;
    return { start, order };
  }
  const byTile = groupBy(aTile, NT);
  mark("groupMs");
  /* The listing and the footprint are the bulk of a large report: the page embeds them after its
     script, and they are read once the document is parsed (later()), after the first paint. */
  let L, lineTile, lineStep, linesByTile;
  function indexListing(listing) {
    L = listing || { step: [], tile: [], text: [], buffers: [] };
    lineTile = new Int32Array(L.tile);
    lineStep = new Int32Array(L.step);
    linesByTile = groupBy(lineTile, NT);
  }
  indexListing(R.listing);
  const stepKind = R.steps.kind, stepInit = R.steps.init || [];
  const repeat = R.repeat || { first: 0, count: 0, iterations: 1 };
  let footprint = R.footprint || { estimate: [], placed: [] };
  const gaps = Array.isArray(R.gaps) ? R.gaps : [];
  const rowScratch = new Int32Array(N);
  stats.indexMs = performance.now() - indexStart;

  const css = getComputedStyle(document.documentElement);
  const colour = (name, fallback) => css.getPropertyValue("--" + name).trim() || fallback;
  const KIND_COLOUR = [
    [colour("k-parameter", "#3f9b52"), colour("k-parameter-2", "#5cb56c")],
    [colour("k-activation", "#d2473d"), colour("k-activation-2", "#e36a5f")],
    [colour("k-staging", "#c99412"), colour("k-staging-2", "#ddb032")],
    [colour("k-io", "#e3bd3f"), colour("k-io-2", "#eccd63")],
  ];
  const C = {
    support: colour("support", "#8455bd"), supportLight: colour("support-light", "rgba(132,85,189,.16)"),
    region1: colour("region1", "rgba(64,120,200,.07)"), aperture: colour("aperture", "rgba(214,166,25,.16)"),
    ink: colour("ink", "#1d232b"), muted: colour("muted", "#5d6773"), line: colour("line", "#d9dee5"),
    grid: colour("grid", "#eceff3"), element: colour("element", "rgba(29,35,43,.2)"),
    accent: colour("accent", "#1f5fbf"), pin: colour("pin", "#111820"), select: colour("select", "rgba(31,95,191,.18)"),
    step: colour("step", "rgba(31,95,191,.09)"),
  };

  /* ---------- state ---------- */

  const V = { lo: FULL_LO, hi: FULL_HI };
  const rulerCanvas = $("ruler-canvas"), mapCanvas = $("map-canvas");
  const undo = [];
  const S = { tile: 0, rowH: 16, reuse: true, pinned: -1, hovered: -1, step: -1, marker: -1,
    highlight: "", match: null, drag: null, lastWheelPush: 0 };
  let TL = null; /* the selected tile's layout */

  function supportRanges(t) {
    const out = [
      { what: "runtime state", lo: D.sram_base, hi: D.runtime_state_end },
      { what: "code", lo: SUP.code_base, hi: SUP.code_end ? SUP.code_end[t] : SUP.code_base },
      { what: "descriptors", lo: SUP.descriptor_base, hi: SUP.descriptor_end ? SUP.descriptor_end[t] : SUP.descriptor_base,
        tables: SUP.exchange_table_bytes ? SUP.exchange_table_bytes[t] : undefined },
    ];
    return out.filter((r) => isInt(r.lo) && isInt(r.hi) && r.hi > r.lo);
  }

  /* Rows: allocations in order of first step (then address) go to the first
     row where they overlap no address already there: row 0 holds each
     address's first occupant, rows below its later ones. */
  function layoutTile(t) {
    const from = byTile.start[t], to = byTile.start[t + 1];
    const ids = Array.from(byTile.order.subarray(from, to));
    ids.sort((a, b) => aFirst[a] - aFirst[b] || aAddr[a] - aAddr[b] || a - b);
    const rows = []; /* each: sorted arrays of starts and ids */
    for (const id of ids) {
      const s = aAddr[id], e = s + Math.max(1, aSize[id]);
      let placed = false;
      for (let r = 0; r < rows.length && !placed; r++) {
        const row = rows[r];
        let lo = 0, hi = row.starts.length; /* first start >= e */
        while (lo < hi) { const m = (lo + hi) >> 1; if (row.starts[m] < e) lo = m + 1; else hi = m; }
        if (lo > 0 && row.ends[lo - 1] > s) continue;
        row.starts.splice(lo, 0, s); row.ends.splice(lo, 0, e); row.ids.splice(lo, 0, id);
        rowScratch[id] = r;
        placed = true;
      }
      if (!placed) {
        rows.push({ starts: [s], ends: [e], ids: [id] });
        rowScratch[id] = rows.length - 1;
      }
    }
    /* Steps: each takes as many lines as the tile's listing has for it. */
    const lines = linesByTile.order.subarray(linesByTile.start[t], linesByTile.start[t + 1]);
    const perStep = new Int32Array(NS);
    for (const k of lines) if (lineStep[k] >= 0 && lineStep[k] < NS) perStep[lineStep[k]]++;
    return {
      t, ids: Int32Array.from(ids), rows: rows.map((r) => ({ starts: Float64Array.from(r.starts),
        ends: Float64Array.from(r.ends), ids: Int32Array.from(r.ids) })),
      lines, perStep, support: supportRanges(t), stepTop: null,
    };
  }

  function stepLayout() {
    const top = new Float64Array(NS + 1);
    for (let s = 0; s < NS; s++) top[s + 1] = top[s] + S.rowH * Math.max(1, TL.perStep[s]);
    TL.stepTop = top;
  }

  const shownRows = () => (S.reuse ? TL.rows.length : Math.min(1, TL.rows.length));
  const rowOf = (id) => (aTile[id] === S.tile ? rowScratch[id] : -1);

  /* ---------- address axis ---------- */

  /* The ruler shares the map's axis (the map may lose width to a scroll bar). */
  function plotW(canvas, left) {
    return Math.max(1, (canvas === rulerCanvas ? mapCanvas : canvas).clientWidth - left - RIGHT);
  }
  function xOf(canvas, left, addr) { return left + ((addr - V.lo) * plotW(canvas, left)) / (V.hi - V.lo); }
  function addrOf(canvas, left, x) { return V.lo + ((x - left) * (V.hi - V.lo)) / plotW(canvas, left); }

  function setView(lo, hi, remember) {
    if (remember) undo.push({ lo: V.lo, hi: V.hi });
    let span = clamp(hi - lo, MIN_SPAN, FULL_HI - FULL_LO);
    if (hi - lo < MIN_SPAN) lo = (lo + hi) / 2 - span / 2;
    lo = clamp(lo, FULL_LO, FULL_HI - span);
    V.lo = lo; V.hi = lo + span;
    requestDraw();
  }
  function zoomAround(addr, frac, factor, remember) {
    const span = clamp((V.hi - V.lo) * factor, MIN_SPAN, FULL_HI - FULL_LO);
    setView(addr - frac * span, addr - frac * span + span, remember);
  }
  function undoZoom() {
    const last = undo.pop();
    if (last) { V.lo = last.lo; V.hi = last.hi; requestDraw(); }
  }

  /* ---------- drawing: shared pieces ---------- */

  function shadeRegions(ctx, canvas, left, y, height) {
    const W = plotW(canvas, left);
    const band = (lo, hi, fill) => {
      const x0 = Math.max(left, xOf(canvas, left, lo)), x1 = Math.min(left + W, xOf(canvas, left, hi));
      if (x1 > x0) { ctx.fillStyle = fill; ctx.fillRect(x0, y, x1 - x0, height); }
    };
    band(D.region1_base, FULL_HI, C.region1);
    band(D.aperture_base, D.aperture_end, C.aperture);
  }

  function elementLines(ctx, canvas, left, y, height) {
    const px = (ELEMENT * plotW(canvas, left)) / (V.hi - V.lo);
    if (px < 4) return;
    ctx.strokeStyle = C.element;
    ctx.beginPath();
    for (let a = Math.ceil(V.lo / ELEMENT) * ELEMENT; a <= V.hi; a += ELEMENT) {
      const x = Math.round(xOf(canvas, left, a)) + 0.5;
      ctx.moveTo(x, y); ctx.lineTo(x, y + height);
    }
    ctx.stroke();
  }

  function dimmed(id) {
    if (S.match && !S.match[aName[id]] && !(aAlias[id] >= 0 && S.match[aAlias[id]])) return true;
    return S.step >= 0 && (aFirst[id] > S.step || aLast[id] < S.step);
  }

  /* One allocation's bar; members drawn individually, the name when it fits. */
  function drawBar(ctx, canvas, left, id, y, height, shade) {
    const W = plotW(canvas, left);
    const xa = xOf(canvas, left, aAddr[id]), xb = xOf(canvas, left, aAddr[id] + aSize[id]);
    const x0 = Math.max(left, xa), x1 = Math.min(left + W, xb);
    if (x1 < left || x0 > left + W) return;
    const w = Math.max(1, x1 - x0);
    ctx.globalAlpha = dimmed(id) ? 0.22 : 1;
    ctx.fillStyle = KIND_COLOUR[aKind[id] & 3][shade & 1];
    ctx.fillRect(x0, y, w, height);
    const m = aMembers[id];
    if (m > 1 && (xb - xa) / m >= 3) {
      ctx.strokeStyle = "rgba(255,255,255,.85)";
      ctx.beginPath();
      for (let k = 1; k < m; k++) {
        const x = Math.round(xa + ((xb - xa) * k) / m) + 0.5;
        if (x > x0 && x < x1) { ctx.moveTo(x, y); ctx.lineTo(x, y + height); }
      }
      ctx.stroke();
    }
    if (w > 46 && height >= 11) {
      ctx.save();
      ctx.beginPath(); ctx.rect(x0 + 3, y, w - 6, height); ctx.clip();
      ctx.fillStyle = aKind[id] >= 2 ? "#3a2c00" : "#fff";
      ctx.textBaseline = "middle";
      ctx.fillText(names[aName[id]] + (m > 1 ? " \u00d7" + m : ""), x0 + 4, y + height / 2 + 0.5);
      ctx.restore();
    }
    ctx.globalAlpha = 1;
  }

  function outline(ctx, canvas, left, id, y, height, colourName, width) {
    const W = plotW(canvas, left);
    const x0 = Math.max(left - 1, xOf(canvas, left, aAddr[id])), x1 = Math.min(left + W + 1, xOf(canvas, left, aAddr[id] + aSize[id]));
    if (x1 < left - 1 || x0 > left + W + 1) return;
    ctx.strokeStyle = colourName;
    ctx.lineWidth = width;
    ctx.strokeRect(x0 - width / 2, y + width / 2, Math.max(1, x1 - x0) + width, height - width);
    ctx.lineWidth = 1;
  }

  function dragBand(ctx, which, height) {
    if (!S.drag || S.drag.cancelled) return;
    const canvas = which === "life" ? lifeCanvas : mapCanvas, left = which === "life" ? LIFE_LEFT : LEFT;
    const a = Math.min(S.drag.a0, S.drag.a1), b = Math.max(S.drag.a0, S.drag.a1);
    const x0 = Math.max(left, xOf(canvas, left, a)), x1 = Math.min(canvas.clientWidth - RIGHT, xOf(canvas, left, b));
    ctx.fillStyle = C.select;
    ctx.fillRect(x0, 0, Math.max(1, x1 - x0), height);
    ctx.strokeStyle = C.accent;
    ctx.strokeRect(Math.round(x0) + 0.5, 0.5, Math.max(1, Math.round(x1 - x0)), height - 1);
  }

  function markerLine(ctx, canvas, left, y, height) {
    if (S.marker < 0 || S.marker < V.lo || S.marker > V.hi) return;
    const x = Math.round(xOf(canvas, left, S.marker)) + 0.5;
    ctx.save();
    ctx.setLineDash([4, 3]);
    ctx.strokeStyle = C.accent;
    ctx.beginPath(); ctx.moveTo(x, y); ctx.lineTo(x, y + height); ctx.stroke();
    ctx.restore();
  }

  /* ---------- the ruler ---------- */

  function drawRuler() {
    const { ctx, h: height } = fitCanvas(rulerCanvas);
    const W = plotW(rulerCanvas, LEFT);
    shadeRegions(ctx, rulerCanvas, LEFT, 0, height);
    /* region names along the top */
    const label = (lo, hi, text) => {
      const x0 = Math.max(LEFT, xOf(rulerCanvas, LEFT, lo)), x1 = Math.min(LEFT + W, xOf(rulerCanvas, LEFT, hi));
      if (x1 - x0 < ctx.measureText(text).width + 8) return;
      ctx.fillStyle = C.muted; ctx.textAlign = "center"; ctx.textBaseline = "top";
      ctx.fillText(text, (x0 + x1) / 2, 2);
    };
    label(FULL_LO, D.aperture_base, "region 0");
    label(D.aperture_base, D.aperture_end, "aperture");
    label(D.aperture_end, Math.min(D.region1_base, FULL_HI), "region 0");
    label(D.region1_base, FULL_HI, "region 1");
    ctx.strokeStyle = C.line;
    ctx.beginPath(); ctx.moveTo(LEFT, height - 0.5); ctx.lineTo(LEFT + W, height - 0.5); ctx.stroke();
    elementLines(ctx, rulerCanvas, LEFT, height - 10, 10);
    const step = tickStep(((V.hi - V.lo) * 90) / W);
    ctx.fillStyle = C.ink; ctx.textAlign = "center"; ctx.textBaseline = "alphabetic";
    ctx.strokeStyle = C.muted;
    ctx.beginPath();
    for (let a = Math.ceil(V.lo / step) * step; a <= V.hi; a += step) {
      const x = Math.round(xOf(rulerCanvas, LEFT, a)) + 0.5;
      ctx.moveTo(x, height - 6); ctx.lineTo(x, height);
      ctx.fillText(hex(a), clamp(x, LEFT + 24, LEFT + W - 24), height - 9);
    }
    ctx.stroke();
    ctx.fillStyle = C.muted; ctx.textAlign = "right"; ctx.textBaseline = "middle";
    ctx.fillText("address", LEFT - 8, height / 2);
    markerLine(ctx, rulerCanvas, LEFT, 0, height);
    if (S.drag) dragBand(ctx, "map", height); /* the ruler shares the map's axis */
  }

  /* ---------- the map ---------- */

  const mapScroller = $("map-scroller"), mapSpacer = $("map-spacer");

  function sizeMap() {
    const content = shownRows() * S.rowH;
    const height = Math.max(S.rowH, Math.min(content, MAP_MAX));
    mapCanvas.style.height = height + "px";
    mapSpacer.style.height = Math.max(0, content - height) + "px";
  }

  function drawMap() {
    const { ctx, h: height } = fitCanvas(mapCanvas);
    const W = plotW(mapCanvas, LEFT), rh = S.rowH, scroll = mapScroller.scrollTop;
    const rows = shownRows();
    const firstRow = Math.floor(scroll / rh), lastRow = Math.min(rows - 1, Math.floor((scroll + height) / rh));
    shadeRegions(ctx, mapCanvas, LEFT, 0, height);
    ctx.textBaseline = "middle";
    for (let r = firstRow; r <= lastRow; r++) {
      const y = r * rh - scroll;
      ctx.fillStyle = C.muted; ctx.textAlign = "right";
      ctx.fillText(r === 0 ? "main" : "reuse " + r, LEFT - 8, y + rh / 2);
      if (r > 0) { ctx.fillStyle = C.grid; ctx.fillRect(LEFT, Math.round(y), W, 1); }
      /* package support: reserved on the main row, tinted below */
      for (const sp of TL.support) {
        const x0 = Math.max(LEFT, xOf(mapCanvas, LEFT, sp.lo)), x1 = Math.min(LEFT + W, xOf(mapCanvas, LEFT, sp.hi));
        if (sp.hi <= V.lo || sp.lo >= V.hi) continue;
        ctx.fillStyle = r === 0 ? C.support : C.supportLight;
        ctx.globalAlpha = S.match ? 0.35 : 1;
        ctx.fillRect(x0, y + 1, Math.max(1, x1 - x0), rh - 2);
        ctx.globalAlpha = 1;
        if (r === 0 && x1 - x0 > 70 && rh >= 11) {
          ctx.fillStyle = "#fff"; ctx.textAlign = "left";
          ctx.fillText(sp.what, x0 + 4, y + rh / 2 + 0.5);
        }
      }
      const row = TL.rows[r];
      if (!row) continue;
      let k = firstEnding(row, V.lo);
      for (; k < row.ids.length && row.starts[k] < V.hi; k++) drawBar(ctx, mapCanvas, LEFT, row.ids[k], y + 1, rh - 2, k);
    }
    elementLines(ctx, mapCanvas, LEFT, 0, height);
    markerLine(ctx, mapCanvas, LEFT, 0, height);
    mapCanvas.dataset.empty = String(TL.ids.length === 0);
    if (TL.ids.length === 0) {
      ctx.fillStyle = C.muted; ctx.textAlign = "center";
      ctx.fillText("No allocations on this tile: the program leaves it unused (package support only).", LEFT + W / 2, rh / 2 + 0.5);
    }
    for (const [id, col, width] of [[S.hovered, C.ink, 1.5], [S.pinned, C.pin, 2.5]]) {
      if (id < 0 || aTile[id] !== S.tile) continue;
      const r = rowOf(id);
      if (r < rows && r >= firstRow && r <= lastRow) outline(ctx, mapCanvas, LEFT, id, r * rh - scroll, rh, col, width);
    }
    if (S.drag) dragBand(ctx, "map", height);
    mapCanvas.dataset.rows = String(rows);
    mapCanvas.dataset.lo = String(Math.round(V.lo));
    mapCanvas.dataset.hi = String(Math.round(V.hi));
  }

  /* First index in a row whose allocation ends after addr (rows are disjoint and sorted). */
  function firstEnding(row, addr) {
    let lo = 0, hi = row.ids.length;
    while (lo < hi) { const m = (lo + hi) >> 1; if (row.ends[m] <= addr) lo = m + 1; else hi = m; }
    return lo;
  }

  /* The allocation (or support range) under a map point, with a few pixels' tolerance for thin ones. */
  function mapHit(x, y) {
    const W = plotW(mapCanvas, LEFT);
    if (x < LEFT || x > LEFT + W) return null;
    const r = Math.floor((y + mapScroller.scrollTop) / S.rowH);
    if (r < 0 || r >= shownRows()) return null;
    const row = TL.rows[r], addr = addrOf(mapCanvas, LEFT, x), tol = (3 * (V.hi - V.lo)) / W;
    let best = -1, bestDist = Infinity;
    if (row) {
      const k = firstEnding(row, addr - tol);
      for (let j = k; j < row.ids.length && row.starts[j] <= addr + tol; j++) {
        const d = addr < row.starts[j] ? row.starts[j] - addr : addr >= row.ends[j] ? addr - row.ends[j] + 1e-9 : 0;
        if (d < bestDist) { bestDist = d; best = row.ids[j]; }
      }
    }
    if (best >= 0) return { id: best, addr };
    if (r === 0) for (const sp of TL.support) if (addr >= sp.lo && addr < sp.hi) return { support: sp, addr };
    return null;
  }

  /* ---------- the lifetime view and the listing ---------- */

  const lifeCanvas = $("life-canvas"), lifeScroller = $("life-scroller"), lifeSpacer = $("life-spacer");
  const listing = $("listing");
  let lineNodes = [];

  function sizeLife() {
    stepLayout();
    const content = LIFE_RULER + TL.stepTop[NS] + 4;
    const height = lifeScroller.clientHeight;
    lifeCanvas.style.height = height + "px";
    lifeSpacer.style.height = Math.max(0, content - height) + "px";
    listing.style.height = content + "px";
    for (const node of lineNodes) {
      const k = Number(node.dataset.line), s = lineStep[k];
      node.style.top = LIFE_RULER + TL.stepTop[s] + Number(node.dataset.nth) * S.rowH + "px";
      node.style.height = S.rowH + "px";
      node.style.fontSize = S.rowH <= 12 ? "10px" : "11px";
    }
  }

  function buildListing() {
    const head = h("div", { className: "listing-head", style: "height:" + LIFE_RULER + "px" },
      ["Program of tile " + TL.t + ": " + TL.lines.length + " lines"]);
    const nodes = [], nth = new Int32Array(NS);
    /* Operands name their allocations: "@12+64" reads "w1[0,3]+64". */
    const named = (text) => text.replace(/@(\d+)\+(\d+)/g, (whole, id, offset) =>
      Number(id) < N ? names[aName[Number(id)]] + (offset === "0" ? "" : "+" + offset) : whole);
    for (const k of TL.lines) {
      const s = lineStep[k], text = named(L.text[k]);
      const node = h("div", { className: "line" + (nth[s] === 0 ? " step-start" : ""),
        dataset: { line: String(k), step: String(s), nth: String(nth[s]++) }, title: text },
      [h("span", { className: "s", text: String(phaseOf(s)) }), h("span", { text })]);
      nodes.push(node);
    }
    lineNodes = nodes;
    listing.replaceChildren(head, ...nodes);
    if (!nodes.length) {
      listing.append(h("div", { className: "empty", style: "top:" + (LIFE_RULER + 4) + "px",
        text: "No program lines on this tile." }));
    }
  }

  function markListing() {
    for (const node of lineNodes) {
      const k = Number(node.dataset.line), uses = L.buffers[k] || [];
      node.classList.toggle("uses", S.pinned >= 0 && uses.includes(S.pinned));
      node.classList.toggle("hover-uses", S.hovered >= 0 && S.hovered !== S.pinned && uses.includes(S.hovered));
      node.classList.toggle("current", lineStep[k] === S.step);
    }
  }

  const stepY = (s) => LIFE_RULER + TL.stepTop[s] - lifeScroller.scrollTop;

  function drawLife() {
    const { ctx, w, h: height } = fitCanvas(lifeCanvas);
    const W = plotW(lifeCanvas, LIFE_LEFT), scroll = lifeScroller.scrollTop;
    const top = TL.stepTop;
    let s0 = 0;
    while (s0 < NS - 1 && top[s0 + 1] <= scroll) s0++;
    let s1 = s0;
    while (s1 < NS - 1 && top[s1 + 1] < scroll + height - LIFE_RULER) s1++;
    ctx.save();
    ctx.beginPath(); ctx.rect(0, LIFE_RULER, w, height - LIFE_RULER); ctx.clip();
    shadeRegions(ctx, lifeCanvas, LIFE_LEFT, LIFE_RULER, height - LIFE_RULER);
    ctx.textBaseline = "middle";
    for (let s = s0; s <= s1 && NS > 0; s++) {
      const y = stepY(s), hh = top[s + 1] - top[s];
      if (s === S.step) { ctx.fillStyle = C.step; ctx.fillRect(0, y, w, hh); }
      ctx.fillStyle = C.grid; ctx.fillRect(LIFE_LEFT, Math.round(y), W, 1);
      ctx.fillStyle = stepKind[s] === "compute" ? KIND_COLOUR[1][0] : stepKind[s] === "exchange" ? C.accent : KIND_COLOUR[2][0];
      ctx.fillRect(22, y + 3, 4, Math.max(2, S.rowH - 6));
      ctx.fillStyle = stepInit[s] ? C.muted : C.ink; ctx.textAlign = "left";
      const text = s + " " + (R.steps.label[s] || "") + (stepInit[s] ? " (init)" : "");
      ctx.save(); ctx.beginPath(); ctx.rect(30, y, LIFE_LEFT - 36, hh); ctx.clip();
      ctx.fillText(text, 30, y + Math.min(hh, S.rowH) / 2 + 0.5);
      ctx.restore();
    }
    if (repeat.count > 0 && NS > 0) { /* the Repeat's steps, bracketed */
      const a = repeat.first, b = Math.min(NS, repeat.first + repeat.count);
      const y0 = stepY(a), y1 = stepY(b - 1) + (top[b] - top[b - 1]);
      ctx.strokeStyle = C.accent; ctx.lineWidth = 2;
      ctx.beginPath(); ctx.moveTo(16, y0 + 2); ctx.lineTo(10, y0 + 2); ctx.lineTo(10, y1 - 2); ctx.lineTo(16, y1 - 2); ctx.stroke();
      ctx.lineWidth = 1;
      ctx.save(); ctx.translate(6, (Math.max(y0, LIFE_RULER) + Math.min(y1, height)) / 2); ctx.rotate(-Math.PI / 2);
      ctx.fillStyle = C.accent; ctx.textAlign = "center"; ctx.fillText("Repeat \u00d7" + repeat.iterations, 0, 0); ctx.restore();
    }
    for (const sp of TL.support) { /* support is reserved for the whole program */
      const x0 = Math.max(LIFE_LEFT, xOf(lifeCanvas, LIFE_LEFT, sp.lo)), x1 = Math.min(LIFE_LEFT + W, xOf(lifeCanvas, LIFE_LEFT, sp.hi));
      if (x1 <= x0) continue;
      ctx.fillStyle = C.supportLight;
      ctx.fillRect(x0, LIFE_RULER, x1 - x0, height - LIFE_RULER);
    }
    const ids = TL.ids;
    for (let j = 0; j < ids.length; j++) {
      const id = ids[j];
      if (aLast[id] < s0 || aFirst[id] > s1 || aAddr[id] + aSize[id] <= V.lo || aAddr[id] >= V.hi) continue;
      const y0 = stepY(Math.max(0, aFirst[id])), last = Math.min(NS - 1, aLast[id]);
      const y1 = stepY(last) + top[last + 1] - top[last];
      drawBar(ctx, lifeCanvas, LIFE_LEFT, id, y0 + 1, y1 - y0 - 2, j);
    }
    for (const [id, col, width] of [[S.hovered, C.ink, 1.5], [S.pinned, C.pin, 2.5]]) {
      if (id < 0 || aTile[id] !== S.tile) continue;
      const last = Math.min(NS - 1, aLast[id]);
      const y0 = stepY(Math.max(0, aFirst[id])), y1 = stepY(last) + top[last + 1] - top[last];
      outline(ctx, lifeCanvas, LIFE_LEFT, id, y0, y1 - y0, col, width);
    }
    elementLines(ctx, lifeCanvas, LIFE_LEFT, LIFE_RULER, height - LIFE_RULER);
    markerLine(ctx, lifeCanvas, LIFE_LEFT, LIFE_RULER, height - LIFE_RULER);
    ctx.restore();
    /* the address ruler stays on top */
    ctx.fillStyle = "#fff"; ctx.fillRect(0, 0, w, LIFE_RULER);
    shadeRegions(ctx, lifeCanvas, LIFE_LEFT, 0, LIFE_RULER);
    ctx.strokeStyle = C.line; ctx.beginPath(); ctx.moveTo(0, LIFE_RULER - 0.5); ctx.lineTo(w, LIFE_RULER - 0.5); ctx.stroke();
    const step = tickStep(((V.hi - V.lo) * 90) / W);
    ctx.fillStyle = C.ink; ctx.textAlign = "center"; ctx.textBaseline = "middle";
    for (let a = Math.ceil(V.lo / step) * step; a <= V.hi; a += step) {
      ctx.fillText(hex(a), clamp(xOf(lifeCanvas, LIFE_LEFT, a), LIFE_LEFT + 24, LIFE_LEFT + W - 24), LIFE_RULER / 2);
    }
    ctx.fillStyle = C.muted; ctx.textAlign = "left"; ctx.fillText("step", 8, LIFE_RULER / 2);
    lifeCanvas.dataset.firstStep = String(s0);
    lifeCanvas.dataset.lastStep = String(s1);
  }

  function lifeStepAt(y) {
    const v = y - LIFE_RULER + lifeScroller.scrollTop, top = TL.stepTop;
    if (y < LIFE_RULER || v < 0 || v >= top[NS]) return -1;
    let lo = 0, hi = NS - 1;
    while (lo < hi) { const m = (lo + hi + 1) >> 1; if (top[m] <= v) lo = m; else hi = m - 1; }
    return lo;
  }

  function lifeHit(x, y) {
    const W = plotW(lifeCanvas, LIFE_LEFT), s = lifeStepAt(y);
    if (s < 0 || x < LIFE_LEFT || x > LIFE_LEFT + W) return s < 0 ? null : { step: s };
    const addr = addrOf(lifeCanvas, LIFE_LEFT, x), tol = (3 * (V.hi - V.lo)) / W;
    let best = -1, bestDist = Infinity;
    for (const id of TL.ids) {
      if (aFirst[id] > s || aLast[id] < s) continue;
      const a = aAddr[id], b = a + Math.max(1, aSize[id]);
      const d = addr < a ? a - addr : addr >= b ? addr - b + 1e-9 : 0;
      if (d <= tol && d < bestDist) { bestDist = d; best = id; }
    }
    return best >= 0 ? { id: best, step: s, addr } : { step: s, addr };
  }

  /* ---------- footprint and gaps ---------- */

  const fpCanvas = $("footprint-canvas");
  const FP = { left: 76, top: 10, bottom: 22, lo: 0, hi: NS };  /* lo, hi: the steps shown (drag to zoom) */
  const fpSeries = (t) => [(footprint.estimate && footprint.estimate[t]) || [], (footprint.placed && footprint.placed[t]) || []];

  function drawFootprint() {
    const { ctx, w, h: height } = fitCanvas(fpCanvas);
    const [est, placed] = fpSeries(S.tile);
    const W = Math.max(1, w - FP.left - RIGHT), H = height - FP.top - FP.bottom;
    let max = 1;
    for (let s = 0; s < NS; s++) max = Math.max(max, est[s] || 0, placed[s] || 0);
    const step = Math.pow(2, Math.ceil(Math.log2(max / 4)));
    const yTop = Math.ceil(max / step) * step, slot = W / Math.max(1, FP.hi - FP.lo);
    ctx.textAlign = "right"; ctx.textBaseline = "middle";
    for (let v = 0; v <= yTop; v += step) {
      const y = Math.round(FP.top + H - (v / yTop) * H) + 0.5;
      ctx.strokeStyle = v ? C.grid : C.line; ctx.beginPath(); ctx.moveTo(FP.left, y); ctx.lineTo(FP.left + W, y); ctx.stroke();
      ctx.fillStyle = C.muted; ctx.fillText(tick(v), FP.left - 6, y);
    }
    if (S.step >= FP.lo && S.step < FP.hi) { ctx.fillStyle = C.step; ctx.fillRect(FP.left + (S.step - FP.lo) * slot, FP.top, slot, H); }
    for (let s = FP.lo; s < FP.hi; s++) {
      const x = FP.left + (s - FP.lo) * slot, p = ((placed[s] || 0) / yTop) * H, e = ((est[s] || 0) / yTop) * H;
      ctx.fillStyle = "#b8c2cf"; ctx.fillRect(x + slot * 0.1, FP.top + H - p, Math.max(1, slot * 0.8), p);
      ctx.fillStyle = C.accent; ctx.fillRect(x + slot * 0.3, FP.top + H - e, Math.max(1, slot * 0.4), e);
    }
    /* Step ticks by the reports' one rule and label. */
    ctx.fillStyle = C.muted; ctx.textAlign = "center"; ctx.textBaseline = "top";
    FP.ticks = window.ipuReport.axisTicks((s) => ({ phase: phaseOf(s), iteration: null }), FP.lo, FP.hi,
      Math.max(1, Math.floor(W / 110)));
    for (const s of FP.ticks)
      ctx.fillText(window.ipuReport.placeText(phaseOf(s), null), FP.left + (s - FP.lo + 0.5) * slot, FP.top + H + 6);
  }

  function fpStepAt(x) {
    const W = Math.max(1, fpCanvas.clientWidth - FP.left - RIGHT);
    const s = FP.lo + Math.floor(((x - FP.left) * (FP.hi - FP.lo)) / W);
    return s >= FP.lo && s < FP.hi ? s : -1;
  }

  /* Show steps [lo, hi) of the footprint chart (at least one). */
  function fpZoom(lo, hi) {
    FP.lo = clamp(lo, 0, NS - 1);
    FP.hi = clamp(hi, FP.lo + 1, NS);
    requestDraw();
  }

  function renderGaps() {
    const table = $("gaps");
    const head = h("tr", null, ["#", "tile", "step", "", "estimate", "placed", "gap"].map((t) => h("th", { text: t })));
    const rows = gaps.map((g, i) => h("tr", { dataset: { gap: String(i), tile: String(g.tile), step: String(g.step) } }, [
      h("td", { text: String(i + 1) }),
      h("td", null, [h("button", { type: "button", className: "link", dataset: { gap: String(i) }, text: String(g.tile),
        onclick: () => { selectTile(g.tile); selectStep(g.step, true); } })]),
      h("td", { text: String(g.step) }),
      h("td", { className: "label", text: R.steps.label[g.step] || "" }),
      h("td", { className: "num", text: count(g.estimate) }), h("td", { className: "num", text: count(g.placed) }),
      h("td", { className: "num", text: count(g.gap) }),
    ]));
    table.replaceChildren(h("tbody", null, [head, ...rows]));
    if (!gaps.length) {
      table.replaceChildren(h("tbody", null, [h("tr", null, [
        h("td", { text: "No gaps: the placed spans equal the estimates." })])]));
    }
  }

  function renderStepReadout() {
    const box = $("step-readout");
    for (const tr of $("gaps").querySelectorAll("tr[data-gap]")) {
      tr.classList.toggle("selected", Number(tr.dataset.tile) === S.tile && Number(tr.dataset.step) === S.step);
    }
    if (S.step < 0) { box.replaceChildren("Click a step (here, in the lifetime view or in the gaps) to select it."); return; }
    const [est, placed] = fpSeries(S.tile), e = est[S.step] || 0, p = placed[S.step] || 0;
    box.replaceChildren(
      h("span", { dataset: { field: "step" }, text: "Phase " + phaseOf(S.step) + " (" + (R.steps.label[S.step] || "") +
        ", step " + S.step + ")" }),
      ": estimate ", h("strong", { dataset: { field: "estimate" }, text: bytes(e) }),
      ", placed ", h("strong", { dataset: { field: "placed" }, text: bytes(p) }),
      ", gap ", h("strong", { dataset: { field: "gap" }, text: bytes(Math.max(0, p - e)) }), " ",
      h("button", { type: "button", className: "link", id: "step-clear", text: "clear step", onclick: () => selectStep(-1) }));
  }

  /* ---------- details: tooltip and pinned panel ---------- */

  function lifetimeText(id) {
    const f = aFirst[id], l = aLast[id];
    const span = f === l ? "step " + f : "steps " + f + "\u2013" + l;
    return f === 0 && l === NS - 1 ? "whole program (" + span + ")" : span;
  }

  function details(id, addr) {
    const m = aMembers[id], stride = aSize[id] / Math.max(1, m), t = aTile[id];
    const member = addr != null ? " (member " + (Math.min(m - 1, Math.floor((addr - aAddr[id]) / stride)) + 1) + ")" : "";
    const rows = [
      ["tile", "Tile", t + " (logical " + t + ", physical " + physical(t) + ")"],
      ["range", "Address", hex(aAddr[id]) + "\u2013" + hex(aAddr[id] + aSize[id])],
      ["size", "Size", aSize[id] + " bytes"],
      ["lifetime", "Lifetime", lifetimeText(id)],
      ["kind", "Kind", kindNames[aKind[id]] || String(aKind[id])],
      ["aliases", "Aliases", aAlias[id] >= 0 ? names[aAlias[id]] : "none"],
      ["members", "Members", m > 1 ? m + " \u00d7 " + stride + " bytes" + member : "1"],
      ["row", "Row", rowOf(id) === 0 ? "main" : rowOf(id) > 0 ? "reuse " + rowOf(id) : "\u2014"],
    ];
    return h("table", null, [h("tbody", null, rows.map(([field, label, value]) =>
      h("tr", null, [h("th", { text: label }), h("td", { dataset: { field }, text: value })])))]);
  }

  const tooltip = $("tooltip");
  function showTooltip(content, kind, clientX, clientY) {
    tooltip.replaceChildren(...content);
    tooltip.dataset.kind = kind;
    tooltip.hidden = false;
    const pad = 14, vw = document.documentElement.clientWidth, vh = document.documentElement.clientHeight;
    let x = clientX + pad, y = clientY + pad;
    if (x + tooltip.offsetWidth > vw - 4) x = Math.max(4, clientX - pad - tooltip.offsetWidth);
    if (y + tooltip.offsetHeight > vh - 4) y = Math.max(4, clientY - pad - tooltip.offsetHeight);
    tooltip.style.left = x + "px"; tooltip.style.top = y + "px";
  }
  function hideTooltip() { tooltip.hidden = true; tooltip.dataset.kind = ""; tooltip.dataset.id = ""; }

  function tooltipFor(hit, event) {
    if (hit && hit.id >= 0 && hit.id !== undefined) {
      tooltip.dataset.id = String(hit.id);
      const title = h("div", { className: "tt-title", dataset: { field: "name" }, text: names[aName[hit.id]] });
      showTooltip([title, details(hit.id, hit.addr)], "allocation", event.clientX, event.clientY);
    } else if (hit && hit.support) {
      const sp = hit.support;
      tooltip.dataset.id = "";
      showTooltip([h("div", { className: "tt-title", dataset: { field: "name" }, text: "Package support: " + sp.what }),
        h("table", null, [h("tbody", null, [
          h("tr", null, [h("th", { text: "Address" }),
            h("td", { dataset: { field: "range" }, text: hex(sp.lo) + "\u2013" + hex(sp.hi) })]),
          h("tr", null, [h("th", { text: "Size" }), h("td", { dataset: { field: "size" }, text: sp.hi - sp.lo + " bytes" })]),
          ...(isInt(sp.tables) ? [
            h("tr", null, [h("th", { text: "Exchange tables" }), h("td", { dataset: { field: "tables" }, text: sp.tables + " bytes" })]),
            h("tr", null, [h("th", { text: "Generated programs" }),
              h("td", { dataset: { field: "programs" }, text: sp.hi - sp.lo - sp.tables + " bytes" })])] : []),
          h("tr", null, [h("th", { text: "Lifetime" }), h("td", { text: "reserved for the whole program" })])])])],
      "support", event.clientX, event.clientY);
    } else hideTooltip();
  }

  function renderPinned() {
    const box = $("pinned");
    box.classList.toggle("active", S.pinned >= 0);
    box.dataset.id = S.pinned >= 0 ? String(S.pinned) : "";
    if (S.pinned < 0) { box.replaceChildren("No allocation pinned. Click one in the map or the lifetime view."); return; }
    const id = S.pinned, uses = TL.lines.filter((k) => (L.buffers[k] || []).includes(id)).length;
    box.replaceChildren(
      h("div", { className: "pinned-head" }, [h("strong", { dataset: { field: "name" }, text: names[aName[id]] }),
        h("span", { className: "muted", dataset: { field: "uses" }, text: uses + " program line" + (uses === 1 ? "" : "s") + " use it" }),
        h("button", { type: "button", id: "pin-clear", text: "Clear", onclick: () => pin(-1) })]),
      details(id, null));
  }

  /* ---------- actions ---------- */

  function pin(id) {
    S.pinned = id >= 0 && id < N ? id : -1;
    renderPinned();
    markListing();
    requestDraw();
  }

  /* The step's package phase (the numbering every report shares), and the step of a phase. */
  function phaseOf(s) { return Array.isArray(R.steps.phase) ? R.steps.phase[s] : s; }
  function stepOfPhase(p) {
    for (let s = 0; s < NS; s++) if (phaseOf(s) >= p) return s;
    return NS - 1;
  }
  function keepPlace() {
    window.ipuReport.setPlace({ tile: S.tile, phase: S.step >= 0 ? phaseOf(S.step) : undefined });
  }

  function selectTile(t) {
    t = clamp(Math.round(Number(t)) || 0, 0, NT - 1);
    $("tile-input").value = String(t);
    if (TL && t === S.tile) return;
    S.tile = t;
    keepPlace();
    TL = layoutTile(t);
    S.hovered = -1;
    S.pinned = -1;
    hideTooltip();
    mapScroller.scrollTop = 0;
    buildListing();
    relayout();
    renderTileHead();
    renderPinned();
    renderHighlightCount();
    renderStepReadout();
    markListing();
    requestDraw();
  }

  function selectStep(s, scroll) {
    S.step = s >= 0 && s < NS ? s : -1;
    keepPlace();
    if (scroll && S.step >= 0) lifeScroller.scrollTop = Math.max(0, TL.stepTop[S.step] - 3 * S.rowH);
    renderStepReadout();
    markListing();
    requestDraw();
  }

  function relayout() {
    sizeMap();
    sizeLife();
  }

  function renderTileHead() {
    $("tile-title").replaceChildren("Tile ", h("span", { dataset: { field: "tile" }, text: String(S.tile) }));
    const rows = TL.rows.length, shown = shownRows();
    $("tile-stats").replaceChildren(
      "logical ", h("span", { dataset: { field: "logical" }, text: String(S.tile) }),
      " \u00b7 physical ", h("span", { dataset: { field: "physical" }, text: String(physical(S.tile)) }),
      " \u00b7 ", h("span", { dataset: { field: "allocations" }, text: String(TL.ids.length) }), " allocations \u00b7 ",
      h("span", { dataset: { field: "rows" }, text: String(shown) }), shown === 1 ? " row" : " rows",
      S.reuse ? " (main + " + (rows - 1) + " reuse)" : rows > 1 ? " (" + (rows - 1) + " reuse rows hidden)" : "");
    $("tile-count").textContent = "of 0\u2013" + (NT - 1);
    $("life-note").textContent = "Tile " + S.tile + ": address across, program step down; the tile's listing beside it.";
  }

  function renderRange() {
    $("range").textContent = hex(V.lo) + "\u2013" + hex(V.hi) + " \u00b7 " + Math.round(V.hi - V.lo) + " bytes" +
      (undo.length ? " \u00b7 " + undo.length + " zoom" + (undo.length === 1 ? "" : "s") + " to undo" : "");
  }

  function setHighlight(text) {
    S.highlight = text;
    const q = text.trim().toLowerCase();
    if (!q) S.match = null;
    else {
      S.match = new Uint8Array(names.length);
      for (let i = 0; i < names.length; i++) if (String(names[i]).toLowerCase().includes(q)) S.match[i] = 1;
    }
    renderHighlightCount();
    requestDraw();
  }

  function renderHighlightCount() {
    const box = $("highlight-count");
    if (!S.match) { box.textContent = ""; box.dataset.tile = ""; box.dataset.total = ""; return; }
    const hit = (id) => S.match[aName[id]] || (aAlias[id] >= 0 && S.match[aAlias[id]]);
    let total = 0, here = 0;
    for (let id = 0; id < N; id++) if (hit(id)) total++;
    for (const id of TL.ids) if (hit(id)) here++;
    box.dataset.tile = String(here); box.dataset.total = String(total);
    box.textContent = here + " on this tile, " + total + " in all";
  }

  function setRowHeight(px) {
    S.rowH = [12, 16, 24].includes(px) ? px : 16;
    for (const b of document.querySelectorAll("button.seg")) b.setAttribute("aria-pressed", String(Number(b.dataset.height) === S.rowH));
    relayout();
    requestDraw();
  }

  function setReuse(on) {
    S.reuse = on;
    $("reuse-toggle").checked = on;
    mapScroller.scrollTop = 0;
    sizeMap();
    renderTileHead();
    requestDraw();
  }

  function reset() {
    undo.length = 0;
    V.lo = FULL_LO; V.hi = FULL_HI;
    S.marker = -1;
    $("highlight-input").value = "";
    setHighlight("");
    selectStep(-1);
    pin(-1);
    $("address-input").classList.remove("invalid");
  }

  function goToAddress(text) {
    const input = $("address-input"), t = String(text).trim();
    const value = /^0x[0-9a-f]+$/i.test(t) ? parseInt(t, 16) : /^[0-9]+$/.test(t) ? parseInt(t, 10) : NaN;
    if (!(value >= FULL_LO && value < FULL_HI)) { input.classList.add("invalid"); return false; }
    input.classList.remove("invalid");
    S.marker = value;
    const span = Math.min(V.hi - V.lo, 2 * ELEMENT);
    setView(value - span / 2, value + span / 2, true);
    return true;
  }

  /* ---------- drawing schedule ---------- */

  let frame = 0;
  function drawAll() {
    if (frame) { cancelAnimationFrame(frame); frame = 0; }
    drawRuler();
    drawMap();
    drawLife();
    drawFootprint();
    renderRange();
    stats.draws++;
  }
  function requestDraw() { if (!frame) frame = requestAnimationFrame(() => { frame = 0; drawAll(); }); }

  /* ---------- events ---------- */

  function hover(hit, event) {
    const id = hit && hit.id >= 0 ? hit.id : -1;
    tooltipFor(hit, event);
    if (id !== S.hovered) {
      S.hovered = id;
      markListing();
      drawMap();
      drawLife();
      const took = performance.now() - event.timeStamp;
      stats.hoverMs = took; stats.hoverCount++; stats.hoverMaxMs = Math.max(stats.hoverMaxMs, took);
    }
  }

  /* A press on a canvas takes the keyboard from the text boxes, so Escape reaches the viewer. */
  function leaveInputs() {
    const active = document.activeElement;
    if (active && active.tagName === "INPUT") active.blur();
  }

  function startDrag(where, canvas, left, event) {
    if (event.button !== 0) return;
    leaveInputs();
    const p = localPoint(canvas, event);
    if (p.x < left || p.x > canvas.clientWidth - RIGHT) return;
    const a = clamp(addrOf(canvas, left, p.x), V.lo, V.hi);
    S.drag = { where, canvas, left, x0: p.x, a0: a, a1: a, moved: false, cancelled: false, point: p };
    event.preventDefault();
  }

  document.addEventListener("mousemove", (event) => {
    const d = S.drag;
    if (!d || d.cancelled) return;
    const p = localPoint(d.canvas, event);
    d.a1 = clamp(addrOf(d.canvas, d.left, p.x), V.lo, V.hi);
    if (Math.abs(p.x - d.x0) >= 5) d.moved = true;
    requestDraw();
  });

  document.addEventListener("mouseup", (event) => {
    const d = S.drag;
    if (!d || event.button !== 0) return;
    S.drag = null;
    if (d.cancelled) { requestDraw(); return; }
    if (d.moved) {
      const a = Math.min(d.a0, d.a1), b = Math.max(d.a0, d.a1);
      setView(a, b, true);
    } else if (d.where === "map") {
      const hit = mapHit(d.point.x, d.point.y);
      if (hit && hit.id >= 0) pin(hit.id);
    }
    requestDraw();
  });

  function onWheel(canvas, left) {
    return (event) => {
      if (!event.shiftKey) return;
      event.preventDefault();
      const delta = event.deltaY || event.deltaX;
      if (!delta) return;
      const p = localPoint(canvas, event), W = plotW(canvas, left);
      const frac = clamp((p.x - left) / W, 0, 1), addr = V.lo + frac * (V.hi - V.lo);
      const now = performance.now(), remember = now - S.lastWheelPush > 600;
      if (remember) S.lastWheelPush = now;
      zoomAround(addr, frac, Math.pow(1.0015, clamp(delta, -600, 600)), remember);
      drawAll();
    };
  }

  function onContext(event) { event.preventDefault(); if (!S.drag) undoZoom(); }

  mapCanvas.addEventListener("mousedown", (event) => startDrag("map", mapCanvas, LEFT, event));
  rulerCanvas.addEventListener("mousedown", (event) => startDrag("ruler", rulerCanvas, LEFT, event));
  for (const [canvas, left] of [[mapCanvas, LEFT], [rulerCanvas, LEFT], [lifeCanvas, LIFE_LEFT]]) {
    canvas.addEventListener("wheel", onWheel(canvas, left), { passive: false });
    canvas.addEventListener("contextmenu", onContext);
  }
  mapCanvas.addEventListener("mousemove", (event) => {
    if (S.drag) return;
    const p = localPoint(mapCanvas, event);
    hover(mapHit(p.x, p.y), event);
  });
  lifeCanvas.addEventListener("mousemove", (event) => {
    const p = localPoint(lifeCanvas, event), hit = lifeHit(p.x, p.y);
    hover(hit && hit.id >= 0 ? hit : null, event);
  });
  for (const canvas of [mapCanvas, lifeCanvas]) {
    canvas.addEventListener("mouseleave", () => {
      hideTooltip();
      if (S.hovered >= 0) { S.hovered = -1; markListing(); requestDraw(); }
    });
  }
  lifeCanvas.addEventListener("click", (event) => {
    leaveInputs();
    const p = localPoint(lifeCanvas, event), hit = lifeHit(p.x, p.y);
    if (hit && hit.id >= 0) pin(hit.id);
    else if (hit && hit.step >= 0) selectStep(hit.step);
  });
  listing.addEventListener("click", (event) => {
    const node = event.target.closest(".line");
    if (node) selectStep(Number(node.dataset.step));
  });
  mapScroller.addEventListener("scroll", () => requestDraw());
  lifeScroller.addEventListener("scroll", () => requestDraw());
  /* A click selects a step; a drag across the chart zooms to the steps dragged over. */
  window.ipuReport.dragZoom(fpCanvas, (event) => {
    const s = fpStepAt(clamp(localPoint(fpCanvas, event).x, FP.left, fpCanvas.clientWidth - RIGHT - 1));
    return s < 0 ? FP.lo : s;
  }, fpZoom, (s, event) => { if (fpStepAt(localPoint(fpCanvas, event).x) >= 0) selectStep(s, true); });
  $("footprint-reset-zoom").addEventListener("click", () => fpZoom(0, NS));
  fpCanvas.addEventListener("mousemove", (event) => {
    const s = fpStepAt(localPoint(fpCanvas, event).x);
    if (s < 0) { hideTooltip(); return; }
    const [est, placed] = fpSeries(S.tile), e = est[s] || 0, p = placed[s] || 0;
    const rows = [["estimate", e], ["placed", p], ["gap", Math.max(0, p - e)]].map(([k, v]) =>
      h("tr", null, [h("th", { text: k }), h("td", { dataset: { field: k }, text: v + " bytes" })]));
    showTooltip([h("div", { className: "tt-title", text: "Step " + s + " \u00b7 " + (R.steps.label[s] || "") }),
      h("table", null, [h("tbody", null, rows)])], "step", event.clientX, event.clientY);
  });
  fpCanvas.addEventListener("mouseleave", hideTooltip);

  $("zoom-in").addEventListener("click", () => zoomAround((V.lo + V.hi) / 2, 0.5, 0.5, true));
  $("zoom-out").addEventListener("click", () => zoomAround((V.lo + V.hi) / 2, 0.5, 2, true));
  $("reset").addEventListener("click", reset);
  $("tile-prev").addEventListener("click", () => selectTile(S.tile - 1));
  $("tile-next").addEventListener("click", () => selectTile(S.tile + 1));
  $("tile-input").addEventListener("change", (event) => selectTile(event.target.value));
  $("tile-input").addEventListener("keydown", (event) => { if (event.key === "Enter") selectTile(event.target.value); });
  $("address-form").addEventListener("submit", (event) => { event.preventDefault(); goToAddress($("address-input").value); });
  $("highlight-input").addEventListener("input", (event) => setHighlight(event.target.value));
  $("reuse-toggle").addEventListener("change", (event) => setReuse(event.target.checked));
  for (const b of document.querySelectorAll("button.seg")) b.addEventListener("click", () => setRowHeight(Number(b.dataset.height)));

  document.addEventListener("keydown", (event) => {
    if (event.key !== "Escape") return;
    if (S.drag) { S.drag.cancelled = true; event.preventDefault(); requestDraw(); return; }
    const target = event.target;
    if (target && (target.tagName === "INPUT" || target.tagName === "TEXTAREA")) return;
    if (S.pinned >= 0) { pin(-1); event.preventDefault(); }
  });
  window.addEventListener("resize", () => { hideTooltip(); relayout(); requestDraw(); });

  /* ---------- the legend and the header ---------- */

  function legend() {
    const item = (swatch, text) => h("li", null, [h("i", { style: "--swatch:" + swatch }), text]);
    $("legend").replaceChildren(...kindNames.map((k, i) => item(KIND_COLOUR[i & 3][0], k)),
      item(C.support, "package support (reserved)"), item(C.region1.replace(/[\d.]+\)$/, "0.35)"), "region 1"),
      item(C.aperture.replace(/[\d.]+\)$/, "0.5)"), "host aperture"));
    $("footprint-legend").replaceChildren(item(C.accent, "estimate (live bytes)"), item("#b8c2cf", "placed (span of live addresses)"));
    const rep = repeat.count > 0 ? " \u00b7 Repeat: steps " + repeat.first + "\u2013" +
      (repeat.first + repeat.count - 1) + " \u00d7" + repeat.iterations : "";
    $("meta").textContent = NT + " tiles \u00b7 " + N + " allocations \u00b7 " + NS + " steps" + rep + " \u00b7 SRAM " +
      hex(FULL_LO) + "\u2013" + hex(FULL_HI) + ", elements of " + ELEMENT + " bytes, region 1 from " + hex(D.region1_base) +
      ", host aperture " + hex(D.aperture_base) + "\u2013" + hex(D.aperture_end) +
      (isInt(SUP.tensor_bytes_available) ? " \u00b7 tensor bytes available at least " + SUP.tensor_bytes_available + " per tile" : "");
    document.title = "Placement \u2014 " + NT + " tiles, " + N + " allocations";
  }

  /* ---------- the API tests (and curious people) use ---------- */

  function rectIn(which, id) {
    if (!(id >= 0 && id < N) || aTile[id] !== S.tile) return null;
    const canvas = which === "life" ? lifeCanvas : mapCanvas, left = which === "life" ? LIFE_LEFT : LEFT;
    const W = plotW(canvas, left);
    const x0 = Math.max(left, xOf(canvas, left, aAddr[id])), x1 = Math.min(left + W, xOf(canvas, left, aAddr[id] + aSize[id]));
    if (x1 <= left || x0 >= left + W) return null;
    let y0, y1;
    if (which === "life") {
      const last = Math.min(NS - 1, aLast[id]);
      y0 = Math.max(LIFE_RULER, stepY(aFirst[id]));
      y1 = Math.min(canvas.clientHeight, stepY(last) + TL.stepTop[last + 1] - TL.stepTop[last]);
    } else {
      const r = rowOf(id);
      if (r >= shownRows()) return null;
      y0 = Math.max(0, r * S.rowH - mapScroller.scrollTop); y1 = Math.min(canvas.clientHeight, (r + 1) * S.rowH - mapScroller.scrollTop);
    }
    if (y1 - y0 < 2) return null;
    return { x0, x1, y0, y1, x: (x0 + Math.max(x0 + 1, x1)) / 2, y: (y0 + y1) / 2,
      width: canvas.clientWidth, height: canvas.clientHeight };
  }

  const axis = (which) => (which === "life" ? [lifeCanvas, LIFE_LEFT] : [which === "ruler" ? rulerCanvas : mapCanvas, LEFT]);

  window.placementViewer = {
    report: R,
    stats() { return Object.assign({}, stats); },
    tile() { return S.tile; },
    setTile(t) { selectTile(t); drawAll(); return S.tile; },
    /** Selects program step s of the listing (-1: none), as a click on it would. */
    setStep(s) { selectStep(s, true); drawAll(); return S.step; },
    view() { return { lo: V.lo, hi: V.hi, undo: undo.length, full: [FULL_LO, FULL_HI] }; },
    setView(lo, hi) { setView(lo, hi, false); drawAll(); return this.view(); },
    /** Allocation ids of a tile. */
    tileAllocations(t) { const s = byTile.start[t], e = byTile.start[t + 1]; return Array.from(byTile.order.subarray(s, e)); },
    /** The allocation's rectangle in CSS px from the canvas's top-left ("map" or "life"), clipped to what is visible. */
    rect(which, id) { return rectIn(which, id); },
    /** Scrolls the map or the lifetime view so the allocation's row or first step is in view. */
    reveal(which, id) {
      if (aTile[id] !== S.tile) return false;
      if (which === "life") lifeScroller.scrollTop = Math.max(0, TL.stepTop[aFirst[id]] - S.rowH);
      else mapScroller.scrollTop = Math.max(0, rowOf(id) * S.rowH - S.rowH);
      drawAll();
      return true;
    },
    /** The address at canvas x, and the x of an address ("map", "ruler" or "life"). */
    addressAt(which, x) { const [c, left] = axis(which); return addrOf(c, left, x); },
    xOfAddress(which, a) { const [c, left] = axis(which); return xOf(c, left, a); },
    /** The plot's left and right edges in the canvas (CSS px) and the canvas's size. */
    plot(which) {
      const [canvas, left] = axis(which);
      return { left, right: left + plotW(canvas, left), width: canvas.clientWidth, height: canvas.clientHeight };
    },
    rowOf(id) { return rowOf(id); },
    rows() { return shownRows(); },
    totalRows() { return TL.rows.length; },
    rowHeight() { return S.rowH; },
    reuse() { return S.reuse; },
    pinned() { return S.pinned >= 0 ? S.pinned : null; },
    /** Pins an allocation of the selected tile (-1 unpins). */
    pin(id) { if (id < 0 || aTile[id] === S.tile) pin(id); drawAll(); return this.pinned(); },
    hovered() { return S.hovered >= 0 ? S.hovered : null; },
    step() { return S.step >= 0 ? S.step : null; },
    dragging() { return S.drag ? { where: S.drag.where, cancelled: S.drag.cancelled, a0: S.drag.a0, a1: S.drag.a1 } : null; },
    marker() { return S.marker >= 0 ? S.marker : null; },
    drawn() { return stats.draws; },
    /** The footprint chart's steps shown, [lo, hi), and its step ticks. */
    footprintView() { return { lo: FP.lo, hi: FP.hi }; },
    footprintTicks() { return (FP.ticks || []).map((s) => ({ index: s, phase: phaseOf(s), label: window.ipuReport.placeText(phaseOf(s), null) })); },
    drawNow() { drawAll(); },
  };

  /* Where the page opens: the hash's place, else the largest estimate's tile and step (the writer
     gives it as R.opening when the footprint comes later). */
  function opening() {
    const place = window.ipuReport.place();
    let tile = 0, step = -1, best = -1;
    if (R.opening) ({ tile, step } = R.opening);
    const est = (R.footprint && R.footprint.estimate) || [];
    est.forEach((series, t) => series.forEach((v, s) => { if (v > best) { best = v; tile = t; step = s; } }));
    if (place.tile !== undefined) { tile = place.tile; step = -1; }
    if (place.phase !== undefined) step = stepOfPhase(place.phase);
    return [tile, step];
  }

  /* The allocation of tile t holding byte addr: the one live at step s, else the one whose life is
     nearest to it (a fault's address may lie where no life is), -1 when none. */
  function allocationAt(t, addr, s) {
    let best = -1, bestDistance = Infinity;
    for (let k = byTile.start[t]; k < byTile.start[t + 1]; k++) {
      const id = byTile.order[k];
      if (addr < aAddr[id] || addr >= aAddr[id] + aSize[id]) continue;
      const distance = s < 0 ? 0 : s < aFirst[id] ? aFirst[id] - s : s > aLast[id] ? s - aLast[id] : 0;
      if (distance < bestDistance) { best = id; bestDistance = distance; }
    }
    return best;
  }

  legend();
  renderGaps();
  window.ipuReport.links("placement");
  /* Opens the hash's place (selecting rewrites the hash, so its address is read first). */
  function goToPlace() {
    const address = window.ipuReport.place().address;
    const [tile, step] = opening();
    selectTile(tile);
    selectStep(step, true);
    if (address !== undefined) pin(allocationAt(S.tile, address, S.step));
  }
  goToPlace();
  window.ipuReport.onPlaceChange(() => { goToPlace(); drawAll(); });
  setRowHeight(16);
  drawAll();
  stats.firstPaintMs = performance.now();
  document.dispatchEvent(new CustomEvent("placement-viewer-ready"));

  /* The parts embedded after the script: the tile is laid out again with its listing. */
  async function later() {
    const read = window.ipuReport.embeddedJSON;
    try {
      if (!R.listing) { R.listing = await read("placement-listing"); indexListing(R.listing); }
      if (!R.footprint) { R.footprint = await read("placement-footprint"); footprint = R.footprint || footprint; }
    } catch (error) {
      fail("The embedded listing or footprint cannot be read: " + error.message);
      return;
    }
    TL = layoutTile(S.tile);
    buildListing();
    relayout();
    renderStepReadout();
    selectStep(S.step, true);
    drawAll();
    stats.loadedMs = performance.now();
    document.dispatchEvent(new CustomEvent("placement-loaded"));
    document.body.dataset.ready = "true";
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", later);
  else later();
})();
