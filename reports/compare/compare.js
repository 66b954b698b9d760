/* compare.js: two runs compared.  It reads #compare-data (compare.json as
   harness/ipu_e2e/compare.py writes it) and shows the warnings, the runs and
   their totals, each compiler op's cycles in A and B as bars on one scale
   (an op whose estimate is more than 10% off its charged cycles flagged),
   the per-tile peak change B - A as one bar per tile (up: grew, down:
   shrank) with the tiles that changed most, and the plan differences.
   window.compareReport exposes the drawn bars for tests. */
(function () {
  "use strict";
  const R = window.ipuReport;
  const $ = (id) => document.getElementById(id);
  const el = R.element, svg = R.svgElement, table = R.dataTable;
  const show = (v) => (typeof v === "number" ? (Number.isInteger(v) ? R.count(v) : v.toFixed(3)) : "\u2014");

  function opBars(c) {
    const box = $("op-bars"), widest = Math.max(1, ...c.ops.flatMap((o) => o.device.filter((v) => v != null)));
    if (!c.ops.length) el("p", { class: "hint" }, box, "The runs share no op with cycles.");
    const flagged = new Set(c.warnings.filter((w) => / the estimate in [AB] /.test(w)).map((w) => w.split(":")[0]));
    for (const o of c.ops) {
      const name = "op " + o.op + " " + o.kind + " " + o.output;
      const row = el("div", { class: "op-row" + (flagged.has(name) ? " flagged" : ""), "data-op": String(o.op) }, box);
      el("span", { class: "name" }, row, name);
      const bars = el("span", { class: "bars" }, row);
      o.device.forEach((v, i) => {
        const bar = el("span", { class: "bar " + "ab"[i], "data-cycles": String(v) }, bars);
        bar.style.width = (v == null ? 0 : (100 * v) / widest) + "%";
        bar.title = "AB"[i] + ": " + show(v) + " cycles";
      });
      el("span", { class: "figures" }, row, show(o.device[0]) + " \u2192 " + show(o.device[1]) +
        (o.ratio != null ? " (" + o.ratio.toFixed(3) + "x)" : ""));
    }
  }

  function peakChart(p) {
    const chart = $("peak-chart");
    if (!p || p.note) {
      $("peaks-source").textContent = p ? "From the " + p.source + ": not compared, " + p.note + "." :
        "Neither a memory timeline nor per-tile peaks in both runs.";
      chart.hidden = true;
      return;
    }
    $("peaks-source").textContent = "From the " + p.source + ": B - A per tile; " + p.grew + " of " + p.tiles +
      " tiles grew (up), " + p.shrank + " shrank (down).";
    const w = chart.clientWidth || 800, h = 180, left = 70, mid = h / 2;
    chart.setAttribute("viewBox", "0 0 " + w + " " + h);
    const change = p.a.map((a, t) => p.b[t] - a), most = Math.max(1, ...change.map(Math.abs));
    const step = (w - left - 8) / p.tiles;
    svg("line", { x1: left, x2: w - 8, y1: mid, y2: mid }, chart);
    for (const [v, y] of [[most, 12], [-most, h - 4]]) {
      const t = svg("text", { x: left - 6, y, "text-anchor": "end" }, chart);
      t.textContent = (v > 0 ? "+" : "-") + R.tick(Math.abs(v));
    }
    change.forEach((d, t) => {
      if (!d) return;
      const height = (Math.abs(d) / most) * (mid - 14);
      const rect = svg("rect", { x: left + t * step, width: Math.max(step - (step > 3 ? 1 : 0), 0.5), height,
        y: d > 0 ? mid - height : mid, class: d > 0 ? "grew" : "shrank", "data-tile": String(t) }, chart);
      svg("title", {}, rect).textContent = "tile " + t + ": " + R.bytes(p.a[t]) + " \u2192 " + R.bytes(p.b[t]);
    });
    table($("peak-table"), [["tile", "num"], ["A", "num"], ["B", "num"], ["B - A", "num"]],
      p.most_changed.map((m) => [String(m.tile), R.count(m.a), R.count(m.b), (m.b > m.a ? "+" : "") + R.count(m.b - m.a)]));
  }

  try {
    const c = JSON.parse($("compare-data").textContent);
    const [a, b] = c.runs;
    $("meta").textContent = "A: " + a.workload + " on " + a.tiles + " tiles \u00b7 B: " + b.workload + " on " +
      b.tiles + " tiles";
    if (c.warnings.length) {
      $("warnings-panel").hidden = false;
      for (const w of c.warnings) el("li", {}, $("warnings"), w);
    }
    const rows = [["status", a.status, b.status], ["command", (a.command || []).join(" "), (b.command || []).join(" ")],
      ["library SHA-256", (a.library_sha256 || "").slice(0, 16), (b.library_sha256 || "").slice(0, 16) +
        (c.same_library ? "" : " (differs)")]];
    for (const [key, [x, y]] of Object.entries(c.geometry_differs)) rows.push([key, String(x), String(y)]);
    for (const [key, [x, y]] of Object.entries(c.totals)) rows.push([key.replace(/_/g, " "), show(x), show(y)]);
    table($("runs"), [[""], ["A"], ["B"]], rows);
    opBars(c);
    peakChart(c.peaks);
    $("plan-source").textContent = !c.plan_source ? "Not compared: a run has neither a plan nor a package." :
      "From " + c.plan_source + (c.plan_differences.length ? "." : ": the plans choose the same for every op they share.");
    table($("plan-table"), [["op"], ["what"], ["A"], ["B"]], c.plan_differences.flatMap((o) =>
      Object.entries(o.differs).map(([key, [x, y]]) => ["op " + o.op + " " + o.kind + " " + o.output, key,
        String(x), String(y)])));
    window.compareReport = Object.freeze({
      bars: () => [...document.querySelectorAll("#op-bars .op-row")].map((row) => ({ op: Number(row.dataset.op),
        flagged: row.classList.contains("flagged"),
        cycles: [...row.querySelectorAll(".bar")].map((bar) => Number(bar.dataset.cycles)) })),
      tiles: () => [...document.querySelectorAll("#peak-chart rect")].map((r) => Number(r.dataset.tile)),
    });
    document.body.dataset.ready = "true";
  } catch (error) {
    R.fail("comparison", error.message);
  }
})();
