/* memory.js: the run-time memory section of the run-profile page.  It reads
   the memory timeline (memory-timeline.json, engine/src/report/timeline.c,
   embedded as <script id="memory-timeline-data">; null when the run recorded
   none) and shows, for the selected tile: its live bytes by category at
   every executed phase (a stacked SVG chart with phase ticks named by their
   compiler op, byte ticks in KiB or MiB and the planner's budget labelled;
   hover for the numbers, click to pick a phase), its free bytes and largest
   hole at every executed phase (measured here from the allocation table and
   the support ranges, as timeline.c measures them; hover adds the device's
   free bytes and fragmentation), every tile's run-time peak (a strip; click
   selects the tile), the breakdown, free bytes and largest hole at the
   tile's peak, the allocations live at the picked phase (largest first;
   their sum is the chart's value there), a device search by allocation or
   tensor name, and per compiler op its device-wide peak and residual bytes.
   Both charts show one range of executed phases: the main program's by
   default (init shown on request), narrowed by dragging across either
   chart and restored by Reset zoom; their phase ticks follow the reports'
   one rule (ipuReport.axisTicks, labelled by ipuReport.placeText).
   An allocation is live at a phase inside its lifetime, as the device's
   allocation checks say.  The tile follows the run profile's selected tile
   (window.runProfile), and a pinned step picks its phase.  window.runMemory
   exposes the state for tests. */
(function () {
  "use strict";
  const $ = (id) => document.getElementById(id);
  const Rp = window.ipuReport, P = window.runProfile;
  const svgNS = "http://www.w3.org/2000/svg";
  const COLOURS = ["#3d6fb4", "#4c9f58", "#e8913a", "#9a67b5", "#c9a227"];
  const ROWS_SHOWN = 200;

  let TL;
  try { TL = JSON.parse($("memory-timeline-data").textContent || "null"); } catch (e) {
    Rp.fail("run-time memory", "the embedded memory timeline is not valid JSON: " + e.message);
    return;
  }
  if (!TL) return;
  if (TL.version !== 2 || TL.kind !== "memory-timeline") {
    Rp.fail("run-time memory", "expected a version 2 memory timeline");
    return;
  }
  $("memory").hidden = false;
  const A = TL.allocations, S = TL.steps, NT = TL.tiles, E = S.phase.length, C = TL.categories.length;
  const kindNames = A.kinds, strings = A.strings;
  const opName = (i) => (i === null || i < 0 ? "\u2014" : "op " + i + " " + TL.ops.kind[i] + " " + TL.ops.name[i]);
  /* Allocations by tile (counting sort). */
  const start = new Uint32Array(NT + 1), order = new Uint32Array(A.tile.length);
  for (const t of A.tile) start[t + 1]++;
  for (let t = 0; t < NT; t++) start[t + 1] += start[t];
  const fill = start.slice(0, NT);
  A.tile.forEach((t, i) => { order[fill[t]++] = i; });
  const live = (i, phase) => A.first[i] <= phase && (A.last[i] < 0 || phase <= A.last[i]);
  const state = { tile: TL.peak.tile, step: TL.peak.step, series: null, holes: null, showInit: false,
    view: null, ticks: [] };
  const firstMain = Math.max(0, S.program.indexOf("main"));
  /* The range of executed phases the charts show by default: init collapsed unless asked for. */
  const defaultView = () => ({ lo: state.showInit ? 0 : firstMain, hi: E });
  state.view = defaultView();
  const position = (e) => ({ phase: S.phase[e], iteration: S.iteration[e] });

  function ticks(max, count) {
    const raw = max / Math.max(1, count), power = Math.pow(2, Math.floor(Math.log2(Math.max(1, raw))));
    const step = [1, 2, 4, 8].map((m) => m * power).find((s) => s >= raw) || power * 8;
    const out = [];
    for (let v = 0; v <= max + 1e-9; v += step) out.push(v);
    return out;
  }
  const unit = window.ipuReport.tick;

  /* The tile's live bytes by category at every executed phase. */
  function seriesOf(tile) {
    const out = Array.from({ length: C }, () => new Float64Array(E));
    for (let k = start[tile]; k < start[tile + 1]; k++) {
      const i = order[k], c = A.kind[i];
      if (c >= C) continue;
      for (let e = 0; e < E; e++) if (live(i, S.phase[e])) out[c][e] += A.size[i];
    }
    return out;
  }

  /* Allocations by tile in address order, every kind (host staging too):
     what holds a tile's bytes when its holes are measured. */
  const byAddress = order.slice();
  for (let t = 0; t < NT; t++) byAddress.subarray(start[t], start[t + 1]).sort((a, b) => A.address[a] - A.address[b]);
  const U = TL.support.usable, RESERVED = TL.support.reserved;

  /* The tile's free bytes and largest hole at every executed phase: the
     usable SRAM less code, descriptors and the live allocations, as
     timeline.c measures them (a phase's live set depends on its phase
     only, so each phase is measured once). */
  function holesOf(tile) {
    const free = new Float64Array(E), largest = new Float64Array(E), seen = new Map();
    const seg = RESERVED[tile];
    for (let e = 0; e < E; e++) {
      const phase = S.phase[e];
      if (!seen.has(phase)) {
        let cursor = U.start, f = 0, big = 0, k = start[tile], j = 0;
        const gap = (lo, hi) => {
          if (lo > cursor) { f += lo - cursor; big = Math.max(big, lo - cursor); }
          cursor = Math.max(cursor, hi);
        };
        for (;;) {
          while (k < start[tile + 1] && !live(byAddress[k], phase)) k++;
          const i = k < start[tile + 1] ? byAddress[k] : -1;
          if (j < seg.length && (i < 0 || seg[j] <= A.address[i])) { gap(seg[j], seg[j] + seg[j + 1]); j += 2; }
          else if (i >= 0) { gap(A.address[i], A.address[i] + A.size[i]); k++; }
          else break;
        }
        gap(U.end, U.end);
        seen.set(phase, [f, big]);
      }
      [free[e], largest[e]] = seen.get(phase);
    }
    return { free, largest };
  }
  const fragmentation = (free, hole) => (free > 0 ? 1 - hole / free : 0);

  function node(tag, attrs, parent) {
    const n = document.createElementNS(svgNS, tag);
    for (const [k, v] of Object.entries(attrs)) n.setAttribute(k, v);
    if (parent) parent.appendChild(n);
    return n;
  }

  /* An SVG chart over the executed phases: byte ticks up to max, phase
     ticks named by their compiler op, the picked phase marked, and a hit
     area whose hover calls tip(e, event) and whose click picks the phase.
     draw(x, y, right) adds the chart's own marks under the marker (x and y
     map a phase and a byte count to the SVG; right is the plot's right edge). */
  function frame(svg, H, max, draw, tip) {
    const W = Math.max(300, svg.clientWidth || 900), M = { left: 70, right: 12, top: 10, bottom: 46 };
    const { lo, hi } = state.view, span = hi - lo;
    svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
    svg.replaceChildren();
    const x = (e) => M.left + ((span > 1 ? (e - lo) / (span - 1) : 0.5) * (W - M.left - M.right));
    const y = (v) => H - M.bottom - (v / max) * (H - M.top - M.bottom);
    for (const v of ticks(max, 4)) {
      node("line", { x1: M.left, x2: W - M.right, y1: y(v), y2: y(v), class: "grid" }, svg);
      node("text", { x: M.left - 6, y: y(v) + 4, class: "tick", "text-anchor": "end" }, svg).textContent = unit(v);
    }
    draw(x, y, W - M.right);
    /* Phase ticks by the reports' one rule, each labelled as every report labels it, with its compiler op. */
    const shown = Rp.axisTicks(position, lo, hi, 6);
    for (const e of shown) {
      node("line", { x1: x(e), x2: x(e), y1: H - M.bottom, y2: H - M.bottom + 4, class: "axis" }, svg);
      node("text", { x: x(e), y: H - M.bottom + 16, class: "tick", "text-anchor": "middle" }, svg).textContent =
        Rp.placeText(S.phase[e], S.iteration[e]);
      node("text", { x: x(e), y: H - M.bottom + 30, class: "tick op", "text-anchor": "middle" }, svg).textContent =
        S.op[e] === null ? S.program[e] : TL.ops.name[S.op[e]];
    }
    if (svg.id === "memory-chart") state.ticks = shown;
    if (state.step >= lo && state.step < hi)
      node("line", { x1: x(state.step), x2: x(state.step), y1: M.top, y2: H - M.bottom, class: "marker" }, svg);
    const hit = node("rect", { x: M.left, y: M.top, width: W - M.left - M.right, height: H - M.top - M.bottom,
      fill: "transparent", class: "hit" }, svg);
    const at = (event) => {
      const r = svg.getBoundingClientRect(), px = ((event.clientX - r.left) / r.width) * W;
      return Math.max(lo, Math.min(hi - 1, lo + Math.round(((px - M.left) / (W - M.left - M.right)) * (span - 1))));
    };
    hit.addEventListener("pointermove", (event) => tip(at(event), event));
    hit.addEventListener("pointerleave", () => { const t = $("tooltip"); if (t.dataset.kind === "memory") t.hidden = true; });
    Rp.dragZoom(hit, at, zoom, (e) => pick(e, true));
  }

  /* Show executed phases [lo, hi) (at least two) in both charts. */
  function zoom(lo, hi) {
    lo = Math.max(0, Math.min(E - 2, lo));
    state.view = { lo, hi: Math.max(lo + 2, Math.min(E, hi)) };
    render();
  }

  function path(x, y, values) {
    let d = "";
    for (let e = state.view.lo; e < state.view.hi; e++) d += (d ? "L" : "M") + x(e).toFixed(1) + "," + y(values[e]).toFixed(1);
    return d;
  }

  /* The selected tile's live bytes stacked by category, the budget labelled. */
  function chart() {
    const series = state.series, total = new Float64Array(E), { lo, hi } = state.view;
    for (let c = 0; c < C; c++) for (let e = 0; e < E; e++) total[e] += series[c][e];
    const budget = Number.isFinite(TL.budget) ? TL.budget : 0;
    const svg = $("memory-chart");
    frame(svg, 240, Math.max(1, budget, ...total), (x, y, right) => {
      const below = new Float64Array(E);
      for (let c = 0; c < C; c++) {
        let d = "";
        for (let e = lo; e < hi; e++) d += (e > lo ? "L" : "M") + x(e).toFixed(1) + "," + y(below[e] + series[c][e]).toFixed(1);
        for (let e = hi - 1; e >= lo; e--) d += "L" + x(e).toFixed(1) + "," + y(below[e]).toFixed(1);
        node("path", { d: d + "Z", fill: COLOURS[c], "fill-opacity": 0.85, "data-category": TL.categories[c] }, svg);
        for (let e = lo; e < hi; e++) below[e] += series[c][e];
      }
      if (budget) {
        node("line", { x1: x(lo), x2: right, y1: y(budget), y2: y(budget), class: "budget" }, svg);
        node("text", { x: right, y: y(budget) + 13, class: "tick", "text-anchor": "end" }, svg).textContent =
          "budget " + unit(budget);
      }
    }, (e, event) => tooltip(e, total, event));
  }

  /* The selected tile's free bytes (shaded) and largest hole (a line). */
  function freeChart() {
    const { free, largest } = state.holes, svg = $("memory-free-chart");
    frame(svg, 160, Math.max(1, ...free), (x, y) => {
      node("path", { d: path(x, y, free) + `L${x(state.view.hi - 1).toFixed(1)},${y(0)}L${x(state.view.lo).toFixed(1)},${y(0)}Z`,
        class: "free", "data-series": "free" }, svg);
      node("path", { d: path(x, y, largest), class: "hole", "data-series": "largest_hole" }, svg);
    }, freeTooltip);
  }

  function tipTable(rows) {
    const table = document.createElement("table");
    for (const [label, value, swatch, field] of rows) {
      const tr = table.insertRow(), th = document.createElement("th");
      if (swatch) { const i = document.createElement("i"); i.style.cssText = "--swatch:" + swatch; th.append(i); }
      th.append(label);
      tr.append(th);
      const td = tr.insertCell();
      td.className = "num";
      td.textContent = value;
      if (field) td.dataset.field = field;
    }
    return table;
  }

  function tipHead(e) {
    const div = (text, field) => { const n = document.createElement("div"); n.textContent = text; if (field) n.dataset.field = field; return n; };
    const title = div(`Phase ${S.phase[e]}${S.iteration[e] === null ? "" : ", iteration " + S.iteration[e]} \u00b7 ${S.program[e]}`);
    title.className = "tt-title";
    return [title, div(opName(S.op[e]), "op")];
  }

  function tooltip(e, total, event) {
    const rows = TL.categories.map((name, c) => [name, Rp.bytes(state.series[c][e]), COLOURS[c]]);
    rows.push([`Tile ${state.tile} in all`, Rp.bytes(total[e]), null, "live"]);
    Rp.showTip($("tooltip"), "memory", [...tipHead(e), tipTable(rows)], event);
  }

  function freeTooltip(e, event) {
    const { free, largest } = state.holes, worst = S.most_fragmented;
    Rp.showTip($("tooltip"), "memory", [...tipHead(e), tipTable([
      [`Tile ${state.tile} free`, Rp.bytes(free[e]), null, "free"],
      ["largest hole", Rp.bytes(largest[e]), null, "largest_hole"],
      ["fragmentation", fragmentation(free[e], largest[e]).toFixed(3), null, "fragmentation"],
      ["Device free", Rp.bytes(S.free[e]), null, "device_free"],
      ["device fragmentation", S.fragmentation[e].toFixed(3), null, "device_fragmentation"],
      [`most fragmented: tile ${worst.tile[e]}`, worst.fragmentation[e].toFixed(3), null, "most_fragmented"],
    ])], event);
  }

  function table(id, head, rows) {
    const t = $(id);
    t.replaceChildren();
    const tr = t.insertRow();
    for (const h of head) { const th = document.createElement("th"); th.textContent = h; tr.append(th); }
    for (const row of rows) {
      const r = t.insertRow();
      for (const [text, cls] of row) { const td = r.insertCell(); td.textContent = text; if (cls) td.className = cls; }
    }
  }

  function liveNow() {
    const phase = S.phase[state.step], ids = [];
    let sum = 0;
    for (let k = start[state.tile]; k < start[state.tile + 1]; k++) {
      const i = order[k];
      if (A.kind[i] < C && live(i, phase)) { ids.push(i); sum += A.size[i]; }
    }
    ids.sort((a, b) => A.size[b] - A.size[a] || A.address[a] - A.address[b]);
    $("live-title").textContent = `Live on tile ${state.tile} at phase ${phase}` +
      (S.iteration[state.step] === null ? "" : `, iteration ${S.iteration[state.step]}`) +
      `: ${ids.length} allocations, ${Rp.bytes(sum)}`;
    $("live-title").dataset.sum = String(sum);
    const f = state.holes.free[state.step], hole = state.holes.largest[state.step];
    $("free-now").textContent = `Free ${Rp.bytes(f)}, largest hole ${Rp.bytes(hole)}, fragmentation ` +
      fragmentation(f, hole).toFixed(3);
    table("memory-live", ["allocation", "tensor", "shape", "kind", "made by", "bytes", "address"],
      ids.slice(0, ROWS_SHOWN).map((i) => [[strings[A.name[i]]], [strings[A.tensor[i]] || "\u2014"],
        [strings[A.shape[i]] ? Rp.shapeText(strings[A.shape[i]]) : "\u2014"], [kindNames[A.kind[i]]], [opName(A.op[i])],
        [A.size[i].toLocaleString("en-US"), "num"], ["0x" + A.address[i].toString(16).toUpperCase(), "num"]]));
    if (ids.length > ROWS_SHOWN)
      $("memory-live").createCaption().textContent = `the ${ROWS_SHOWN} largest of ${ids.length}`;
  }

  function peakTable() {
    const t = state.tile, P2 = TL.tile_peaks, cat = P2.peak_by_category[t];
    table("memory-peak-table", ["", "bytes"], [
      [["peak (phase " + P2.peak_phase[t] + (P2.peak_iteration[t] === null ? "" : ", iteration " +
        P2.peak_iteration[t]) + ")"], [Rp.bytes(P2.peak_bytes[t]), "num"]],
      ...TL.categories.map((name, c) => [["\u2003" + name], [Rp.bytes(cat[c]), "num"]]),
      [["free then"], [Rp.bytes(P2.free_at_peak[t]), "num"]],
      [["largest hole then"], [Rp.bytes(P2.largest_hole_at_peak[t]), "num"]],
      [["fragmentation (1 \u2212 hole / free)"], [P2.fragmentation_at_peak[t].toFixed(3), "num"]],
      [["support: code, descriptors, exchange tables"], [[TL.support.code[t], TL.support.descriptors[t],
        TL.support.exchange_tables[t]].map((v) => v.toLocaleString("en-US")).join(", ") + " B", "num"]],
    ]);
  }

  function opsTable() {
    const n = TL.ops.kind.length, ids = Array.from({ length: n }, (_, i) => i);
    ids.sort((a, b) => TL.ops.peak_bytes[b] - TL.ops.peak_bytes[a]);
    table("memory-ops", ["compiler op", "peak", "at phase", "residual after its last phase"],
      ids.slice(0, 20).map((i) => [[opName(i)], [Rp.bytes(TL.ops.peak_bytes[i]), "num"],
        [TL.ops.peak_step[i] === null ? "\u2014" : String(S.phase[TL.ops.peak_step[i]]), "num"],
        [Rp.bytes(TL.ops.residual_bytes[i]), "num"]]));
  }

  /* The device search: every tile holding an allocation whose name or
     tensor contains the text, with how many, the phases their lives cover
     and their bytes; a row selects the tile and picks the first executed
     phase a match is live at. */
  let found = [];
  function search(query) {
    const q = query.trim().toLowerCase(), box = $("memory-found");
    found = [];
    if (!q) { box.replaceChildren(); $("memory-found-summary").textContent = ""; return found; }
    const hit = strings.map((text) => String(text).toLowerCase().includes(q));
    const byTile = new Map();
    let count = 0;
    for (let i = 0; i < A.tile.length; i++) {
      if (!hit[A.name[i]] && !hit[A.tensor[i]]) continue;
      count++;
      let r = byTile.get(A.tile[i]);
      if (!r) byTile.set(A.tile[i], r = { tile: A.tile[i], ids: [], first: Infinity, last: -1, bytes: 0 });
      r.ids.push(i);
      r.first = Math.min(r.first, A.first[i]);
      r.last = Math.max(r.last, A.last[i] < 0 ? Infinity : A.last[i]);
      r.bytes += A.size[i];
    }
    found = Array.from(byTile.values()).sort((a, b) => a.tile - b.tile);
    $("memory-found-summary").textContent = `${count.toLocaleString("en-US")} allocation${count === 1 ? "" : "s"} on ` +
      `${found.length.toLocaleString("en-US")} tile${found.length === 1 ? "" : "s"}`;
    $("memory-found-summary").dataset.tiles = String(found.length);
    table("memory-found", ["tile", "allocations", "phases", "bytes", "first name"], []);
    for (const r of found.slice(0, ROWS_SHOWN)) {
      const tr = box.insertRow(), button = document.createElement("button");
      tr.dataset.tile = String(r.tile);
      button.type = "button";
      button.className = "link";
      button.textContent = String(r.tile);
      button.addEventListener("click", () => open(r));
      tr.insertCell().append(button);
      for (const [text, cls] of [[r.ids.length.toLocaleString("en-US"), "num"],
        [r.first + "\u2013" + (r.last === Infinity ? "end" : r.last), "num"], [Rp.bytes(r.bytes), "num"],
        [strings[A.name[r.ids[0]]], ""]]) {
        const td = tr.insertCell();
        td.textContent = text;
        td.className = cls;
      }
    }
    if (found.length > ROWS_SHOWN) box.createCaption().textContent = `the first ${ROWS_SHOWN} tiles of ${found.length}`;
    return found;
  }

  /* Select a result's tile at the first executed phase one of its matches is live at. */
  function open(r) {
    let first = -1;
    for (let e = 0; e < E && first < 0; e++) if (r.ids.some((i) => live(i, S.phase[e]))) first = e;
    if (P) P.selectTile(r.tile); else select(r.tile);
    if (first >= 0) pick(first, true);
    $("memory").scrollIntoView({ block: "start" });
  }
  $("memory-search").addEventListener("input", (event) => search(event.target.value));

  const strip = { canvas: $("memory-tiles"), left: 70 };
  function drawStrip() {
    const { ctx, w, h } = Rp.fitCanvas(strip.canvas, "11px system-ui, sans-serif");
    const peaks = TL.tile_peaks.peak_bytes, max = Math.max(1, ...peaks), W = w - strip.left - 12;
    const bw = W / NT;
    ctx.fillStyle = "#5d6773";
    ctx.textAlign = "right";
    ctx.fillText("tile peaks", strip.left - 6, h / 2);
    for (let t = 0; t < NT; t++) {
      const v = (peaks[t] / max) * (h - 6);
      ctx.fillStyle = t === state.tile ? "#c62f2f" : "#3d6fb4";
      ctx.fillRect(strip.left + t * bw, h - v, Math.max(1, bw - (bw > 3 ? 1 : 0)), v);
    }
  }
  strip.canvas.addEventListener("click", (event) => {
    const p = Rp.localPoint(strip.canvas, event), W = strip.canvas.clientWidth - strip.left - 12;
    const t = Math.floor(((p.x - strip.left) / W) * NT);
    if (t >= 0 && t < NT) (P ? P.selectTile(t) : select(t));
  });

  /* Pick an executed phase; from a click, pin the run profile's step of it (the last invocation's). */
  function pick(e, pinStep) {
    state.step = Math.max(0, Math.min(E - 1, e));
    if (pinStep && P && S.program[state.step] === "main") {
      const i = P.stepOf(S.phase[state.step], S.iteration[state.step] === null ? undefined : S.iteration[state.step]);
      if (i >= 0) P.pin(i, S.phase[state.step]);
    }
    render();
  }

  function load(tile) {
    state.series = seriesOf(tile);
    state.holes = holesOf(tile);
  }

  function select(t) {
    state.tile = Math.max(0, Math.min(NT - 1, t));
    load(state.tile);
    $("memory-tile").value = String(state.tile);
    render();
  }

  function render() {
    $("memory-selected").textContent = `tile ${state.tile} \u00b7 phase ${S.phase[state.step]}`;
    chart();
    freeChart();
    drawStrip();
    peakTable();
    liveNow();
  }

  /* The last invocation's executed phase of a run-profile step at a phase (its own, or its exchange half). */
  function executedOf(step, phase) {
    let found = -1, half = -1;
    for (let e = 0; e < E; e++) {
      if (S.program[e] !== "main" || S.iteration[e] !== step.iteration) continue;
      if (S.phase[e] === step.phase) found = e;
      if (S.phase[e] === phase) half = e;
    }
    return half >= 0 ? half : found;
  }

  $("memory-legend").replaceChildren(...TL.categories.map((name, c) => {
    const li = document.createElement("li"), i = document.createElement("i");
    i.style.cssText = "--swatch:" + COLOURS[c];
    li.append(i, name);
    return li;
  }));
  const pk = TL.peak;
  $("memory-summary").textContent = `${TL.events.toLocaleString("en-US")} allocation events over ${E} executed ` +
    `phases; the fullest tile, ${pk.tile}, peaks at ${Rp.bytes(pk.bytes)} at phase ${pk.phase}` +
    (pk.iteration === null ? "" : `, iteration ${pk.iteration}`) + " (" +
    TL.categories.map((n, c) => n + " " + pk.by_category[c].toLocaleString("en-US")).join(", ") + ")";
  $("memory-tile").max = String(NT - 1);
  $("memory-tile").addEventListener("change", () => {
    const t = parseInt($("memory-tile").value, 10);
    if (Number.isFinite(t)) (P ? P.selectTile(t) : select(t));
  });
  $("memory-show-init").addEventListener("change", (event) => { state.showInit = event.target.checked; state.view = defaultView(); render(); });
  $("memory-reset-zoom").addEventListener("click", () => { state.view = defaultView(); render(); });
  $("memory-peak").addEventListener("click", () => { if (P) P.selectTile(pk.tile); else select(pk.tile); pick(pk.step, true); });
  window.addEventListener("resize", () => { chart(); freeChart(); drawStrip(); });
  if (P) {
    P.follow(({ tile, step, phase }) => {
      if (tile >= 0 && tile !== state.tile) { state.tile = tile; load(tile); }
      if (step >= 0) { const e = executedOf(P.profile.steps[step], phase); if (e >= 0) state.step = e; }
      $("memory-tile").value = String(state.tile);
      render();
    });
    const t = P.selectedTile(), pinned = P.pinned();
    if (t !== null) state.tile = t;
    if (pinned !== null) { const e = executedOf(P.profile.steps[pinned], P.phase()); if (e >= 0) state.step = e; }
  }
  load(state.tile);
  $("memory-tile").value = String(state.tile);
  opsTable();
  render();
  window.runMemory = Object.freeze({
    state: () => ({ tile: state.tile, step: state.step, phase: S.phase[state.step] }),
    /** The executed phases shown, [lo, hi), and zooming to a range as a drag would. */
    view: () => Object.assign({}, state.view),
    zoom: (lo, hi) => zoom(lo, hi),
    /** The memory chart's phase ticks: executed phase index, phase, iteration and label. */
    ticks: () => state.ticks.map((e) => ({ index: e, phase: S.phase[e], iteration: S.iteration[e],
      label: Rp.placeText(S.phase[e], S.iteration[e]) })),
    liveSum: () => Number($("live-title").dataset.sum),
    seriesAt: (e) => state.series.reduce((sum, s) => sum + s[e], 0),
    holes: () => ({ free: Array.from(state.holes.free), largest: Array.from(state.holes.largest) }),
    search: (q) => search(q).map((r) => ({ tile: r.tile, count: r.ids.length, first: r.first,
      last: r.last === Infinity ? -1 : r.last })),
    open: (k) => open(found[k]),
  });
})();
