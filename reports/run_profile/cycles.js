/* cycles.js: the run profile's device-wide view of compute, inlined after
   report.js and driving it through window.runProfile.  A heatmap of compute
   cycles with tiles down and the main program's control ops across (every
   execution summed: the profile's tiles.compute_by_op), each screen pixel
   showing the busiest tile and op under it: hover names the tile, the op's
   phase and compiler op and the cycles; a click selects that tile and pins
   the op's first executed step.  window.runCycles exposes the geometry for
   tests. */
(function () {
  "use strict";
  const P = window.runProfile;
  const $ = (id) => document.getElementById(id);
  const by = P && P.profile.tiles && P.profile.tiles.compute_by_op;
  if (!by || !by.op.length) return;
  $("cycles-panel").hidden = false;
  const steps = P.profile.steps, ops = P.profile.ops || [], canvas = $("cycles-canvas"), tooltip = $("tooltip");
  const NO = by.op.length, NT = by.cycles[0].length;
  const first = by.op.map((op) => steps.findIndex((s) => s.op === op && s.program === "main"));
  let max = 1;
  for (const row of by.cycles) for (const v of row) if (v > max) max = v;

  const span = (i, n, size) => [Math.floor((i * n) / size), Math.min(n, Math.max(Math.floor((i * n) / size) + 1,
    Math.floor(((i + 1) * n) / size)))];
  function cellAt(x, y, w, h) {
    const [t0, t1] = span(y, NT, h), [o0, o1] = span(x, NO, w);
    let best = { tile: t0, column: o0, v: -1 };
    for (let o = o0; o < o1; o++) for (let t = t0; t < t1; t++)
      if (by.cycles[o][t] > best.v) best = { tile: t, column: o, v: by.cycles[o][t] };
    return best;
  }

  function draw() {
    const w = Math.max(1, canvas.clientWidth), h = Math.max(1, canvas.clientHeight);
    canvas.width = w; canvas.height = h;
    const ctx = canvas.getContext("2d"), img = ctx.createImageData(w, h);
    for (let y = 0; y < h; y++)
      for (let x = 0; x < w; x++) {
        const f = Math.min(1, cellAt(x, y, w, h).v / max), k = 4 * (y * w + x);
        img.data[k] = 255 - 210 * f; img.data[k + 1] = 255 - 145 * f; img.data[k + 2] = 255 - 75 * f; img.data[k + 3] = 255;
      }
    ctx.putImageData(img, 0, 0);
    const t = P.selectedTile();
    if (t !== null) {
      const y = ((t + 0.5) * h) / NT;
      ctx.strokeStyle = "#c62f2f";
      ctx.beginPath(); ctx.moveTo(0, y); ctx.lineTo(w, y); ctx.stroke();
    }
    canvas.dataset.drawn = "true";
  }

  function at(event) {
    const r = canvas.getBoundingClientRect();
    const x = Math.min(canvas.clientWidth - 1, Math.max(0, Math.floor(event.clientX - r.left)));
    const y = Math.min(canvas.clientHeight - 1, Math.max(0, Math.floor(event.clientY - r.top)));
    return cellAt(x, y, canvas.clientWidth, canvas.clientHeight);
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
    /** The pixel showing a tile and a column (an index into compute_by_op.op), and the canvas size. */
    point(tile, column) {
      const w = canvas.clientWidth, h = canvas.clientHeight;
      return { x: Math.floor(((column + 0.5) * w) / NO), y: Math.floor(((tile + 0.5) * h) / NT), w, h };
    },
    firstStep: (column) => first[column],
  });
})();
