/* report.js: the behaviour of the run-profile report.  It reads the device's
   cycle report (run-profile.json, embedded in the page as
   <script id="run-profile-data">) and shows the totals with each class's
   share, a step timeline of stacked bars (compute, sync, exchange, host,
   control) drawn on a canvas - only the visible window, one bar per step or,
   when steps outnumber pixels, the longest step of each pixel column - with
   hover, click-to-pin (Escape unpins), wheel zoom, drag pan and an overview
   strip (a drag across it zooms to that range; Fit shows every step), x ticks
   by the reports' one rule (ipuReport.axisTicks, labelled by placeText), and a per-tile strip of compute and wait cycles with the slowest
   tile.  Counts print in the reports' one format (ipuReport.count: "10,018,721",
   ms: "6,679.147 ms"), tile and op numbers as they are; only shares are
   derived.  Steps are named by their package phase (the
   numbering every report of the run shares) and Repeat iteration, with the
   compiler ops they lower; the pinned step and the tile clicked in the strip
   are kept in the URL hash (#tile=T&phase=P&iteration=I) and carried by the
   links to the run's other reports.  The page opens on the hash's place, or
   on the step and tile of the run-time memory peak.  A run that a device
   fault stopped shows the steps it completed, says so above them, and
   opens on the last of them (the fault's own step never completed).
   window.runProfile
   exposes the layout for tests.
   fail, fitCanvas, localPoint and clamp come from reports/common/common.js
   (window.ipuReport), inlined before this script. */
(function () {
  "use strict";

  const CLASSES = ["compute", "sync", "exchange", "host", "control"];
  const LABELS = { compute: "Compute", sync: "Sync", exchange: "Exchange", host: "Host", control: "Control" };
  const FONT = "12px system-ui, -apple-system, 'Segoe UI', Roboto, 'DejaVu Sans', sans-serif";
  const MARGIN = { left: 76, right: 12 };

  const $ = (id) => document.getElementById(id);
  const { clamp, localPoint } = window.ipuReport;

  /* ---------- small helpers ---------- */

  function h(tag, props, children) {
    const node = document.createElement(tag);
    if (props) {
      for (const [key, value] of Object.entries(props)) {
        if (key === "text") node.textContent = value;
        else if (key === "className") node.className = value;
        else if (key === "style") node.style.cssText = value;
        else if (key === "dataset") Object.assign(node.dataset, value);
        else if (key === "onclick") node.addEventListener("click", value);
        else node.setAttribute(key, value);
      }
    }
    for (const child of children || []) if (child != null) node.append(child);
    return node;
  }

  const isNum = (v) => typeof v === "number" && Number.isFinite(v);
  /* A count in the reports' one format; an index (tile, op) as it is. */
  const show = window.ipuReport.count;
  const id = (v) => (isNum(v) ? String(v) : "\u2014");

  function percent(part, whole) {
    if (!isNum(part) || !isNum(whole) || whole <= 0) return "\u2014";
    const p = (100 * part) / whole;
    if (part > 0 && p < 0.05) return "<0.1%";
    return p.toFixed(1) + "%";
  }

  function niceStep(range, count) {
    const raw = range / Math.max(1, count);
    const power = Math.pow(10, Math.floor(Math.log10(raw)));
    const unit = raw / power;
    const nice = unit <= 1 ? 1 : unit <= 2 ? 2 : unit <= 5 ? 5 : 10;
    return Math.max(1, nice * power);
  }

  const fail = (message) => window.ipuReport.fail("run-profile report", message);
  /* Size a canvas's backing store to its CSS box; returns the 2D context in CSS pixels. */
  const fitCanvas = (canvas) => window.ipuReport.fitCanvas(canvas, FONT);

  /* ---------- the data ---------- */

  let profile;
  try {
    profile = JSON.parse($("run-profile-data").textContent);
  } catch (error) {
    fail("The embedded profile is not valid JSON: " + error.message);
    return;
  }
  if (!profile || typeof profile !== "object" || Array.isArray(profile)) {
    fail("The embedded profile is not a JSON object.");
    return;
  }

  const css = getComputedStyle(document.documentElement);
  const colour = (name, fallback) => css.getPropertyValue("--" + name).trim() || fallback;
  const COLOR = {};
  for (const c of CLASSES) COLOR[c] = colour("c-" + c, "#888");
  COLOR.wait = colour("c-wait", "#eb5");
  const INK = colour("ink", "#222"), MUTED = colour("muted", "#666"), GRID = colour("grid", "#eee");
  const LINE = colour("line", "#ccc"), ACCENT = colour("accent", "#c33"), HOVER = colour("hover", "rgba(0,0,0,.08)");

  const steps = Array.isArray(profile.steps) ? profile.steps.map((s) => (s && typeof s === "object" ? s : {})) : [];
  const N = steps.length;
  const totals = profile.totals && typeof profile.totals === "object" ? profile.totals : {};
  const tilesIn = profile.tiles && typeof profile.tiles === "object" ? profile.tiles : {};
  const tileCompute = Array.isArray(tilesIn.compute) ? tilesIn.compute : [];
  const tileWait = Array.isArray(tilesIn.wait) ? tilesIn.wait : [];
  const NT = Math.max(tileCompute.length, tileWait.length);

  /* Per-step class cycles in typed arrays (drawing reads only these). */
  const parts = CLASSES.map(() => new Float64Array(N));
  const stacked = new Float64Array(N);
  let longest = -1;
  for (let i = 0; i < N; i++) {
    const s = steps[i];
    for (let c = 0; c < CLASSES.length; c++) {
      const v = s[CLASSES[c]];
      const x = isNum(v) && v > 0 ? v : 0;
      parts[c][i] = x;
      stacked[i] += x;
    }
    if (longest < 0 || stepCycles(i) > stepCycles(longest)) longest = i;
  }
  function stepCycles(i) {
    const v = steps[i].cycles;
    return isNum(v) ? v : stacked[i];
  }
  const positionOf = (i) => ({ phase: steps[i].phase, iteration: steps[i].iteration });
  const stepLabel = (i) => (isNum(steps[i].index) ? String(steps[i].index) : String(i));
  /* Compiler op labels ("op 5 matmul hidden") from the profile's ops, when it has them. */
  const ops = Array.isArray(profile.ops) ? profile.ops : [];
  const opLabel = (i) => (isNum(i) ? "op " + i + (typeof ops[i] === "string" ? " " + ops[i] : "") : "\u2014");
  const phaseText = (s) => (isNum(s.phase) ? "phase " + s.phase + (isNum(s.iteration) ? ", iteration " + s.iteration : "")
    : "");
  /* The executed step of a phase (and iteration, when given): the first that matches, else the first after.
     A step is its control op's run, so it holds both of the op's phases, 2g and 2g + 1. */
  function stepOfPlace(phase, iteration) {
    const op = phase - (phase % 2);
    let after = -1;
    for (let i = 0; i < N; i++) {
      if (steps[i].phase === op && (iteration === undefined || steps[i].iteration === iteration)) return i;
      if (after < 0 && steps[i].phase > op) after = i;
    }
    return after;
  }

  /* Program segments, for the labels along the top of the timeline. */
  const segments = [];
  for (let i = 0; i < N; i++) {
    const name = typeof steps[i].program === "string" ? steps[i].program : "";
    if (!segments.length || segments[segments.length - 1].program !== name) segments.push({ program: name, start: i });
  }

  /* ---------- header and totals ---------- */

  function renderHeader() {
    const bits = [N + (N === 1 ? " step" : " steps"), NT + (NT === 1 ? " tile" : " tiles")];
    if (isNum(profile.clock_hz)) bits.push("clock " + show(profile.clock_hz) + " Hz");
    $("meta").textContent = bits.join(" \u00b7 ");
    const f = profile.fault;
    if (f && typeof f === "object") {
      $("fault").hidden = false;
      $("fault").textContent = "A device fault stopped this run: " + f.kind + " on tile " + f.tile + " at phase " +
        f.phase + (isNum(f.iteration) ? ", iteration " + f.iteration : "") + (f.op ? " (" + f.op.label + ")" : "") +
        ". The " + show(N) + " steps before it are shown.";
    }
    document.title = "Run profile \u2014 " + show(profile.cycles) + " cycles";
  }

  function renderTotals() {
    const cycles = profile.cycles;
    const cards = $("total-cards");
    cards.replaceChildren(
      h("div", { className: "card", dataset: { total: "cycles" } }, [
        h("span", { className: "label", text: "Cycles" }),
        h("span", { className: "value", dataset: { field: "cycles" }, text: show(cycles) }),
      ]),
      h("div", { className: "card wide", dataset: { total: "ms" } }, [
        h("span", { className: "label", text: "Time" }),
        h("span", { className: "value", dataset: { field: "ms" }, text: window.ipuReport.ms(profile.ms) }),
      ]),
      ...CLASSES.map((c) =>
        h("div", { className: "card", style: "--swatch:" + COLOR[c], dataset: { total: c } }, [
          h("span", { className: "label", text: LABELS[c] }),
          h("span", { className: "value", dataset: { field: c }, text: show(totals[c]) }),
          h("span", { className: "share", dataset: { field: c + "-share" }, text: percent(totals[c], cycles) + " of cycles" }),
        ])
      )
    );
    const bar = $("share-bar");
    bar.replaceChildren(
      ...CLASSES.filter((c) => isNum(totals[c]) && totals[c] > 0 && isNum(cycles) && cycles > 0).map((c) =>
        h("span", {
          style: "width:" + (100 * totals[c]) / cycles + "%;background:" + COLOR[c],
          title: LABELS[c] + ": " + show(totals[c]) + " cycles (" + percent(totals[c], cycles) + ")",
        })
      )
    );
    let sum = 0;
    for (const c of CLASSES) if (isNum(totals[c])) sum += totals[c];
    if (isNum(cycles) && sum !== cycles) {
      $("totals").append(h("p", { className: "hint", text: "The classes add up to " + sum + " cycles, not " + cycles + "." }));
    }
  }

  function renderLegends() {
    $("step-legend").replaceChildren(
      ...CLASSES.map((c) => h("li", null, [h("i", { style: "--swatch:" + COLOR[c] }), LABELS[c]]))
    );
    $("tile-legend").replaceChildren(
      h("li", null, [h("i", { style: "--swatch:" + COLOR.compute }), "Compute"]),
      h("li", null, [h("i", { style: "--swatch:" + COLOR.wait }), "Wait (for the slowest tile of each step)"])
    );
  }

  /* ---------- tooltip ---------- */

  const tooltip = $("tooltip");

  function showTooltip(content, clientX, clientY) {
    tooltip.replaceChildren(...content);
    tooltip.hidden = false;
    const pad = 14, vw = document.documentElement.clientWidth, vh = document.documentElement.clientHeight;
    const tw = tooltip.offsetWidth, th = tooltip.offsetHeight;
    let x = clientX + pad, y = clientY + pad;
    if (x + tw > vw - 4) x = Math.max(4, clientX - pad - tw);
    if (y + th > vh - 4) y = Math.max(4, clientY - pad - th);
    tooltip.style.left = x + "px";
    tooltip.style.top = y + "px";
  }

  function hideTooltip(kind) {
    if (!kind || tooltip.dataset.kind === kind) {
      tooltip.hidden = true;
      tooltip.dataset.kind = "";
    }
  }

  function stepTable(i) {
    const s = steps[i];
    const total = stepCycles(i);
    const rows = [
      h("tr", null, [h("th", { text: "Cycles" }), h("td", { className: "num", dataset: { field: "cycles" }, text: show(s.cycles) }), h("td")]),
    ];
    for (const c of CLASSES) {
      rows.push(
        h("tr", null, [
          h("th", null, [h("i", { style: "--swatch:" + COLOR[c] }), LABELS[c]]),
          h("td", { className: "num", dataset: { field: c }, text: show(s[c]) }),
          h("td", { className: "pct", text: percent(s[c], total) }),
        ])
      );
    }
    rows.push(
      h("tr", null, [h("th", { text: "Slowest compute tile" }), h("td", { className: "num", dataset: { field: "compute_tile" }, text: id(s.compute_tile) }), h("td")]),
      h("tr", null, [h("th", { text: "Compiler op" }), h("td", { dataset: { field: "compiler_op" },
        text: opLabel(s.compiler_op) }), h("td")]),
      h("tr", null, [h("th", { text: "Exchange of" }), h("td", { dataset: { field: "exchange_compiler_op" },
        text: opLabel(s.exchange_compiler_op) }), h("td")]),
      h("tr", null, [h("th", { text: "Bytes sent \u00b7 received" }), h("td", { className: "num" }, [
        h("span", { dataset: { field: "sent_bytes" }, text: isNum(s.sent_bytes) ? show(s.sent_bytes) : "\u2014" }),
        " \u00b7 ",
        h("span", { dataset: { field: "received_bytes" }, text: isNum(s.received_bytes) ? show(s.received_bytes) : "\u2014" }),
      ]), h("td")]),
      h("tr", null, [h("th", { text: "Program \u00b7 control op" }), h("td", { className: "num" }, [
        h("span", { dataset: { field: "program" }, text: typeof s.program === "string" ? s.program : "\u2014" }),
        " \u00b7 ",
        h("span", { dataset: { field: "op" }, text: id(s.op) }),
      ]), h("td")])
    );
    return h("table", null, [h("tbody", null, rows)]);
  }

  function stepTitle(i) {
    const s = steps[i];
    return [
      "Step ",
      h("span", { dataset: { field: "index" }, text: stepLabel(i) }),
      " \u00b7 ",
      h("span", { dataset: { field: "phase" }, text: phaseText(s) }),
      " \u00b7 ",
      h("span", { dataset: { field: "kind" }, text: typeof s.kind === "string" ? s.kind : "?" }),
      isNum(s.compiler_op) ? " \u00b7 " + opLabel(s.compiler_op) : "",
    ];
  }

  /* ---------- step timeline ---------- */

  const T = {
    canvas: $("steps-canvas"),
    top: 22, bottom: 24,
    start: 0, span: Math.max(1, N),
    w: 0, h: 0,
    mode: "step", pps: 1, first: 0, last: -1, rep: null, yTop: 1,
    hover: -1, pinned: -1, drag: null, suppressClick: false,
  };

  const plotWidth = () => Math.max(1, T.w - MARGIN.left - MARGIN.right);

  function clampView() {
    if (N === 0) { T.start = 0; T.span = 1; return; }
    const minSpan = Math.min(N, Math.max(1, plotWidth() / 60));
    T.span = clamp(T.span, minSpan, N);
    T.start = clamp(T.start, 0, N - T.span);
  }

  /* Works out which steps are visible and where; drawing and hit tests share it. */
  function layoutSteps() {
    T.w = T.canvas.clientWidth;
    T.h = T.canvas.clientHeight;
    clampView();
    const W = plotWidth();
    T.pps = W / T.span;
    T.first = Math.max(0, Math.floor(T.start));
    T.last = Math.min(N - 1, Math.ceil(T.start + T.span) - 1);
    if (T.pps >= 1) {
      T.mode = "step";
      T.rep = null;
    } else {
      T.mode = "column";
      const cols = Math.ceil(W);
      const rep = new Int32Array(cols).fill(-1), count = new Int32Array(cols);
      const lo = new Int32Array(cols).fill(-1), hi = new Int32Array(cols).fill(-1);
      for (let i = T.first; i <= T.last; i++) {
        const col = Math.floor((i + 0.5 - T.start) * T.pps);
        if (col < 0 || col >= cols) continue;
        count[col]++;
        if (lo[col] < 0) lo[col] = i;
        hi[col] = i;
        if (rep[col] < 0 || stepCycles(i) > stepCycles(rep[col])) rep[col] = i;
      }
      T.rep = rep; T.count = count; T.lo = lo; T.hi = hi;
    }
    let max = 0;
    for (let i = T.first; i <= T.last; i++) if (stacked[i] > max) max = stacked[i];
    const step = niceStep(max || 1, 4);
    T.yStep = step;
    T.yTop = Math.max(step, Math.ceil((max || 1) / step) * step);
    T.canvas.dataset.firstStep = String(T.first);
    T.canvas.dataset.lastStep = String(T.last);
    T.canvas.dataset.mode = T.mode;
  }

  /* The slot of a step: x and width in canvas pixels, and which step the slot shows. */
  function slotOf(i) {
    if (i < T.first || i > T.last) return null;
    if (T.mode === "step") {
      return { x: MARGIN.left + (i - T.start) * T.pps, w: T.pps, shows: i };
    }
    const col = Math.floor((i + 0.5 - T.start) * T.pps);
    if (col < 0 || col >= T.rep.length) return null;
    return { x: MARGIN.left + col, w: 1, shows: T.rep[col], col };
  }

  function stepAtX(x) {
    const px = x - MARGIN.left;
    if (N === 0 || px < 0 || px >= plotWidth()) return -1;
    if (T.mode === "step") {
      const i = Math.floor(T.start + px / T.pps);
      return i >= T.first && i <= T.last ? i : -1;
    }
    const col = Math.floor(px);
    for (let d = 0; d < 3; d++) {
      for (const c of [col - d, col + d]) if (c >= 0 && c < T.rep.length && T.rep[c] >= 0) return T.rep[c];
    }
    return -1;
  }

  function drawSteps() {
    layoutSteps();
    const { ctx, w, h: height } = fitCanvas(T.canvas);
    const W = plotWidth(), H = Math.max(1, height - T.top - T.bottom);
    const base = T.top + H, left = MARGIN.left;
    if (N === 0) {
      ctx.fillStyle = MUTED;
      ctx.textAlign = "center";
      ctx.fillText("No steps recorded.", w / 2, height / 2);
      updateRange();
      return;
    }

    // y grid and labels
    ctx.textAlign = "right";
    ctx.textBaseline = "middle";
    for (let v = 0; v <= T.yTop + 1e-9; v += T.yStep) {
      const y = Math.round(base - (v / T.yTop) * H) + 0.5;
      ctx.strokeStyle = v === 0 ? LINE : GRID;
      ctx.beginPath(); ctx.moveTo(left, y); ctx.lineTo(left + W, y); ctx.stroke();
      ctx.fillStyle = MUTED;
      ctx.fillText(show(v), left - 6, y);
    }
    ctx.save();
    ctx.translate(14, T.top + H / 2);
    ctx.rotate(-Math.PI / 2);
    ctx.textAlign = "center";
    ctx.fillText("cycles", 0, 0);
    ctx.restore();

    ctx.save();
    ctx.beginPath();
    ctx.rect(left, 0, W, height);
    ctx.clip();

    // hovered slot band
    if (T.hover >= 0) {
      const slot = slotOf(T.hover);
      if (slot) {
        ctx.fillStyle = HOVER;
        ctx.fillRect(slot.x, T.top, Math.max(slot.w, 3), H);
      }
    }

    // the bars, one class at a time
    const scale = H / T.yTop;
    const slotIndex = [], slotX = [], slotW = [];
    if (T.mode === "step") {
      const gap = T.pps >= 5 ? 1 : 0;
      for (let i = T.first; i <= T.last; i++) {
        slotIndex.push(i); slotX.push(left + (i - T.start) * T.pps); slotW.push(T.pps - gap);
      }
    } else {
      for (let c = 0; c < T.rep.length; c++) {
        if (T.rep[c] >= 0) { slotIndex.push(T.rep[c]); slotX.push(left + c); slotW.push(1); }
      }
    }
    const acc = new Float64Array(slotIndex.length);
    for (let c = 0; c < CLASSES.length; c++) {
      ctx.fillStyle = COLOR[CLASSES[c]];
      const part = parts[c];
      for (let k = 0; k < slotIndex.length; k++) {
        const v = part[slotIndex[k]];
        if (v <= 0) continue;
        const y0 = acc[k];
        acc[k] += v * scale;
        ctx.fillRect(slotX[k], base - acc[k], slotW[k], acc[k] - y0);
      }
    }
    // a step too short to see still gets one pixel, in its largest class's colour
    for (let k = 0; k < slotIndex.length; k++) {
      if (acc[k] > 0 && acc[k] < 1) {
        const i = slotIndex[k];
        let best = 0;
        for (let c = 1; c < CLASSES.length; c++) if (parts[c][i] > parts[best][i]) best = c;
        ctx.fillStyle = COLOR[CLASSES[best]];
        ctx.fillRect(slotX[k], base - 1, slotW[k], 1);
      }
    }

    // program boundaries and names
    ctx.textAlign = "left";
    ctx.textBaseline = "alphabetic";
    let seg = 0, lo = 0, hi = segments.length - 1, labelEnd = 0;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      if (segments[mid].start <= T.first) { seg = mid; lo = mid + 1; } else hi = mid - 1;
    }
    for (let drawn = 0; seg < segments.length && segments[seg].start <= T.last && drawn < 100; seg++, drawn++) {
      const s = segments[seg];
      const x = left + (s.start - T.start) * T.pps;
      if (s.start > T.first) {
        ctx.strokeStyle = MUTED;
        ctx.setLineDash([3, 3]);
        ctx.beginPath(); ctx.moveTo(Math.round(x) + 0.5, T.top - 4); ctx.lineTo(Math.round(x) + 0.5, base); ctx.stroke();
        ctx.setLineDash([]);
      }
      // a name goes where its segment has room for it
      const at = Math.max(left, x) + 4;
      const end = seg + 1 < segments.length ? left + (segments[seg + 1].start - T.start) * T.pps : left + W;
      if (s.program && at >= labelEnd && Math.min(end, left + W) - at >= ctx.measureText(s.program).width + 4) {
        ctx.fillStyle = MUTED;
        ctx.fillText(s.program, at, T.top - 8);
        labelEnd = at + ctx.measureText(s.program).width + 8;
      }
    }

    // the pinned step: outline and a marker above it
    if (T.pinned >= 0) {
      const slot = slotOf(T.pinned);
      if (slot) {
        const bw = Math.max(slot.w - (T.mode === "step" && T.pps >= 5 ? 1 : 0), 1);
        const barH = Math.max(stacked[T.pinned] * scale, 1);
        ctx.strokeStyle = ACCENT;
        ctx.lineWidth = 2;
        ctx.strokeRect(slot.x - 1, base - barH - 1, bw + 2, barH + 1);
        ctx.lineWidth = 1;
        const cx = slot.x + bw / 2;
        ctx.fillStyle = ACCENT;
        ctx.beginPath(); ctx.moveTo(cx - 5, T.top - 6); ctx.lineTo(cx + 5, T.top - 6); ctx.lineTo(cx, T.top); ctx.fill();
      }
    }
    ctx.restore();

    // x ticks: program positions by the reports' one rule and label
    ctx.fillStyle = MUTED;
    ctx.textAlign = "center";
    ctx.textBaseline = "top";
    T.ticks = N ? window.ipuReport.axisTicks(positionOf, T.first, T.last + 1, Math.max(1, Math.floor(W / 130))) : [];
    for (const v of T.ticks) {
      const x = left + (v + 0.5 - T.start) * T.pps;
      ctx.strokeStyle = LINE;
      ctx.beginPath(); ctx.moveTo(Math.round(x) + 0.5, base); ctx.lineTo(Math.round(x) + 0.5, base + 4); ctx.stroke();
      ctx.fillText(window.ipuReport.placeText(steps[v].phase, steps[v].iteration), x, base + 6);
    }
    updateRange();
  }

  function updateRange() {
    const text = N === 0 ? "No steps" : "Steps " + stepLabel(T.first) + "\u2013" + stepLabel(T.last) + " of " + N;
    const extra = T.mode === "column"
      ? " \u00b7 about " + Math.round(1 / T.pps) + " steps per pixel; each column shows its longest step"
      : "";
    $("step-range").textContent = text + extra;
  }

  /* ---------- overview strip ---------- */

  const O = { canvas: $("overview-canvas"), cache: null, cacheKey: "" };

  function drawOverview() {
    const { ctx, w, h: height } = fitCanvas(O.canvas);
    const left = MARGIN.left, W = Math.max(1, w - MARGIN.left - MARGIN.right);
    if (N === 0) return;
    const ratio = window.devicePixelRatio || 1;
    const key = W + "x" + height + "@" + ratio;
    if (O.cacheKey !== key) {
      const cols = Math.max(1, Math.ceil(W));
      const rep = new Int32Array(cols).fill(-1);
      for (let i = 0; i < N; i++) {
        const col = Math.min(cols - 1, Math.floor(((i + 0.5) / N) * W));
        if (rep[col] < 0 || stepCycles(i) > stepCycles(rep[col])) rep[col] = i;
      }
      // Scale to the 98th percentile of the columns, so one outlier does not
      // flatten the rest; taller columns are cut at the top.
      const heights = [];
      for (let col = 0; col < cols; col++) if (rep[col] >= 0) heights.push(stacked[rep[col]]);
      heights.sort((a, b) => a - b);
      const max = heights.length ? heights[Math.min(heights.length - 1, Math.floor(heights.length * 0.98))] : 0;
      const off = document.createElement("canvas");
      off.width = Math.round(W * ratio);
      off.height = Math.round(height * ratio);
      const o = off.getContext("2d");
      o.setTransform(ratio, 0, 0, ratio, 0, 0);
      const colW = W / N >= 1 ? W / N : 1;
      const acc = new Float64Array(cols);
      const scale = (height - 2) / (max || 1);
      for (let c = 0; c < CLASSES.length; c++) {
        o.fillStyle = COLOR[CLASSES[c]];
        for (let col = 0; col < cols; col++) {
          const i = rep[col];
          if (i < 0) continue;
          const v = Math.min(parts[c][i] * scale, height - acc[col]);
          if (v <= 0) continue;
          const x = W / N >= 1 ? (i / N) * W : col;
          o.fillRect(x, height - acc[col] - v, colW, v);
          acc[col] += v;
        }
      }
      O.cache = off;
      O.cacheKey = key;
    }
    ctx.fillStyle = GRID;
    ctx.fillRect(left, 0, W, height);
    ctx.drawImage(O.cache, left, 0, W, height);
    const x0 = left + (T.start / N) * W, x1 = left + ((T.start + T.span) / N) * W;
    ctx.fillStyle = "rgba(255,255,255,0.7)";
    ctx.fillRect(left, 0, x0 - left, height);
    ctx.fillRect(x1, 0, left + W - x1, height);
    ctx.strokeStyle = INK;
    ctx.strokeRect(Math.round(x0) + 0.5, 0.5, Math.max(2, Math.round(x1 - x0) - 1), height - 1);
    if (T.pinned >= 0) {
      const x = left + ((T.pinned + 0.5) / N) * W;
      ctx.fillStyle = ACCENT;
      ctx.fillRect(Math.round(x) - 1, 0, 2, height);
    }
  }

  function overviewMove(event) {
    const p = localPoint(O.canvas, event);
    const W = Math.max(1, O.canvas.clientWidth - MARGIN.left - MARGIN.right);
    const centre = ((p.x - MARGIN.left) / W) * N;
    T.start = centre - T.span / 2;
    clampView();
    requestDraw();
  }

  /* ---------- pinning ---------- */

  function renderPinned() {
    const box = $("pinned");
    if (T.pinned < 0) {
      box.className = "pinned";
      box.dataset.step = "";
      box.replaceChildren("No step pinned. Click a bar to pin it; the pinned step's numbers stay here.");
      return;
    }
    const i = T.pinned;
    box.className = "pinned active";
    box.dataset.step = String(i);
    box.replaceChildren(
      h("div", { className: "pinned-head" }, [
        h("strong", null, ["Pinned: ", ...stepTitle(i)]),
        h("button", { type: "button", className: "link", text: "Unpin (Esc)", onclick: () => pin(-1) }),
      ]),
      stepTable(i)
    );
  }

  /* The place's phase: the pinned step's, or the exchange half of it when the page was opened there. */
  function placePhase() {
    const s = T.pinned >= 0 ? steps[T.pinned] : null;
    if (!s || !isNum(s.phase)) return undefined;
    return T.phase === s.phase + 1 ? T.phase : s.phase;
  }

  function keepPlace() {
    const s = T.pinned >= 0 ? steps[T.pinned] : null;
    window.ipuReport.setPlace({ tile: L.selected >= 0 ? L.selected : undefined, phase: placePhase(),
      iteration: s && isNum(s.iteration) ? s.iteration : undefined });
  }

  function pin(i, reveal, phase) {
    T.pinned = i >= 0 && i < N ? i : -1;
    T.phase = phase;
    keepPlace();
    if (T.pinned >= 0 && reveal && (T.pinned < T.start || T.pinned + 1 > T.start + T.span)) {
      T.start = T.pinned + 0.5 - T.span / 2;
      clampView();
    }
    renderPinned();
    tellFollowers();
    requestDraw();
  }

  /* ---------- timeline interaction ---------- */

  function hoverStep(i, event) {
    if (i !== T.hover) { T.hover = i; requestDraw(); }
    if (i < 0) { hideTooltip("step"); return; }
    const content = [h("div", { className: "tt-title" }, stepTitle(i)), stepTable(i)];
    if (T.mode === "column") {
      const slot = slotOf(i);
      if (slot && slot.col != null && T.count[slot.col] > 1) {
        content.push(h("div", { className: "tt-note", text:
          "Longest of " + T.count[slot.col] + " steps in this pixel (" + stepLabel(T.lo[slot.col]) + "\u2013" +
          stepLabel(T.hi[slot.col]) + "); zoom in to see each." }));
      }
    }
    if (i === T.pinned) content.push(h("div", { className: "tt-note", text: "Pinned." }));
    tooltip.dataset.kind = "step";
    tooltip.dataset.step = String(i);
    showTooltip(content, event.clientX, event.clientY);
  }

  function zoomAt(px, factor) {
    const W = plotWidth();
    const anchor = T.start + (px / W) * T.span;
    T.span = T.span * factor;
    clampView();
    T.start = anchor - (px / W) * T.span;
    clampView();
    requestDraw();
  }

  T.canvas.addEventListener("pointerdown", (event) => {
    if (event.button !== 0) return;
    T.drag = { x: event.clientX, start: T.start, moved: false };
    T.canvas.setPointerCapture(event.pointerId);
  });
  T.canvas.addEventListener("pointermove", (event) => {
    if (T.drag) {
      const dx = event.clientX - T.drag.x;
      if (!T.drag.moved && Math.abs(dx) > 4) {
        T.drag.moved = true;
        T.canvas.classList.add("dragging");
        hideTooltip("step");
      }
      if (T.drag.moved) {
        T.start = T.drag.start - dx / T.pps;
        clampView();
        requestDraw();
        return;
      }
    }
    hoverStep(stepAtX(localPoint(T.canvas, event).x), event);
  });
  const endDrag = () => {
    if (T.drag && T.drag.moved) T.suppressClick = true;
    T.drag = null;
    T.canvas.classList.remove("dragging");
  };
  T.canvas.addEventListener("pointerup", endDrag);
  T.canvas.addEventListener("pointercancel", endDrag);
  T.canvas.addEventListener("pointerleave", () => {
    if (T.drag) return;
    if (T.hover !== -1) { T.hover = -1; requestDraw(); }
    hideTooltip("step");
  });
  T.canvas.addEventListener("click", (event) => {
    if (T.suppressClick) { T.suppressClick = false; return; }
    const i = stepAtX(localPoint(T.canvas, event).x);
    if (i >= 0) pin(i);
  });
  T.canvas.addEventListener("wheel", (event) => {
    if (N === 0) return;
    event.preventDefault();
    const unit = event.deltaMode === 1 ? 16 : event.deltaMode === 2 ? 400 : 1;
    const dx = event.deltaX * unit, dy = event.deltaY * unit;
    if (event.shiftKey || Math.abs(dx) > Math.abs(dy)) {
      T.start += (event.shiftKey && !dx ? dy : dx) / T.pps;
      clampView();
      requestDraw();
    } else {
      const px = clamp(localPoint(T.canvas, event).x - MARGIN.left, 0, plotWidth());
      zoomAt(px, Math.exp(clamp(dy, -300, 300) * 0.002));
    }
    hideTooltip("step");
  }, { passive: false });

  /* The overview: a press centres the window there; a drag across it zooms to the steps dragged over. */
  const overviewStep = (event) => {
    const W = Math.max(1, O.canvas.clientWidth - MARGIN.left - MARGIN.right);
    return clamp(Math.floor(((localPoint(O.canvas, event).x - MARGIN.left) / W) * N), 0, N - 1);
  };
  window.ipuReport.dragZoom(O.canvas, overviewStep, (lo, hi) => {
    T.start = lo; T.span = hi - lo;
    clampView();
    requestDraw();
  }, (i, event) => { if (N) overviewMove(event); });

  $("zoom-in").addEventListener("click", () => zoomAt(plotWidth() / 2, 0.5));
  $("zoom-out").addEventListener("click", () => zoomAt(plotWidth() / 2, 2));
  $("zoom-fit").addEventListener("click", () => { T.start = 0; T.span = N; clampView(); requestDraw(); });
  const longestButton = $("longest-step");
  if (longest >= 0) {
    longestButton.textContent = "Longest step: " + stepLabel(longest) + " (" + show(steps[longest].cycles) + " cycles)";
    longestButton.title = "Pin the longest step";
    longestButton.addEventListener("click", () => pin(longest, true));
  } else {
    longestButton.hidden = true;
  }

  document.addEventListener("keydown", (event) => {
    if (event.altKey || event.ctrlKey || event.metaKey) return;
    const target = event.target;
    if (target && (target.tagName === "INPUT" || target.tagName === "TEXTAREA" || target.isContentEditable)) return;
    if (event.key === "Escape") {
      if (T.pinned >= 0) { pin(-1); event.preventDefault(); }
    } else if ((event.key === "ArrowLeft" || event.key === "ArrowRight") && T.pinned >= 0) {
      pin(clamp(T.pinned + (event.key === "ArrowLeft" ? -1 : 1), 0, N - 1), true);
      event.preventDefault();
    } else if (event.key === "+" || event.key === "=") {
      zoomAt(plotWidth() / 2, 0.5);
    } else if (event.key === "-" || event.key === "_") {
      zoomAt(plotWidth() / 2, 2);
    } else if (event.key === "0") {
      T.start = 0; T.span = N; clampView(); requestDraw();
    }
  });

  /* ---------- tiles ---------- */

  const tc = (t) => (isNum(tileCompute[t]) ? tileCompute[t] : 0);
  const tw = (t) => (isNum(tileWait[t]) ? tileWait[t] : 0);
  let slowest = -1, leastBusy = -1, slowestTies = 0, maxTileTotal = 0;
  for (let t = 0; t < NT; t++) {
    if (slowest < 0 || tc(t) > tc(slowest)) { slowest = t; slowestTies = 1; }
    else if (tc(t) === tc(slowest)) slowestTies++;
    if (leastBusy < 0 || tc(t) < tc(leastBusy)) leastBusy = t;
    maxTileTotal = Math.max(maxTileTotal, tc(t) + tw(t));
  }

  const L = { canvas: $("tiles-canvas"), top: 8, hover: -1, selected: -1, perRow: 1, rows: 1, colW: 1, rowH: 100,
    pitch: 130 };
  /* Who follows the place (the run-time memory section): called with { tile, step }. */
  const followers = [];
  function tellFollowers() { for (const f of followers) f({ tile: L.selected, step: T.pinned, phase: placePhase() }); }

  function selectTile(t) {
    L.selected = t >= 0 && t < NT ? t : -1;
    keepPlace();
    tellFollowers();
    requestDraw();
  }

  function layoutTiles() {
    const W = Math.max(1, L.canvas.clientWidth - MARGIN.left - MARGIN.right);
    const fit = Math.max(1, Math.floor(W / 4));
    L.rows = Math.max(1, Math.ceil(NT / fit));
    L.perRow = Math.max(1, Math.ceil(NT / L.rows));
    L.colW = Math.min(64, W / L.perRow);
    L.rowH = L.rows === 1 ? 96 : L.rows <= 3 ? 64 : 46;
    L.labels = L.rows === 1 && L.colW >= 22;
    L.pitch = L.rowH + (L.labels ? 26 : 14);
    const want = L.top + L.rows * L.pitch + 4;
    if (L.canvas.style.height !== want + "px") L.canvas.style.height = want + "px";
  }

  function tileRect(t) {
    const row = Math.floor(t / L.perRow), col = t % L.perRow;
    return { x: MARGIN.left + col * L.colW, y: L.top + row * L.pitch, w: L.colW, h: L.rowH };
  }

  function tileAt(x, y) {
    const col = Math.floor((x - MARGIN.left) / L.colW), row = Math.floor((y - L.top) / L.pitch);
    if (col < 0 || col >= L.perRow || row < 0 || row >= L.rows) return -1;
    if (y - L.top - row * L.pitch > L.rowH + 8) return -1;
    const t = row * L.perRow + col;
    return t < NT ? t : -1;
  }

  function drawTiles() {
    layoutTiles();
    const { ctx, w, h: height } = fitCanvas(L.canvas);
    L.canvas.dataset.tiles = String(NT);
    if (NT === 0) {
      ctx.fillStyle = MUTED;
      ctx.textAlign = "center";
      ctx.fillText("No tiles recorded.", w / 2, height / 2);
      return;
    }
    const scale = L.rowH / (maxTileTotal || 1);
    const gap = L.colW >= 4 ? 1 : 0;
    for (let r = 0; r < L.rows; r++) {
      const y = L.top + r * L.pitch;
      ctx.fillStyle = GRID;
      ctx.fillRect(MARGIN.left, y, Math.min(L.perRow, NT - r * L.perRow) * L.colW, L.rowH);
      ctx.fillStyle = MUTED;
      ctx.textAlign = "right";
      ctx.textBaseline = "middle";
      const first = r * L.perRow, last = Math.min(NT, first + L.perRow) - 1;
      ctx.fillText(L.rows === 1 ? "tiles" : first + "\u2013" + last, MARGIN.left - 6, y + L.rowH / 2);
    }
    for (const [fill, value, below] of [[COLOR.compute, tc, null], [COLOR.wait, tw, tc]]) {
      ctx.fillStyle = fill;
      for (let t = 0; t < NT; t++) {
        const v = value(t) * scale;
        if (v <= 0) continue;
        const r = tileRect(t);
        const under = below ? below(t) * scale : 0;
        ctx.fillRect(r.x, r.y + r.h - under - v, r.w - gap, v);
      }
    }
    if (L.labels) {
      ctx.fillStyle = MUTED;
      ctx.textAlign = "center";
      ctx.textBaseline = "top";
      for (let t = 0; t < NT; t++) {
        const r = tileRect(t);
        ctx.fillText(String(t), r.x + r.w / 2, r.y + r.h + 10);
      }
    }
    const mark = (t, colourName, width) => {
      const r = tileRect(t);
      ctx.strokeStyle = colourName;
      ctx.lineWidth = width;
      ctx.strokeRect(r.x - 0.5, r.y - 0.5, Math.max(r.w - gap, 1) + 1, r.h + 1);
      ctx.lineWidth = 1;
    };
    if (slowest >= 0) {
      const r = tileRect(slowest), cx = r.x + (r.w - gap) / 2, y = r.y + r.h + 2;
      ctx.fillStyle = ACCENT;
      ctx.beginPath(); ctx.moveTo(cx, y); ctx.lineTo(cx - 5, y + 7); ctx.lineTo(cx + 5, y + 7); ctx.fill();
    }
    if (L.selected >= 0) mark(L.selected, ACCENT, 2);
    if (L.hover >= 0) mark(L.hover, INK, 2);
  }

  function renderSlowest() {
    const box = $("slowest");
    if (NT === 0) { box.textContent = "No per-tile cycles in this profile."; return; }
    const line = (label, field, t, note) =>
      h("div", { dataset: { readout: field } }, [
        h("span", { className: "label", text: label }),
        h("strong", { dataset: { field: "tile" }, text: String(t) }),
        ": compute ",
        h("strong", { className: "num", dataset: { field: "compute" }, text: show(tileCompute[t]) }),
        " cycles, wait ",
        h("strong", { className: "num", dataset: { field: "wait" }, text: show(tileWait[t]) }),
        " cycles" + (note || ""),
      ]);
    box.replaceChildren(
      line("Slowest tile (most compute)", "slowest", slowest,
        slowestTies > 1 ? " (" + slowestTies + " tiles share this compute; the first is shown)" : ""),
      line("Least busy tile", "least", leastBusy, "")
    );
  }

  L.canvas.addEventListener("pointermove", (event) => {
    const p = localPoint(L.canvas, event);
    const t = tileAt(p.x, p.y);
    if (t !== L.hover) { L.hover = t; requestDraw(); }
    if (t < 0) { hideTooltip("tile"); return; }
    const total = tc(t) + tw(t);
    const rows = [
      h("tr", null, [h("th", null, [h("i", { style: "--swatch:" + COLOR.compute }), "Compute"]),
        h("td", { className: "num", dataset: { field: "compute" }, text: show(tileCompute[t]) }),
        h("td", { className: "pct", text: percent(tc(t), total) })]),
      h("tr", null, [h("th", null, [h("i", { style: "--swatch:" + COLOR.wait }), "Wait"]),
        h("td", { className: "num", dataset: { field: "wait" }, text: show(tileWait[t]) }),
        h("td", { className: "pct", text: percent(tw(t), total) })]),
      h("tr", null, [h("th", { text: "Compute + wait" }),
        h("td", { className: "num", text: show(total) }), h("td")]),
    ];
    const content = [
      h("div", { className: "tt-title" }, ["Tile ", h("span", { dataset: { field: "tile" }, text: String(t) })]),
      h("table", null, [h("tbody", null, rows)]),
    ];
    if (t === slowest) content.push(h("div", { className: "tt-note", text: "Slowest tile." }));
    tooltip.dataset.kind = "tile";
    tooltip.dataset.tile = String(t);
    showTooltip(content, event.clientX, event.clientY);
  });
  L.canvas.addEventListener("click", (event) => {
    const p = localPoint(L.canvas, event), t = tileAt(p.x, p.y);
    if (t >= 0) selectTile(t);
  });
  L.canvas.addEventListener("pointerleave", () => {
    if (L.hover !== -1) { L.hover = -1; requestDraw(); }
    hideTooltip("tile");
  });

  /* ---------- drawing schedule ---------- */

  let frame = 0;
  function drawAll() {
    frame = 0;
    drawSteps();
    drawOverview();
    drawTiles();
  }
  function requestDraw() {
    if (!frame) frame = requestAnimationFrame(drawAll);
  }
  window.addEventListener("resize", () => {
    hideTooltip();
    requestDraw();
  });

  /* ---------- the API tests (and curious people) use ---------- */

  window.runProfile = {
    profile,
    /** The visible window: fractional start and span in steps, first and last visible step, drawing mode. */
    view() {
      return { start: T.start, span: T.span, first: T.first, last: T.last, mode: T.mode, stepsPerPixel: 1 / T.pps };
    },
    /** The timeline's x ticks: step index, phase, iteration and label. */
    ticks() {
      return (T.ticks || []).map((i) => ({ index: i, phase: steps[i].phase, iteration: steps[i].iteration,
        label: window.ipuReport.placeText(steps[i].phase, steps[i].iteration) }));
    },
    /** Shows steps [start, start + span) and redraws at once. */
    setView(start, span) {
      T.start = start; T.span = span;
      clampView();
      drawAll();
      return this.view();
    },
    /** Where to point at step i in the timeline, in CSS pixels from the canvas's top-left corner;
        `shows` is the step the hover will report (another one when several steps share a pixel). */
    stepPoint(i) {
      const slot = slotOf(i);
      if (!slot) return null;
      const height = T.canvas.clientHeight;
      const w = T.mode === "step" ? Math.max(1, T.pps - (T.pps >= 5 ? 1 : 0)) : 1;
      return { x: slot.x + w / 2, y: T.top + (height - T.top - T.bottom) / 2, shows: slot.shows,
        width: T.canvas.clientWidth, height };
    },
    /** Where to point at tile t, in CSS pixels from the tile canvas's top-left corner. */
    tilePoint(t) {
      if (!(t >= 0 && t < NT)) return null;
      const r = tileRect(t);
      return { x: r.x + Math.max(r.w - 1, 1) / 2, y: r.y + r.h / 2,
        width: L.canvas.clientWidth, height: L.canvas.clientHeight };
    },
    pinned() { return T.pinned >= 0 ? T.pinned : null; },
    slowestTile() { return slowest >= 0 ? slowest : null; },
    /** Pins step i (at phase, its exchange half, when given). */
    pin(i, phase) { pin(i, true, phase); drawAll(); },
    /** The tile selected in the strip (null: none), and selecting one. */
    selectedTile() { return L.selected >= 0 ? L.selected : null; },
    selectTile(t) { selectTile(t); drawAll(); },
    /** The executed step of a phase and iteration (-1: none), and pinning it. */
    stepOf(phase, iteration) { return stepOfPlace(phase, iteration); },
    /** The place's phase (the pinned step's, or its exchange half), or null. */
    phase() { const p = placePhase(); return p === undefined ? null : p; },
    /** Calls fn({ tile, step, phase }) whenever the selected tile or the pinned step changes. */
    follow(fn) { followers.push(fn); },
  };

  /* Where the page opens: the hash's place, else the run-time memory peak's step and tile. */
  function open() {
    const place = window.ipuReport.place();
    let peak = null;
    try { peak = JSON.parse($("memory-timeline-data").textContent || "null"); } catch (e) { peak = null; }
    peak = peak && peak.peak ? peak.peak : null;
    const tile = place.tile !== undefined ? place.tile : peak ? peak.tile : -1;
    L.selected = tile >= 0 && tile < NT ? tile : -1;
    if (place.phase !== undefined) {
      const at = stepOfPlace(place.phase, place.iteration);
      pin(at < 0 && profile.fault ? N - 1 : at, true, place.phase);
    }
    else if (peak) pin(stepOfPlace(peak.phase, isNum(peak.iteration) ? peak.iteration : undefined), true);
    else keepPlace();
  }

  window.ipuReport.links("run_profile");
  renderHeader();
  renderTotals();
  renderLegends();
  renderPinned();
  renderSlowest();
  open();
  window.ipuReport.onPlaceChange(() => { open(); drawAll(); });
  drawAll();
  document.body.dataset.ready = "true";
})();
