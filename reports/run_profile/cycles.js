/* cycles.js: the run profile's device-wide view of compute, inlined after
   report.js and driving it through window.runProfile.  A heatmap of compute
   cycles with tiles down (ticked at the left) and the main program's control
   ops across (every execution summed: the profile's tiles.compute_by_op),
   each screen pixel showing the busiest tile and op under it, with a band
   under it naming each column's compiler op (shaded by op, named where the
   name fits) and a colour scale in cycles whose ends are the least and
   largest value shown: hover names the tile, the op's phase and compiler op
   and the cycles; a click selects that tile and pins the op's first executed
   step.  window.runCycles exposes the geometry for tests. */
(function () {
  "use strict";
  const P = window.runProfile;
  const $ = (id) => document.getElementById(id);
  const by = P && P.profile.tiles && P.profile.tiles.compute_by_op;
  if (!by || !by.op.length) return;
  $("cycles-panel").hidden = false;
  const steps = P.profile.steps, ops = P.profile.ops || [], canvas = $("cycles-canvas"), tooltip = $("tooltip");
  const NO = by.op.length, NT = by.cycles[0].length, LEFT = 40, BAND = 18;
  const first = by.op.map((op) => steps.findIndex((s) => s.op === op && s.program === "main"));
  const opOf = (column) => (first[column] >= 0 ? steps[first[column]].compiler_op : null);
  let low = Infinity, high = 0;
  for (const row of by.cycles) for (const v of row) { if (v > high) high = v; if (v < low) low = v; }
  if (low === Infinity) low = 0;

  const span = (i, n, size) => [Math.floor((i * n) / size), Math.min(n, Math.max(Math.floor((i * n) / size) + 1,
    Math.floor(((i + 1) * n) / size)))];
  function cellAt(x, y, w, h) {
    const [t0, t1] = span(y, NT, h), [o0, o1] = span(x, NO, w);
    let best = { tile: t0, column: o0, v: -1 };
    for (let o = o0; o < o1; o++) for (let t = t0; t < t1; t++)
      if (by.cycles[o][t] > best.v) best = { tile: t, column: o, v: by.cycles[o][t] };
    return best;
  }

  /* The plot: x0 and w across, h down from the top; the op band under it. */
  const geometry = () => ({ x0: LEFT, w: Math.max(1, canvas.clientWidth - LEFT), h: Math.max(1, canvas.clientHeight - BAND) });

  function draw() {
    const g = geometry();
    canvas.width = canvas.clientWidth; canvas.height = canvas.clientHeight;
    const ctx = canvas.getContext("2d"), img = ctx.createImageData(g.w, g.h);
    for (let y = 0; y < g.h; y++)
      for (let x = 0; x < g.w; x++) {
        const v = cellAt(x, y, g.w, g.h).v, f = high > low ? Math.min(1, (v - low) / (high - low)) : 0;
        const k = 4 * (y * g.w + x);
        img.data[k] = 255 - 210 * f; img.data[k + 1] = 255 - 145 * f; img.data[k + 2] = 255 - 75 * f; img.data[k + 3] = 255;
      }
    ctx.putImageData(img, g.x0, 0);
    window.ipuReport.tileTicks(ctx, NT, g.x0 - 4, g.h);
    /* The op band: one shaded run per compiler op, its name where it fits. */
    ctx.textAlign = "center";
    let start = 0;
    for (let c = 1; c <= NO; c++) {
      if (c < NO && opOf(c) === opOf(start)) continue;
      const x0 = g.x0 + (start * g.w) / NO, x1 = g.x0 + (c * g.w) / NO, op = opOf(start);
      ctx.fillStyle = op === null ? "#eceff3" : op % 2 ? "#d9e2f0" : "#c2d0e6";
      ctx.fillRect(x0, g.h + 2, Math.max(1, x1 - x0 - 1), BAND - 3);
      const name = op === null ? "" : String(ops[op] || "").split(" ").pop();
      if (name && ctx.measureText(name).width < x1 - x0 - 4) {
        ctx.fillStyle = "#1d232b";
        ctx.fillText(name, (x0 + x1) / 2, g.h + 2 + (BAND - 3) / 2);
      }
      start = c;
    }
    const t = P.selectedTile();
    if (t !== null) {
      const y = ((t + 0.5) * g.h) / NT;
      ctx.strokeStyle = "#c62f2f";
      ctx.beginPath(); ctx.moveTo(g.x0, y); ctx.lineTo(g.x0 + g.w, y); ctx.stroke();
    }
    canvas.dataset.drawn = "true";
  }

  $("cycles-legend-min").textContent = window.ipuReport.count(low) + " cycles";
  $("cycles-legend-max").textContent = window.ipuReport.count(high) + " cycles";

  function at(event) {
    const r = canvas.getBoundingClientRect(), g = geometry();
    const x = Math.min(g.w - 1, Math.max(0, Math.floor(event.clientX - r.left - g.x0)));
    const y = Math.min(g.h - 1, Math.max(0, Math.floor(event.clientY - r.top)));
    return cellAt(x, y, g.w, g.h);
  }

  const opName = (i) => (typeof ops[i] === "string" ? "op " + i + " " + ops[i] : "no compiler op");
  canvas.addEventListener("pointermove", (event) => {
    const c = at(event), step = steps[first[c.column]] || {};
    const lines = [["Tile " + c.tile + " \u00b7 phase " + step.phase, "tile"], [opName(step.compiler_op), "op"],
      [Number(c.v).toLocaleString("en-US") + " compute cycles over every execution", "cycles"]];
    window.ipuReport.showTip(tooltip, "cycles", lines.map(([text, field]) => {
      const div = document.createElement("div");
      div.textContent = text;
      div.dataset.field = field;
      return div;
    }), event);
  });
  canvas.addEventListener("pointerleave", () => { if (tooltip.dataset.kind === "cycles") tooltip.hidden = true; });
  canvas.addEventListener("click", (event) => {
    const c = at(event);
    P.selectTile(c.tile);
    if (first[c.column] >= 0) P.pin(first[c.column]);
  });
  P.follow(() => draw());
  window.addEventListener("resize", draw);
  draw();

  window.runCycles = Object.freeze({
    /** The pixel showing a tile and a column (an index into compute_by_op.op), from the canvas's top-left; the
        plot's size and where it begins across (x0: the tile ticks are at its left). */
    point(tile, column) {
      const g = geometry();
      return { x: g.x0 + Math.floor(((column + 0.5) * g.w) / NO), y: Math.floor(((tile + 0.5) * g.h) / NT), w: g.w,
        h: g.h, x0: g.x0 };
    },
    firstStep: (column) => first[column],
    /** The colour scale's ends in cycles. */
    legend: () => ({ min: low, max: high }),
  });
})();
