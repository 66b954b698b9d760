/* nightly.js: the nightly matrix's summary page.  It reads #nightly-data
   (summary.json as harness/ipu_e2e/nightly.py writes it, each case with the
   files its command wrote as [label, relative path]) and shows one row per
   planned case: its status, each figure against the case's baseline with the
   ratio (a figure past the regression limit marked), the problems and
   regressions, and links to the case's reports and log.  The tables some
   cases add (the mutation catalogue, the ONNX node tests per op type)
   follow as text.  Numbers go through window.ipuReport's one format. */
(function () {
  "use strict";
  const R = window.ipuReport;
  const $ = (id) => document.getElementById(id);

  const el = R.element;

  /* A figure against its baseline: "6,427,060 (x1.004)"; cosines as a change. */
  function figure(cell, key, figures, baseline, limits) {
    const v = figures[key], b = baseline[key];
    if (typeof v !== "number") return;
    let text = key === "min_cosine" ? v.toFixed(6) : key === "wall_seconds" ? v.toFixed(1) : R.count(v);
    let worse = false;
    if (typeof b === "number") {
      if (key === "min_cosine") {
        text += " (" + (v - b >= 0 ? "+" : "") + (v - b).toFixed(6) + ")";
        worse = v < b - limits.cosine_drop;
      } else if (b) {
        text += " (x" + (v / b).toFixed(3) + ")";
        worse = key === "cycles" ? v > b * limits.cycles_ratio
          : v > b * limits.wall_ratio && v - b > limits.wall_margin_seconds;
      }
    }
    cell.textContent = text;
    cell.dataset.figure = key;
    if (worse) cell.classList.add("worse");
  }

  try {
    const data = JSON.parse($("nightly-data").textContent);
    const finished = data.cases.length, planned = data.planned.length;
    $("title").textContent = data.complete ? "Nightly matrix: " + data.passed + " of " + planned + " cases as expected"
      : "Nightly matrix INTERRUPTED: " + finished + " of " + planned + " planned cases finished";
    document.title = $("title").textContent;
    $("meta").textContent = data.command.join(" ");
    const table = $("cases");
    const head = el("tr", {}, el("thead", {}, table));
    for (const name of ["case", "status", "expect", "exit", "cycles (x baseline)", "min cosine (change)",
      "wall s (x baseline)", "files", "notes"]) el("th", {}, head, name);
    const body = el("tbody", {}, table);
    const byName = Object.fromEntries(data.cases.map((e) => [e.name, e]));
    for (const name of data.planned) {
      const e = byName[name];
      const tr = el("tr", { "data-case": name }, body);
      el("td", {}, tr, name);
      if (!e) {
        el("td", { class: "status-unfinished" }, tr, "not finished");
        continue;
      }
      el("td", { class: "status-" + e.status }, tr, e.status);
      el("td", {}, tr, e.expect);
      el("td", { class: "num" }, tr, String(e.exit));
      for (const key of ["cycles", "min_cosine", "wall_seconds"])
        figure(el("td", { class: "num" }, tr), key, e.figures || {}, e.baseline || {}, data.limits);
      const files = el("td", {}, tr);
      for (const [label, href] of e.links || []) el("a", { href }, files, label);
      el("td", { class: "notes" }, tr, e.problems.concat(e.regressions).join("; "));
    }
    const l = data.limits;
    $("limits").textContent = "A regression: cycles over the baseline x " + l.cycles_ratio + ", a min cosine more than " +
      l.cosine_drop + " below it, or a wall time over the baseline x " + l.wall_ratio + " and more than " +
      l.wall_margin_seconds + " s longer (measured as many jobs to a machine).";
    for (const e of data.cases) {
      for (const text of e.tables || []) {
        $("tables-panel").hidden = false;
        el("h3", {}, $("tables"), e.name);
        el("pre", { class: "table" }, $("tables"), text);
      }
    }
    document.body.dataset.ready = "true";
  } catch (error) {
    R.fail("nightly summary", error.message);
  }
})();
