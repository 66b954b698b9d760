/* memory.js: the planner memory profile page (template.html).  It reads the
   profile (JSON version 3, engine/src/report/memory.c) from
   #memory-profile-data and shows, for one selected tile, its live storage
   over the step groups stacked by what holds it (parameters, activations,
   operand copies, staging, scratch: live values plus the step's scratch,
   which reconstruct the tile's usage), with byte ticks in KiB or MiB, the
   budget line labelled, phase and label ticks (the reports' one rule and
   label: ipuReport.axisTicks, placeText) and a tooltip per step group;
   init collapsed unless "Show init", drag across the chart to zoom, Reset
   zoom to go back;
   the page opens on the tile and step with the largest total.  Peak buttons
   select a peak's step and tile; the tile selector keeps its tile while the
   step moves (slider, arrows, a click on the chart, the arrow keys); "Step's
   peak tile" selects the fullest tile of the current step.  The table lists
   the allocations live on that tile at that step (largest first), with
   payload apart from alignment and tails, resident copies, scratch on its
   own line and the tile's usage; a row expands to its layout and aliases;
   the filter keeps names that contain its text; parameter sequences are one
   row each unless ungrouped, when every member has its own.  The tile and
   the step's program phase (the package's numbering, which every report
   shares) are kept in the URL hash (#tile=T&phase=P) and carried by the
   links to the run's other reports; a page opened with a hash shows the step
   group holding that phase.  window.memoryProfile.state() says what is
   selected (for tests). */
(function () {
  "use strict";
  const R = window.ipuReport;
  const $ = (id) => document.getElementById(id);
  const fmt = (n) => Number(n).toLocaleString("en-US");
  const svgNS = "http://www.w3.org/2000/svg";

  let profile, values, steps, tiles;
  const state = { tile: 0, step: 0, phase: 0, filter: "", grouped: true, expanded: new Set(), showInit: false,
    view: null, ticks: [] };
  /* The step groups the chart shows by default: init collapsed unless asked for. */
  function defaultView() {
    const first = steps.findIndex((s) => !s.init);
    return { lo: state.showInit || first < 0 ? 0 : first, hi: steps.length };
  }
  const position = (i) => ({ phase: steps[i].phases[0], iteration: null });

  function check(p) {
    if (!p || p.version !== 3 || p.kind !== "memory-profile")
      throw new Error("expected a version 3 memory profile");
    if (!p.timeline || !Array.isArray(p.timeline.values) || !Array.isArray(p.timeline.steps) ||
        !p.timeline.steps.length)
      throw new Error("the profile has no timeline");
  }

  /* The largest usage of one class (0 standard, 1 interleaved, 2 total): [bytes, step, tile]. */
  function peakOf(which) {
    let best = [-1, 0, 0];
    steps.forEach((s, si) => s.tile_usage.forEach((u, t) => {
      const v = which === 2 ? u[0] + u[1] : u[which];
      if (v > best[0]) best = [v, si, t];
    }));
    return best;
  }

  function select(step, tile, phase) {
    state.step = R.clamp(step, 0, steps.length - 1);
    if (tile !== undefined) state.tile = R.clamp(tile, 0, tiles - 1);
    const [first, last] = steps[state.step].phases;
    state.phase = phase !== undefined && phase >= first && phase <= last ? phase : first;
    R.setPlace({ tile: state.tile, phase: state.phase });
    render();
  }

  /* The step group holding a program phase (else the first after it, else the last). */
  function groupOf(phase) {
    const found = steps.findIndex((s) => s.phases[1] >= phase);
    return found < 0 ? steps.length - 1 : found;
  }

  function card(label, value, note) {
    const div = document.createElement("div");
    div.className = "card";
    for (const [cls, text] of [["label", label], ["value", value], ["note", note || ""]]) {
      const span = document.createElement("span");
      span.className = cls;
      span.textContent = text;
      div.appendChild(span);
    }
    return div;
  }

  function header() {
    const p = profile, pk = p.peak;
    $("meta").textContent = `${p.scope}: ${p.status}${p.fits ? ", fits" : ", over the budget"} — ` +
      `search budget ${fmt(p.budget)} B per tile (memory budget ${fmt(p.memory_budget)} B), ${fmt(tiles)} tiles, ` +
      `${steps.length} steps, ${values.length} allocations`;
    const std = peakOf(0), inter = peakOf(1), peakStep = steps[pk.step];
    const cards = $("cards");
    cards.append(
      card("Total peak", fmt(pk.total) + " B", `tile ${pk.tile}, step ${pk.step} (${peakStep.label})`),
      card("Standard peak", fmt(pk.standard) + " B", `tile ${std[2]}, step ${std[1]}`),
      card("Interleaved peak", fmt(pk.interleaved) + " B", inter[0] > 0 ? `tile ${inter[2]}, step ${inter[1]}` : "none"),
      card("Old bound at the peak step", fmt(peakStep.coarse_usage) + " B", "sum of maxima over tiles"),
      card("Exchange rows", fmt(pk.exchange_rows) + " B", `tile ${pk.exchange_rows_tile}; separate, not in the peaks`),
      card("Support reserve", fmt(p.reserve) + " B", "outside the budget; not added again"));
    $("peak-interleaved").disabled = inter[0] <= 0;
    if (inter[0] <= 0) $("peak-interleaved").title = "no storage needs the interleaved region";
    if (p.rejection) {
      const r = p.rejection, list = $("rejection-details");
      $("rejection").hidden = false;
      $("rejection-reason").textContent = r.reason;
      const items = [`${r.over_budget.length} of ${steps.length} steps exceed ${fmt(r.budget)} B on some tile`];
      if (r.peak) {
        items.push(`peak ${fmt(r.peak.usage)} B on tile ${r.peak.tile} at step ${r.peak.step} (${r.peak.label}); ` +
          "largest there: " + r.peak.largest.map((v) => `${v.name} ${fmt(v.bytes)} B` +
          (v.layout_op === null ? "" : ` (layout from op ${v.layout_op})`)).join(", "));
      }
      if (r.raised_by && r.raised_by.length)
        items.push(`choosing input layouts for op ${r.raised_by.join(", op ")} raised this earlier peak`);
      for (const text of items) {
        const li = document.createElement("li");
        li.textContent = text;
        list.appendChild(li);
      }
    }
  }

  function cssColour(name) {
    return getComputedStyle(document.documentElement).getPropertyValue(name).trim();
  }

  /* What holds a value's bytes: the categories the chart stacks (scratch comes from the steps). */
  const CATEGORIES = ["parameter", "activation", "operand copy", "staging", "scratch"];
  const COLOURS = ["#3d6fb4", "#4c9f58", "#e8913a", "#9a67b5", "#c9a227"];
  function categoryOf(v) {
    if (v.role === "parameter") return 0;
    return v.kind === "operand" ? 2 : v.kind === "staging" ? 3 : v.kind === "scratch" ? 4 : 1;
  }

  /* Per step group, the selected tile's bytes by category: live allocation roots (an alias shares its
     root's storage and is not counted again) plus the step's scratch. */
  function breakdown(tile) {
    const out = steps.map((s) => { const b = [0, 0, 0, 0, 0]; b[4] = s.tile_scratch[tile][0] + s.tile_scratch[tile][1]; return b; });
    for (const v of values) {
      const bytes = v.tile_bytes[tile];
      if (!bytes || v.kind === "alias") continue;
      const c = categoryOf(v);
      for (let g = v.first_step; g <= v.last_step && g < steps.length; g++) out[g][c] += bytes;
    }
    return out;
  }

  const unit = window.ipuReport.tick;

  function tooltip(i, parts, event) {
    const box = $("tooltip"), s = steps[i], total = parts.reduce((a, b) => a + b, 0);
    const title = document.createElement("div");
    title.className = "tt-title";
    title.textContent = `Phase ${s.phases[0] === s.phases[1] ? s.phases[0] : s.phases[0] + "\u2013" + s.phases[1]}: ` +
      `${s.label}${s.op === null ? "" : " (op " + s.op + ")"}`;
    title.dataset.field = "op";
    const table = document.createElement("table");
    CATEGORIES.forEach((name, c) => {
      const tr = table.insertRow();
      tr.insertCell().textContent = name;
      tr.insertCell().textContent = R.bytes(parts[c]);
    });
    const tr = table.insertRow();
    tr.insertCell().textContent = `tile ${state.tile} in all`;
    const cell = tr.insertCell();
    cell.textContent = R.bytes(total);
    cell.dataset.field = "total";
    R.showTip(box, "memory", [title, table], event);
  }

  function chart() {
    const svg = $("chart");
    const w = svg.clientWidth || 800, h = svg.clientHeight || 260, left = 70, bottom = 34, top = 8;
    svg.setAttribute("viewBox", `0 0 ${w} ${h}`);
    while (svg.firstChild) svg.removeChild(svg.firstChild);
    const parts = breakdown(state.tile), totals = parts.map((b) => b.reduce((a, c) => a + c, 0));
    const most = Math.max(profile.budget, ...totals, 1);
    const { lo, hi } = state.view, dx = (w - left - 4) / (hi - lo);
    const xOf = (i) => left + (i - lo) * dx;
    const y = (v) => top + (h - top - bottom) * (1 - v / most);
    const add = (tag, attrs, text) => {
      const el = document.createElementNS(svgNS, tag);
      for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, v);
      if (text !== undefined) el.textContent = text;
      svg.appendChild(el);
      return el;
    };
    if (state.step >= lo && state.step < hi)
      add("rect", { class: "selected", x: xOf(state.step), y: top, width: Math.max(dx, 1), height: h - top - bottom });
    const raw = most / 4, power = Math.pow(2, Math.floor(Math.log2(Math.max(1, raw))));
    const tick = [1, 2, 4, 8].map((m) => m * power).find((t) => t >= raw) || 8 * power;
    for (let v = 0; v <= most; v += tick) {
      add("line", { x1: left, x2: w - 4, y1: y(v), y2: y(v), class: "grid" });
      add("text", { class: "axis", x: left - 6, y: y(v) + 4, "text-anchor": "end" }, unit(v));
    }
    /* Stacked categories: each step group a column. */
    const below = new Float64Array(steps.length);
    CATEGORIES.forEach((name, c) => {
      let d = "";
      for (let i = lo; i < hi; i++) {
        const x0 = xOf(i), x1 = x0 + dx, top0 = y(below[i] + parts[i][c]);
        d += `M${x0.toFixed(1)},${y(below[i]).toFixed(1)}H${x1.toFixed(1)}V${top0.toFixed(1)}H${x0.toFixed(1)}Z`;
        below[i] += parts[i][c];
      }
      add("path", { d, fill: COLOURS[c], "fill-opacity": 0.85, class: "category", "data-category": name });
    });
    add("line", { x1: left, x2: w - 4, y1: y(profile.budget), y2: y(profile.budget),
                  stroke: cssColour("--c-budget"), "stroke-dasharray": "4 3" });
    add("text", { class: "axis", x: w - 6, y: y(profile.budget) + 13, "text-anchor": "end" },
        "budget " + R.bytes(profile.budget));
    /* Ticks by the reports' one rule and label, each with its step group's label. */
    state.ticks = R.axisTicks(position, lo, hi, 6);
    for (const i of state.ticks) {
      add("text", { class: "axis", x: xOf(i) + dx / 2, y: h - bottom + 14, "text-anchor": "middle" },
          R.placeText(steps[i].phases[0], null));
      add("text", { class: "axis op", x: xOf(i) + dx / 2, y: h - bottom + 27, "text-anchor": "middle" }, steps[i].label);
    }
    const hit = add("rect", { class: "chart-hit", x: left, y: top, width: w - left - 4, height: h - top - bottom,
                              fill: "transparent" });
    const at = (event) => {
      const r = svg.getBoundingClientRect(), px = ((event.clientX - r.left) / r.width) * w;
      return R.clamp(lo + Math.floor((px - left) / dx), lo, hi - 1);
    };
    hit.addEventListener("pointermove", (event) => { const i = at(event); tooltip(i, parts[i], event); });
    hit.addEventListener("pointerleave", () => { $("tooltip").hidden = true; });
    R.dragZoom(hit, at, zoom, (i) => select(i));
  }

  /* Show step groups [lo, hi) (at least one). */
  function zoom(lo, hi) {
    lo = R.clamp(lo, 0, steps.length - 1);
    state.view = { lo, hi: R.clamp(hi, lo + 1, steps.length) };
    chart();
  }

  function stepInfo() {
    const s = steps[state.step], u = s.tile_usage[state.tile], pu = s.usage;
    const info = $("step-info");
    info.textContent = "";
    const parts = [
      ["Step group ", `${state.step} of ${steps.length - 1}`],
      [s.phases[0] === s.phases[1] ? ", phase " : ", phases ",
        s.phases[0] === s.phases[1] ? String(s.phases[0]) : `${s.phases[0]}\u2013${s.phases[1]}`], [": ", s.label],
      [" (", s.kind + (s.op === null ? "" : ` op ${s.op}`) + (s.executions > 1 ? `, runs ${s.executions} times` : "") + ")"],
      [". Tile ", String(state.tile)], [": standard ", fmt(u[0])], [" B, interleaved ", fmt(u[1])],
      [" B, total ", fmt(u[0] + u[1])], [" B. Step's peak tile ", String(s.peak_tile)], [": ", fmt(pu[0] + pu[1])],
      [" B; old bound (sum of maxima) ", fmt(s.coarse_usage)], [" B.", ""]];
    for (const [plain, bold] of parts) {
      info.appendChild(document.createTextNode(plain));
      if (bold) {
        const b = document.createElement("b");
        b.textContent = bold;
        info.appendChild(b);
      }
    }
    info.dataset.step = String(state.step);
    info.dataset.phase = String(state.phase);
    info.dataset.tile = String(state.tile);
  }

  function layoutText(v) {
    const l = v.layout;
    const present = l.tiles.filter((t) => t >= 0).length;
    return `${fmt(l.rows)} x ${fmt(l.cols)} of ${l.elem} B, ${l.row_parts} x ${l.col_parts} blocks` +
      (l.replicas > 1 ? ` x ${l.replicas} replicas` : "") + ` on ${present} tiles (block 0 on tile ${l.tiles.find((t) => t >= 0)})`;
  }

  function detailText(v, aliases) {
    const chosen = v.layout_op === null ? "" : `; layout chosen by op ${v.layout_op}`;
    return `${v.kind} of '${v.tensor}' (${v.role}), ${v.class}; layout ${layoutText(v)}; live steps ` +
      `${v.first_step}..${v.last_step}${chosen}; aliases: ${aliases.length ? aliases.map((a) => a.name).join(", ") : "none"}`;
  }

  function cell(tr, text, cls) {
    const td = document.createElement("td");
    td.textContent = text;
    if (cls) td.className = cls;
    tr.appendChild(td);
    return td;
  }

  function row(body, v, id, name, copies, payload, bytes, cls) {
    const tr = document.createElement("tr");
    tr.className = cls;
    tr.dataset.value = String(id);
    cell(tr, state.expanded.has(name) ? "▾" : "▸", "toggle");
    cell(tr, name);
    cell(tr, v.kind === "tensor" ? v.role : v.kind);
    cell(tr, v.class);
    cell(tr, String(copies), "num");
    cell(tr, fmt(payload), "num");
    cell(tr, fmt(bytes - payload), "num");
    cell(tr, fmt(bytes), "num");
    tr.addEventListener("click", () => {
      if (state.expanded.has(name)) state.expanded.delete(name);
      else state.expanded.add(name);
      table();
    });
    body.appendChild(tr);
    if (state.expanded.has(name)) {
      const detail = document.createElement("tr");
      detail.className = "detail-row";
      detail.dataset.value = String(id);
      cell(detail, "");
      const td = cell(detail, detailText(v, values.filter((a) => a.root === id && a !== v)));
      td.colSpan = 7;
      body.appendChild(detail);
    }
  }

  function table() {
    const body = $("values-body"), s = steps[state.step], t = state.tile;
    body.textContent = "";
    const filter = state.filter.toLowerCase();
    const live = s.live.map((id) => {
      const group = values.filter((v) => v.root === id);
      const bytes = Math.max(...group.map((v) => v.tile_bytes[t]));
      return { id, v: values[id], bytes, names: group.map((v) => v.name) };
    }).filter((e) => e.bytes > 0 && (!filter || e.names.some((n) => n.toLowerCase().includes(filter))));
    live.sort((a, b) => b.bytes - a.bytes || a.id - b.id);
    let listed = 0;
    for (const e of live) {
      const v = e.v, payload = v.tile_shards[t] * v.copies;
      if (v.copies > 1 && !state.grouped) {
        for (let m = 0; m < v.copies; m++)
          row(body, v, e.id, `${v.name}[${m}]`, 1, v.tile_shards[t], e.bytes / v.copies, "value-row member-row");
      } else {
        row(body, v, e.id, v.name, v.copies, payload, e.bytes, v.copies > 1 ? "value-row group-row" : "value-row");
      }
      listed += e.bytes;
    }
    const scratch = s.tile_scratch[t][0] + s.tile_scratch[t][1], usage = s.tile_usage[t][0] + s.tile_usage[t][1];
    $("scratch-bytes").textContent = fmt(scratch);
    $("usage-bytes").textContent = fmt(usage);
    body.dataset.listed = String(listed);
  }

  function render() {
    $("tile").value = String(state.tile);
    $("step").value = String(state.step);
    chart();
    stepInfo();
    table();
  }

  function wire() {
    $("tile").max = String(tiles - 1);
    $("step").max = String(steps.length - 1);
    $("tile").addEventListener("change", () => {
      const t = parseInt($("tile").value, 10);
      select(state.step, Number.isFinite(t) ? t : state.tile);
    });
    $("step").addEventListener("input", () => select(parseInt($("step").value, 10)));
    $("prev-step").addEventListener("click", () => select(state.step - 1));
    $("next-step").addEventListener("click", () => select(state.step + 1));
    $("step-peak-tile").addEventListener("click", () => select(state.step, steps[state.step].peak_tile));
    $("peak-total").addEventListener("click", () => select(profile.peak.step, profile.peak.tile));
    $("peak-standard").addEventListener("click", () => { const p = peakOf(0); select(p[1], p[2]); });
    $("peak-interleaved").addEventListener("click", () => { const p = peakOf(1); select(p[1], p[2]); });
    $("filter").addEventListener("input", () => { state.filter = $("filter").value; table(); });
    $("group-sequences").addEventListener("change", () => { state.grouped = $("group-sequences").checked; table(); });
    $("show-init").addEventListener("change", () => { state.showInit = $("show-init").checked; state.view = defaultView(); chart(); });
    $("reset-zoom").addEventListener("click", () => { state.view = defaultView(); chart(); });
    document.addEventListener("keydown", (event) => {
      if (event.target.tagName === "INPUT") return;
      if (event.key === "ArrowLeft") select(state.step - 1);
      if (event.key === "ArrowRight") select(state.step + 1);
    });
    window.addEventListener("resize", chart);
  }

  try {
    profile = JSON.parse($("memory-profile-data").textContent);
    check(profile);
    values = profile.timeline.values;
    steps = profile.timeline.steps;
    tiles = profile.tiles;
    state.view = defaultView();
    const goTo = (place) => {
      if (place.phase !== undefined) select(groupOf(place.phase), place.tile !== undefined ? place.tile : profile.peak.tile,
        place.phase);
      else select(profile.peak.step, place.tile !== undefined ? place.tile : profile.peak.tile);
    };
    const place = R.place();
    R.links("memory");
    header();
    wire();
    goTo(place);
    R.onPlaceChange(goTo);
    document.body.dataset.ready = "true";
  } catch (e) {
    R.fail("memory profile", e.message);
  }
  window.memoryProfile = Object.freeze({
    state: () => ({ tile: state.tile, step: state.step, phase: state.phase, grouped: state.grouped,
      filter: state.filter }),
    /** The step groups shown, [lo, hi), and zooming to a range as a drag would. */
    view: () => Object.assign({}, state.view),
    zoom: (lo, hi) => zoom(lo, hi),
    /** The chart's ticks: step group index, phase, iteration (none: the body is profiled once) and label. */
    ticks: () => state.ticks.map((i) => ({ index: i, phase: steps[i].phases[0], iteration: null,
      label: R.placeText(steps[i].phases[0], null) })),
  });
})();
