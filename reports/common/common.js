/* common.js: helpers shared by the standalone reports (the run-profile report,
   reports/run_profile/report.js, and the placement viewer,
   reports/placement/viewer.js).  Each writer (harness/ipu_e2e/report.py,
   placement_report.py) inlines this file before the report's own script; it
   defines one global, window.ipuReport:
     clamp(v, lo, hi)          v limited to [lo, hi];
     fail(prefix, message)     shows message in the page's #error box and logs
                               "prefix: message" as a console error;
     fitCanvas(canvas, font)   sizes the canvas's backing store to its CSS box
                               (device pixel ratio), clears it and returns
                               { ctx, w, h } with ctx in CSS pixels and font set;
     localPoint(canvas, event) the event's position in the canvas's CSS pixels. */
(function () {
  "use strict";

  const clamp = (v, lo, hi) => Math.min(hi, Math.max(lo, v));

  function fail(prefix, message) {
    const box = document.getElementById("error");
    box.textContent = message;
    box.hidden = false;
    console.error(prefix + ": " + message);
  }

  function fitCanvas(canvas, font) {
    const ratio = window.devicePixelRatio || 1;
    const w = canvas.clientWidth, hgt = canvas.clientHeight;
    const bw = Math.max(1, Math.round(w * ratio)), bh = Math.max(1, Math.round(hgt * ratio));
    if (canvas.width !== bw) canvas.width = bw;
    if (canvas.height !== bh) canvas.height = bh;
    const ctx = canvas.getContext("2d");
    ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
    ctx.clearRect(0, 0, w, hgt);
    ctx.font = font;
    return { ctx, w, h: hgt };
  }

  function localPoint(canvas, event) {
    const rect = canvas.getBoundingClientRect();
    return { x: event.clientX - rect.left, y: event.clientY - rect.top };
  }

  window.ipuReport = Object.freeze({ clamp, fail, fitCanvas, localPoint });
})();
