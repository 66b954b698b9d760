/* device.js: the device-wide part of the placement viewer, inlined after
   viewer.js and driving it through window.placementViewer.  A heatmap of
   live bytes (the report's estimate: every placed buffer outside the
   aperture) with tiles down and program steps across, every tile and every
   step (each screen pixel shows the fullest tile and step of the cells
   under it), with tile ticks, step ticks (the reports' one rule and label),
   a colour scale in bytes whose ends are the least and largest value shown,
   a mode that subtracts each tile's resident parameters (so activations
   stand out), a table of the fullest tiles at their peaks with the bytes of
   each kind of allocation live there (sorted by a click on any column's
   head), and a strip of each tile's peak beside it: hover names that
   tile, its phase, the step's label and the bytes; a click opens that tile
   at that step.  A device search lists every
   tile holding an allocation whose name (or aliased tensor) contains the
   text, with how many, the phases they cover and their bytes; a row opens
   the tile at the first step and pins its first match.  The heatmap is drawn
   after the viewer's first paint.  It starts once the viewer has decoded
   the report ("placement-viewer-ready").  window.placementDevice exposes the
   geometry and results for tests. */
(function () {
  "use strict";
  function start() {
    const V = window.placementViewer;
    const $ = (id) => document.getElementById(id);
    const R = V.report, A = R.allocations, NT = R.tiles, NS = R.steps.label.length;
    let est = [];
    const names = R.names || [];
    const phaseOf = (s) => (Array.isArray(R.steps.phase) ? R.steps.phase[s] : s);
    const STRIP = 90, GAP = 8, LEFT = 46, BOTTOM = 18;  /* peak strip; tile ticks at the left, step ticks below */
    const canvas = $("device-canvas"), tooltip = $("tooltip");
    const peaks = new Float64Array(NT);
    let max = 1, image = null, marked = null, mode = "live", shown = [], low = 0, high = 1, stepTicks = [];
    /* Resident parameter bytes per tile and step (the allocations of kind "parameter" live then): the
       "activations" mode subtracts them, so what changes from step to step stands out. */
    function parameterBytes() {
      const kind = (A.kinds || []).indexOf("parameter"), out = [];
      for (let t = 0; t < NT; t++) out.push(new Float64Array(NS + 1));
      for (let id = 0; id < A.tile.length; id++) {
        if (A.kind[id] !== kind) continue;
        const row = out[A.tile[id]], first = Math.max(0, A.first[id]), last = Math.min(NS - 1, A.last[id]);
        if (last < first) continue;
        row[first] += A.size[id];
        row[last + 1] -= A.size[id];
      }
      for (const row of out) for (let s = 1; s <= NS; s++) row[s] += row[s - 1];
      return out;
    }
    /* The values the heatmap shows, per tile and step, and their least and largest (the legend's ends). */
    function values() {
      const params = mode === "activations" ? parameterBytes() : null;
      shown = est.map((series, t) => (params ? Float64Array.from(series, (v, s) => Math.max(0, v - params[t][s])) : series));
      low = Infinity; high = -Infinity;
      for (const series of shown) for (const v of series) { if (v < low) low = v; if (v > high) high = v; }
      if (low === Infinity) { low = 0; high = 0; }
      legend();
    }
    /* The footprint arrives after the first paint (viewer.js later()). */
    function takeFootprint() {
      est = (R.footprint && R.footprint.estimate) || [];
      for (let t = 0; t < NT; t++) {
        const series = est[t] || [];
        for (let s = 0; s < series.length; s++) peaks[t] = Math.max(peaks[t], series[s]);
        max = Math.max(max, peaks[t]);
      }
      values();
      fullest();
      image = null;
      draw();
    }

    /* The fullest tiles at their peaks (the estimate's largest step per tile), with the bytes of each kind of
       allocation live there: a table sorted by any column (a click on its head; again reverses). */
    const FULLEST = 20;
    let fullestRows = [], sortBy = { key: "peak", down: true };
    function fullest() {
      const kinds = A.kinds || [], rows = new Map();
      const order = Array.from({ length: NT }, (_, t) => t).sort((a, b) => peaks[b] - peaks[a] || a - b);
      for (const t of order.slice(0, FULLEST)) {
        const series = est[t] || [];
        rows.set(t, { tile: t, peak: peaks[t], step: series.indexOf(peaks[t]), kinds: kinds.map(() => 0) });
      }
      for (let id = 0; id < A.tile.length; id++) {
        const row = rows.get(A.tile[id]);
        if (row && A.first[id] <= row.step && row.step <= A.last[id]) row.kinds[A.kind[id]] += A.size[id];
      }
      fullestRows = Array.from(rows.values());
      renderFullest();
    }
    function renderFullest() {
      const kinds = A.kinds || [], box = $("fullest-tiles");
      const value = (r, key) => (key === "tile" ? r.tile : key === "peak" ? r.peak : key === "phase" ? phaseOf(r.step)
        : r.kinds[Number(key)]);
      fullestRows.sort((a, b) => (sortBy.down ? -1 : 1) * (value(a, sortBy.key) - value(b, sortBy.key)) || a.tile - b.tile);
      const head = document.createElement("tr");
      for (const [key, name] of [["tile", "tile"], ["peak", "peak bytes"], ["phase", "at phase"],
        ...kinds.map((k, i) => [String(i), k])]) {
        const th = text("th", ""), button = text("button", name + (sortBy.key === key ? (sortBy.down ? " \u25be" : " \u25b4") : ""));
        button.type = "button";
        button.className = "link";
        button.dataset.sort = key;
        button.addEventListener("click", () => {
          sortBy = { key, down: sortBy.key === key ? !sortBy.down : true };
          renderFullest();
        });
        th.append(button);
        head.append(th);
      }
      box.replaceChildren(head, ...fullestRows.map((r) => {
        const tr = document.createElement("tr"), button = text("button", String(r.tile)), cell = document.createElement("td");
        tr.dataset.tile = String(r.tile);
        button.type = "button";
        button.className = "link";
        button.addEventListener("click", () => { V.setTile(r.tile); V.setStep(r.step); draw(); });
        cell.append(button);
        tr.append(cell, text("td", r.peak.toLocaleString("en-US")), text("td", String(phaseOf(r.step))),
          ...r.kinds.map((b) => text("td", b.toLocaleString("en-US"))));
        return tr;
      }));
    }

    /* White at the legend's low end to dark blue at its high end. */
    function colour(v) {
      const f = high > low ? Math.min(1, Math.max(0, (v - low) / (high - low))) : 0;
      return [Math.round(255 - 225 * f), Math.round(255 - 175 * f), Math.round(255 - 95 * f)];
    }

    /* The colour scale under the heatmap: its two ends in bytes, and what the values are. */
    function legend() {
      $("device-legend-min").textContent = window.ipuReport.bytes(low);
      $("device-legend-max").textContent = window.ipuReport.bytes(high);
      $("device-legend-min").dataset.value = String(low);
      $("device-legend-max").dataset.value = String(high);
      $("device-legend-what").textContent = mode === "activations"
        ? "live bytes less the resident parameters, per tile and step" : "live bytes per tile and step";
    }

    /* The cells [lo, hi) under pixel i of size pixels showing n cells (at least one). */
    const span = (i, n, size) => [Math.floor((i * n) / size), Math.min(n, Math.max(Math.floor((i * n) / size) + 1,
      Math.floor(((i + 1) * n) / size)))];

    /* The fullest tile and step under pixel (x, y) of the heatmap (the first on ties). */
    function cellAt(x, y, g) {
      const [t0, t1] = span(y, NT, g.h), [s0, s1] = span(x, NS, g.w);
      let best = { tile: t0, step: s0, v: -1 };
      for (let t = t0; t < t1; t++) {
        const series = shown[t] || [];
        for (let s = s0; s < s1; s++) if ((series[s] || 0) > best.v) best = { tile: t, step: s, v: series[s] || 0 };
      }
      return best;
    }

    /* The image: each screen pixel shows the fullest tile and step of the cells under it. */
    function build(w, h) {
      const img = new ImageData(Math.max(1, w), Math.max(1, h)), d = img.data;
      const columns = Array.from({ length: img.width }, (_, x) => span(x, NS, img.width));
      for (let y = 0; y < img.height; y++) {
        const [t0, t1] = span(y, NT, img.height);
        for (let x = 0; x < img.width; x++) {
          const [s0, s1] = columns[x];
          let v = 0;
          for (let t = t0; t < t1 && t < NT; t++) {
            const series = shown[t] || [];
            for (let s = s0; s < s1 && s < NS; s++) if (series[s] > v) v = series[s];
          }
          const [r, g, b] = colour(v), k = 4 * (y * img.width + x);
          d[k] = r; d[k + 1] = g; d[k + 2] = b; d[k + 3] = 255;
        }
      }
      return img;
    }

    /* The heatmap's plot: x0 and w across, h down from the top; the strip at stripX. */
    function geometry() {
      const w = canvas.clientWidth, h = canvas.clientHeight;
      return { x0: LEFT, w: Math.max(1, w - LEFT - STRIP - GAP), h: Math.max(1, h - BOTTOM), stripX: w - STRIP };
    }

    /* Tile ticks at the left (a round count apart), step ticks below (the reports' one rule and label). */
    function axes(ctx, g) {
      window.ipuReport.tileTicks(ctx, NT, g.x0 - 4, g.h);
      ctx.textAlign = "center";
      ctx.textBaseline = "top";
      stepTicks = window.ipuReport.axisTicks((s) => ({ phase: phaseOf(s), iteration: null }), 0, NS,
        Math.max(1, Math.floor(g.w / 120)));
      for (const s of stepTicks)
        ctx.fillText(window.ipuReport.placeText(phaseOf(s), null), g.x0 + ((s + 0.5) * g.w) / NS, g.h + 3);
    }

    function draw() {
      const ratio = window.devicePixelRatio || 1, g = geometry();
      canvas.width = Math.round(canvas.clientWidth * ratio);
      canvas.height = Math.round(canvas.clientHeight * ratio);
      const ctx = canvas.getContext("2d");
      ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
      ctx.clearRect(0, 0, canvas.clientWidth, canvas.clientHeight);
      if (!image || image.width !== g.w || image.height !== g.h) image = build(g.w, g.h);
      ctx.putImageData(image, Math.round(g.x0 * ratio), 0);
      if (ratio !== 1) { /* putImageData ignores the transform: redraw scaled */
        const off = document.createElement("canvas");
        off.width = image.width; off.height = image.height;
        off.getContext("2d").putImageData(image, 0, 0);
        ctx.clearRect(0, 0, canvas.clientWidth, canvas.clientHeight);
        ctx.drawImage(off, g.x0, 0, g.w, g.h);
      }
      axes(ctx, g);
      for (let t = 0; t < NT; t++) {
        const y0 = (t * g.h) / NT, y1 = ((t + 1) * g.h) / NT;
        ctx.fillStyle = marked && marked.has(t) ? "#c62f2f" : t === V.tile() ? "#1d232b" : "#3d6fb4";
        ctx.fillRect(g.stripX, y0, (peaks[t] / max) * STRIP, Math.max(1, y1 - y0));
      }
      const t = V.tile(), y = ((t + 0.5) * g.h) / NT;
      ctx.strokeStyle = "#1d232b";
      ctx.beginPath(); ctx.moveTo(g.x0, y); ctx.lineTo(g.x0 + g.w, y); ctx.stroke();
      canvas.dataset.drawn = "true";
    }

    function at(event) {
      const r = canvas.getBoundingClientRect(), g = geometry();
      const x = Math.floor(event.clientX - r.left - g.x0), y = Math.min(g.h - 1, Math.max(0, Math.floor(event.clientY - r.top)));
      if (x >= g.w) return { tile: Math.min(NT - 1, Math.floor((y * NT) / g.h)), step: -1 };
      return cellAt(Math.max(0, x), y, g);
    }

    function text(tag, value, field) {
      const n = document.createElement(tag);
      n.textContent = value;
      if (field) n.dataset.field = field;
      return n;
    }

    canvas.addEventListener("pointermove", (event) => {
      const { tile, step } = at(event), series = est[tile] || [], own = shown[tile] || [];
      const lines = step < 0
        ? [text("div", "Tile " + tile + ": peak " + window.ipuReport.bytes(peaks[tile]), "tile")]
        : [text("div", "Tile " + tile + " \u00b7 phase " + phaseOf(step), "tile"),
          text("div", R.steps.label[step] || "", "op"),
          text("div", "live " + window.ipuReport.bytes(series[step] || 0) + " (tile peak " +
            window.ipuReport.bytes(peaks[tile]) + ")", "bytes")].concat(mode === "activations"
          ? [text("div", "less resident parameters " + window.ipuReport.bytes(own[step] || 0), "shown")] : []);
      window.ipuReport.showTip(tooltip, "device", lines, event);
    });
    canvas.addEventListener("pointerleave", () => { if (tooltip.dataset.kind === "device") tooltip.hidden = true; });
    canvas.addEventListener("click", (event) => {
      const { tile, step } = at(event);
      V.setTile(tile);
      if (step >= 0) V.setStep(step);
      draw();
      $("map-panel").scrollIntoView({ block: "start" });
    });

    /* ---------- the device search ---------- */

    let results = [];
    function search(query) {
      const q = query.trim().toLowerCase(), box = $("device-results"), summary = $("device-found");
      results = [];
      marked = null;
      if (!q) { box.replaceChildren(); summary.textContent = ""; draw(); return results; }
      const hit = new Uint8Array(names.length);
      for (let i = 0; i < names.length; i++) if (String(names[i]).toLowerCase().includes(q)) hit[i] = 1;
      const byTile = new Map();
      let count = 0;
      for (let id = 0; id < A.tile.length; id++) {
        if (!hit[A.name[id]] && !(A.alias[id] >= 0 && hit[A.alias[id]])) continue;
        count++;
        const t = A.tile[id];
        let e = byTile.get(t);
        if (!e) byTile.set(t, e = { tile: t, ids: [], first: Infinity, last: -1, bytes: 0 });
        e.ids.push(id);
        e.first = Math.min(e.first, A.first[id]);
        e.last = Math.max(e.last, A.last[id]);
        e.bytes += A.size[id];
      }
      results = Array.from(byTile.values()).sort((a, b) => a.tile - b.tile);
      marked = new Set(results.map((r) => r.tile));
      summary.textContent = count + " allocation" + (count === 1 ? "" : "s") + " on " + results.length +
        " tile" + (results.length === 1 ? "" : "s");
      summary.dataset.tiles = String(results.length);
      const head = document.createElement("tr");
      for (const h of ["tile", "allocations", "phases", "bytes", "first name"]) head.append(text("th", h));
      const rows = results.slice(0, 500).map((r) => {
        const tr = document.createElement("tr");
        tr.dataset.tile = String(r.tile);
        const button = text("button", String(r.tile));
        button.type = "button";
        button.className = "link";
        button.addEventListener("click", () => open(r));
        const cell = document.createElement("td");
        cell.append(button);
        const last = Math.min(NS - 1, r.last);
        tr.append(cell, text("td", String(r.ids.length)), text("td", phaseOf(r.first) + "\u2013" + phaseOf(last)),
          text("td", r.bytes.toLocaleString("en-US")), text("td", String(names[A.name[r.ids[0]]])));
        return tr;
      });
      box.replaceChildren(head, ...rows);
      if (results.length > 500) box.append(text("caption", "the first 500 tiles of " + results.length));
      draw();
      return results;
    }

    function open(r) {
      V.setTile(r.tile);
      V.setStep(Math.min(NS - 1, r.first));
      V.pin(r.ids[0]);
      draw();
      $("map-panel").scrollIntoView({ block: "start" });
    }

    function setMode(m) {
      mode = m === "activations" ? "activations" : "live";
      values();
      image = null;
      draw();
    }
    $("device-mode").addEventListener("change", (event) => setMode(event.target.value));
    $("device-search").addEventListener("input", (event) => search(event.target.value));
    window.addEventListener("resize", () => { image = null; draw(); });
    document.addEventListener("ipu-place", () => { if (image) draw(); });
    if (R.footprint) setTimeout(takeFootprint, 0);
    else document.addEventListener("placement-loaded", takeFootprint);

    window.placementDevice = Object.freeze({
      /** The pixel of the heatmap showing a tile and step (CSS px from the canvas's top-left), the plot's size
          and where it begins across (x0: the tile ticks are at its left). */
      point(tile, step) {
        const g = geometry();
        return { x: g.x0 + Math.floor(((step + 0.5) * g.w) / NS), y: Math.floor(((tile + 0.5) * g.h) / NT), w: g.w,
          h: g.h, x0: g.x0 };
      },
      /** The fullest tiles' table as shown: tile, peak bytes, step and bytes per allocation kind, in row order. */
      fullest: () => fullestRows.map((r) => ({ tile: r.tile, peak: r.peak, step: r.step, kinds: r.kinds.slice() })),
      /** The colour scale's ends (the least and largest value shown) and the mode. */
      legend: () => ({ min: low, max: high, mode }),
      /** Shows "live" bytes or "activations" (live bytes less the resident parameters). */
      setMode(m) { $("device-mode").value = m; setMode(m); },
      /** The step ticks: step index, phase and label. */
      stepTicks: () => stepTicks.map((s) => ({ index: s, phase: phaseOf(s), label: window.ipuReport.placeText(phaseOf(s), null) })),
      drawn: () => canvas.dataset.drawn === "true",
      search: (q) => search(q).map((r) => r.tile),
      results: () => results.map((r) => ({ tile: r.tile, count: r.ids.length })),
      open: (i) => open(results[i]),
    });
  }
  /* viewer.js decodes the report before it exposes window.placementViewer, then says so. */
  if (window.placementViewer) start();
  else document.addEventListener("placement-viewer-ready", start, { once: true });
})();
