/* sweep.js: the sweep report's page (template.html).  Reads the rows that
   harness/ipu_e2e/sweep_report.py embedded (#sweep-data: one row per planned
   case, the same rows as sweep-report.md), fills the tables and draws the
   charts as inline SVG: cycles against budget (one line per batch and
   precision), and per batch the estimated, placed-tensor and placed-total
   peaks against budget beside the budget line.  Hovering a point shows its
   case in the tooltip.  window.sweepReport.point(chart, case) gives a
   point's position (for tests); body[data-ready] is set once drawn. */
(function () {
  "use strict";
  const R = window.ipuReport, el = R.element, svg = R.svgElement, table = R.dataTable;
  const W = 640, H = 300, M = { left: 84, right: 40, top: 14, bottom: 42 };
  const points = {};  // chart id -> case name -> SVG element
  let data;

  const fmt = (v) => (v === null || v === undefined ? "" : v.toLocaleString("en-US"));
  const secs = (v, places) => (v === null || v === undefined ? "" : v.toFixed(places || 2));
  const cssVar = (name) => getComputedStyle(document.documentElement).getPropertyValue(name).trim();
  const colour = (i) => cssVar("--s" + (i % 6));

  function seriesLabel(r) {
    return r.precision ? r.precision + ", " + r.blocks + " block(s)" : "";
  }

  function cell(r) {
    if (r.cycles !== null && r.outcome === "passed") return fmt(r.cycles);
    if (r.outcome === "rejected" && r.rejection) return "rejected (" + r.rejection.stage + ")";
    return r.outcome === "unfinished" ? "\u2014" : r.outcome;
  }

  function unique(values) {
    return [...new Set(values)];
  }

  // ------------------------------------------------------------ tables

  function tables() {
    const rows = data.rows;
    const box = document.getElementById("cycle-tables");
    unique(rows.map(seriesLabel)).forEach((label) => {
      const group = rows.filter((r) => seriesLabel(r) === label);
      const batches = unique(group.map((r) => r.batch));
      el("h3", {}, box, "Cycles per budget and batch" + (label ? " (" + label + ")" : ""));
      const t = el("table", { class: "data cycle-table" }, box);
      table(t, [["budget per tile"]].concat(batches.map((b) => ["batch " + b + " cycles", "num"])),
        unique(group.map((r) => String(r.budget))).map((budget) => [budget].concat(batches.map((b) => {
          const r = group.find((g) => String(g.budget) === budget && g.batch === b);
          return r ? cell(r) : "";
        }))));
    });
    table(document.getElementById("peak-table"),
      [["case"], ["batch", "num"], ["budget (bytes)", "num"], ["outcome"], ["estimated peak", "num"],
       ["placed tensors", "num"], ["tile", "num"], ["placed total", "num"], ["tile", "num"], ["min cosine", "num"]],
      rows.map((r) => [r.name, String(r.batch), r.budget + " (" + fmt(r.budget_bytes) + ")", r.outcome,
        fmt(r.estimated_peak), fmt(r.placed_tensor_peak), fmt(r.placed_tensor_tile), fmt(r.placed_total_peak),
        fmt(r.placed_total_tile), r.min_cosine === null ? "" : r.min_cosine.toFixed(6)]));
    const rejected = rows.filter((r) => r.rejection);
    const box2 = document.getElementById("rejections");
    if (rejected.length) {
      table(el("table", { class: "data", id: "rejection-table" }, box2),
        [["case"], ["stage"], ["seconds", "num"], ["lower bound (bytes)", "num"], ["reason", "message"]],
        rejected.map((r) => [r.name, r.rejection.stage, secs(r.rejection.seconds),
          fmt(r.rejection.lower_bound_bytes), r.rejection.reason || ""]));
    } else {
      el("p", {}, box2, "No case was rejected.");
    }
    const stages = data.stages;
    table(document.getElementById("build-table"),
      [["case"]].concat(stages.map((s) => [s + " s", "num"]), [["build s", "num"], ["process s", "num"],
        ["peak RSS MiB", "num"]]),
      rows.filter((r) => r.build_seconds !== null).map((r) => [r.name].concat(
        stages.map((s) => secs(r.build_stages[s], 3)), [secs(r.build_seconds, 3), secs(r.build_process_seconds),
          r.peak_rss_bytes === null ? "" : (r.peak_rss_bytes / 1048576).toFixed(0)])));
    const files = document.getElementById("case-files");
    rows.forEach((r) => {
      const li = el("li", { "data-case": r.name }, files, r.name + ": ");
      if (!r.links.length) li.append("none yet");
      r.links.forEach(([label, href], i) => {
        if (i) li.append(", ");
        el("a", { href }, li, label);
      });
    });
    const failures = rows.filter((r) => ["failed", "timed out", "error"].includes(r.outcome));
    if (failures.length) {
      const box3 = document.getElementById("failures");
      el("h3", {}, box3, "Failures");
      const list = el("ul", {}, box3);
      failures.forEach((r) => el("li", {}, list, r.name + ": " + r.outcome + ": " + (r.message || "")));
    }
    const dl = document.getElementById("definitions");
    data.definitions.forEach(([name, text]) => {
      el("dt", {}, dl, name);
      el("dd", {}, dl, text);
    });
  }

  // ------------------------------------------------------------ charts

  function niceMax(v) {
    if (!(v > 0)) return 1;
    const p = Math.pow(10, Math.floor(Math.log10(v)));
    return [1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10].map((m) => m * p).find((m) => m >= v);
  }

  function frame(parent, id, title, xMax, yMax, yLabel) {
    const box = el("div", { class: "chart", id }, parent);
    el("h3", {}, box, title);
    const root = svg("svg", { width: W, height: H, viewBox: "0 0 " + W + " " + H, role: "img",
      "aria-label": title }, box);
    const x = (v) => M.left + (v / xMax) * (W - M.left - M.right);
    const y = (v) => H - M.bottom - (v / yMax) * (H - M.top - M.bottom);
    const grid = svg("g", { class: "grid" }, root), axis = svg("g", { class: "axis" }, root);
    for (let i = 0; i <= 4; i++) {
      const v = (yMax * i) / 4, vx = (xMax * i) / 4;
      svg("line", { x1: M.left, x2: W - M.right, y1: y(v), y2: y(v) }, grid);
      svg("text", { x: M.left - 6, y: y(v) + 4, "text-anchor": "end" }, axis).textContent = fmt(Math.round(v));
      svg("text", { x: x(vx), y: H - M.bottom + 16, "text-anchor": "middle" }, axis).textContent =
        fmt(Math.round(vx));
    }
    svg("line", { x1: M.left, x2: W - M.right, y1: H - M.bottom, y2: H - M.bottom }, axis);
    svg("line", { x1: M.left, x2: M.left, y1: M.top, y2: H - M.bottom }, axis);
    svg("text", { x: (M.left + W - M.right) / 2, y: H - 6, "text-anchor": "middle" }, axis).textContent =
      "budget per tile (bytes)";
    const mid = (M.top + H - M.bottom) / 2;
    svg("text", { x: 14, y: mid, "text-anchor": "middle", transform: "rotate(-90 14 " + mid + ")" },
      axis).textContent = yLabel;
    points[id] = {};
    return { box, root, x, y };
  }

  function legend(box, entries) {
    const ul = el("ul", { class: "legend" }, box);
    entries.forEach(([label, c, dashed]) => {
      const li = el("li", {}, ul);
      el("span", { class: "swatch", style: dashed ? "border: 2px dashed " + c : "background: " + c }, li);
      li.appendChild(document.createTextNode(label));
    });
  }

  function line(chart, pts, c, dashed) {
    const d = pts.map((p, i) => (i ? "L" : "M") + chart.x(p[0]).toFixed(1) + " " + chart.y(p[1]).toFixed(1));
    if (pts.length > 1) {
      svg("path", { d: d.join(" "), fill: "none", stroke: c, "stroke-width": 2,
        "stroke-dasharray": dashed ? "4 4" : "none" }, chart.root);
    }
  }

  function dot(chart, id, row, xv, yv, c, text, radius) {
    const p = svg("circle", { class: "point", cx: chart.x(xv), cy: chart.y(yv), r: radius || 4.5, fill: c,
      "data-case": row.name }, chart.root);
    p.addEventListener("mouseenter", (e) => show(e, text));
    p.addEventListener("mousemove", (e) => show(e, text));
    p.addEventListener("mouseleave", hide);
    points[id][row.name + (text.key || "")] = p;
  }

  function cross(chart, xv, c, row, id) {
    const cx = chart.x(xv), cy = chart.y(0);
    const g = svg("g", { class: "reject point", "data-case": row.name }, chart.root);
    svg("line", { x1: cx - 5, x2: cx + 5, y1: cy - 5, y2: cy + 5, stroke: c }, g);
    svg("line", { x1: cx - 5, x2: cx + 5, y1: cy + 5, y2: cy - 5, stroke: c }, g);
    svg("rect", { x: cx - 6, y: cy - 6, width: 12, height: 12, fill: "transparent" }, g);
    const text = { lines: [row.name, "rejected at " + (row.rejection ? row.rejection.stage : "?") +
      (row.rejection && row.rejection.seconds !== null ? " after " + secs(row.rejection.seconds) + " s" : "")] };
    g.addEventListener("mouseenter", (e) => show(e, text));
    g.addEventListener("mousemove", (e) => show(e, text));
    g.addEventListener("mouseleave", hide);
    points[id][row.name] = g;
  }

  function cyclesChart() {
    const rows = data.rows.filter((r) => r.budget_bytes !== null);
    const parent = document.getElementById("cycles-charts");
    const done = rows.filter((r) => r.cycles !== null);
    const chart = frame(parent, "cycles-chart", "Simulated cycles", niceMax(Math.max(...rows.map((r) => r.budget_bytes))),
      niceMax(Math.max(0, ...done.map((r) => r.cycles)) * 1.05), "cycles");
    const keys = unique(data.rows.map((r) => seriesLabel(r) + "|" + r.batch));
    const entries = [];
    keys.forEach((key, i) => {
      const c = colour(i);
      const group = rows.filter((r) => seriesLabel(r) + "|" + r.batch === key)
        .sort((a, b) => a.budget_bytes - b.budget_bytes);
      const label = "batch " + key.split("|")[1] + (key.split("|")[0] ? " (" + key.split("|")[0] + ")" : "");
      entries.push([label, c]);
      line(chart, group.filter((r) => r.cycles !== null).map((r) => [r.budget_bytes, r.cycles]), c);
      group.forEach((r) => {
        if (r.cycles !== null) {
          dot(chart, "cycles-chart", r, r.budget_bytes, r.cycles, c,
            { lines: [r.name, "budget " + fmt(r.budget_bytes) + " bytes", fmt(r.cycles) + " cycles"] });
        } else if (r.outcome === "rejected") {
          cross(chart, r.budget_bytes, cssVar("--reject"), r, "cycles-chart");
        }
      });
    });
    legend(chart.box, entries);
  }

  const PEAKS = [["estimated peak", "estimated_peak"], ["placed tensors", "placed_tensor_peak"],
    ["placed total", "placed_total_peak"]];

  function peakCharts() {
    const parent = document.getElementById("peak-charts");
    const rows = data.rows.filter((r) => r.budget_bytes !== null);
    const xMax = niceMax(Math.max(...rows.map((r) => r.budget_bytes)));
    unique(data.rows.map((r) => seriesLabel(r) + "|" + r.batch)).forEach((key, n) => {
      const group = rows.filter((r) => seriesLabel(r) + "|" + r.batch === key)
        .sort((a, b) => a.budget_bytes - b.budget_bytes);
      const top = Math.max(0, ...group.flatMap((r) => PEAKS.map(([, f]) => r[f] || 0)),
        ...group.map((r) => r.budget_bytes));
      const id = "peak-chart-" + n;
      const label = "batch " + key.split("|")[1] + (key.split("|")[0] ? " (" + key.split("|")[0] + ")" : "");
      const chart = frame(parent, id, "Peaks per tile, " + label, xMax, niceMax(top * 1.05), "bytes");
      line(chart, [[0, 0], [xMax, xMax]].map(([a, b]) => [a, Math.min(b, niceMax(top * 1.05))]),
        cssVar("--muted"), true);
      PEAKS.forEach(([name, f], i) => {
        const c = colour(i);
        const pts = group.filter((r) => r[f] !== null);
        line(chart, pts.map((r) => [r.budget_bytes, r[f]]), c);
        // The estimate's points are drawn larger: the placed tensors often equal it and cover it.
        pts.forEach((r) => dot(chart, id, r, r.budget_bytes, r[f], c,
          { key: ":" + f, lines: [r.name, name + " " + fmt(r[f]) + " bytes", "budget " + fmt(r.budget_bytes)] },
          i === 0 ? 7 : 4.5));
      });
      group.filter((r) => r.outcome === "rejected").forEach((r) => cross(chart, r.budget_bytes, cssVar("--reject"), r, id));
      legend(chart.box, PEAKS.map(([name], i) => [name, colour(i)]).concat([["budget", cssVar("--muted"), true]]));
    });
  }

  // ------------------------------------------------------------ tooltip

  function show(event, text) {
    const tip = document.getElementById("tooltip");
    tip.textContent = "";
    text.lines.forEach((l, i) => el(i ? "div" : "strong", {}, tip, l));
    tip.hidden = false;
    tip.style.left = Math.min(window.innerWidth - 260, event.clientX + 14) + "px";
    tip.style.top = event.clientY + 14 + "px";
  }

  function hide() {
    document.getElementById("tooltip").hidden = true;
  }

  function point(chart, name) {
    const p = points[chart] && points[chart][name];
    if (!p) return null;
    const r = p.getBoundingClientRect();
    return { x: r.left + r.width / 2, y: r.top + r.height / 2 };
  }

  try {
    data = JSON.parse(document.getElementById("sweep-data").textContent);
    const s = data.settings || {};
    document.getElementById("title").textContent = "Memory-budget sweep: " + (s.workload || "?");
    document.title = "Memory-budget sweep \u2014 " + data.finished + " of " + data.rows.length + " cases";
    document.getElementById("meta").textContent = data.finished + " of " + data.rows.length +
      " cases finished; " + data.folder + "; " + (data.command || []).join(" ");
    tables();
    cyclesChart();
    peakCharts();
    window.sweepReport = Object.freeze({ point });
    document.body.dataset.ready = "true";
  } catch (error) {
    window.ipuReport.fail("sweep report", String(error && error.stack || error));
  }
})();
