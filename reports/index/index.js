/* index.js: the run index page.  It reads #index-data (written by
   harness/ipu_e2e/run_reports.py: the run's workload, device, status,
   cycles, estimate or rejection and command line; its reports with relative
   links; the planner's memory profiles; for a failed run, the text the CLI
   printed about the fault or the first divergent op and where it happened)
   and lists them.  A failed run's page leads with that text and links that
   open the placement viewer and the run profile at the failure's tile,
   phase, iteration and address.  Numbers go through window.ipuReport's one
   format. */
(function () {
  "use strict";
  const R = window.ipuReport;
  const $ = (id) => document.getElementById(id);
  const WHAT = {
    placement: ["Placement viewer", "every allocation's address and lifetime per tile, the listing, the footprint"],
    memory: ["Memory profile of the packaged plan", "the planner's live storage per tile and step, before placement"],
    run_profile: ["Run profile", "cycles per executed step and tile, and the run-time memory timeline"],
    result: ["result.json", "the run's record: plan, checks, cycles, the command and the library's SHA-256"],
    memory_timeline: ["memory-timeline.json", "the device's allocation events, analysed: live bytes by category"],
    package: ["Package", "the saved package this run replayed"],
    compare: ["Comparison", "this run beside another (ipu-e2e-compare): cycles per op, peaks per tile, plans"],
    trace: ["Trace", "the run in the Chrome trace event format: open it in Perfetto or chrome://tracing"],
    build: ["Build", "the index of the run that compiled and saved the package"],
    run: ["Run", "the index of the run that replayed this build's package"],
  };

  function fact(list, label, value, cls) {
    const dt = document.createElement("dt"), dd = document.createElement("dd");
    dt.textContent = label;
    if (value instanceof Node) dd.append(value); else dd.textContent = value;
    if (cls) dd.className = cls;
    list.append(dt, dd);
  }

  function link(href, text) {
    const a = document.createElement("a");
    a.href = href;
    a.textContent = text;
    return a;
  }

  try {
    const data = JSON.parse($("index-data").textContent), run = data.run;
    $("title").textContent = "Run index \u2014 " + (run.workload || "run") + " on " + (run.device || "?");
    document.title = $("title").textContent;
    $("meta").textContent = (run.tiles != null ? run.tiles + " tiles \u00b7 " : "") + (run.status || "");
    const facts = $("facts");
    fact(facts, "status", run.status || "unknown", "status-" + run.status);
    if (run.cycles != null)
      fact(facts, "simulated", R.count(Number(run.cycles)) + " cycles (" + R.ms(run.ms) + ")");
    if (run.estimate != null) fact(facts, "estimated peak", R.bytes(run.estimate) + " on the fullest tile");
    if (run.rejection) fact(facts, "rejected", run.rejection);
    const code = document.createElement("code");
    code.textContent = run.command.join(" ");
    fact(facts, "command", code);
    const failure = data.failure || {};
    if (failure.lines && failure.lines.length) {
      $("failure-panel").hidden = false;
      $("failure-text").textContent = failure.lines.join("\n");
      const hash = failure.place ? R.hashOf(failure.place) : "";
      const where = failure.place || {};
      const at = (where.tile != null ? "tile " + where.tile + ", " : "") + "phase " + where.phase +
        (where.iteration != null ? ", iteration " + where.iteration : "");
      for (const entry of data.reports) {
        if (!hash || (entry.kind !== "placement" && entry.kind !== "run_profile")) continue;
        const a = link(entry.href + "#" + hash, (entry.kind === "placement" ? "Placement at " : "Run profile at ") + at);
        a.dataset.report = entry.kind;
        $("failure-links").append(a);
      }
    }
    for (const entry of data.reports) {
      const li = document.createElement("li"), what = WHAT[entry.kind] || [entry.kind, ""];
      li.dataset.report = entry.kind;
      const note = document.createElement("span");
      note.className = "what";
      note.textContent = what[1];
      li.append(link(entry.href, what[0] + (entry.kind === "compare" ? " (" + entry.href + ")" : "")), note);
      $("reports").append(li);
    }
    if (data.memory_profiles.length) {
      $("profiles-panel").hidden = false;
      for (const p of data.memory_profiles) {
        const li = document.createElement("li");
        const json = link(p.json, "JSON");
        json.className = "what";
        li.append(link(p.href, p.name), json);
        $("profiles").append(li);
      }
    }
    document.body.dataset.ready = "true";
  } catch (e) {
    R.fail("run index", e.message);
  }
})();
