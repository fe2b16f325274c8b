// tsmg view: the training runs' learning curves (data/curves.js), drawn as SVG.
//
// One chart per metric, every training run overlaid. Hover shows each run's value at the
// nearest update; dragging across a chart or the wheel zooms its update axis (double-click or
// "reset zoom" undoes it); the slider smooths every line with an exponential moving average,
// s_0 = x_0 and s_t = a·s_(t-1) + (1-a)·x_t over a run's points in update order (the raw line
// stays, faint); the legend hides and shows a run in every chart. Values reach the page as
// text and SVG attributes only.
"use strict";

(function () {
  const mount = document.getElementById("curves");
  if (!mount) return;
  const SVG = "http://www.w3.org/2000/svg";
  const WIDTH = 560, HEIGHT = 260;
  const LEFT = 58, RIGHT = 14, TOP = 12, BOTTOM = 30;
  const PLOT_WIDTH = WIDTH - LEFT - RIGHT, PLOT_HEIGHT = HEIGHT - TOP - BOTTOM;
  const COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"];
  const DOTS_BELOW = 40;  // a line of fewer points also shows each point as a dot
  const DRAG_PIXELS = 4;  // a shorter drag is a click, not a zoom

  let data = null;
  const hidden = new Set();  // runs the legend turned off
  let smoothing = 0;
  const charts = [];

  window.tsmgCurves = function (value) { data = value; };

  function el(tag, attributes, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attributes || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (key === "class") node.className = value; else node.setAttribute(key, String(value));
    }
    for (const child of children.flat()) if (child !== null && child !== undefined) node.append(child);
    return node;
  }

  function shape(tag, attributes) {
    const node = document.createElementNS(SVG, tag);
    for (const [key, value] of Object.entries(attributes || {})) node.setAttribute(key, String(value));
    return node;
  }

  function colour(run) { return COLOURS[run % COLOURS.length]; }

  // Four significant digits, trailing zeros dropped: 0.625, 12.35, 3e-05 -> "3e-5".
  function number(value) {
    if (value === 0) return "0";
    const size = Math.abs(value);
    if (size >= 1e5 || size < 1e-3) return value.toExponential(3).replace(/\.?0+e/, "e").replace("e+", "e");
    return String(Number(value.toPrecision(4)));
  }

  function smooth(values, weight) {
    if (!(weight > 0)) return values;
    const smoothed = new Array(values.length);
    let last = values[0];
    for (let i = 0; i < values.length; i++) {
      last = i === 0 ? values[0] : weight * last + (1 - weight) * values[i];
      smoothed[i] = last;
    }
    return smoothed;
  }

  // Round tick values (1, 2 or 5 times a power of ten) covering [low, high], about `count` of them.
  function ticks(low, high, count) {
    const span = high - low;
    if (!(span > 0)) return [low];
    const power = Math.pow(10, Math.floor(Math.log10(span / count)));
    const step = [1, 2, 5, 10].map((factor) => factor * power).find((candidate) => span / candidate <= count);
    const values = [];
    for (let tick = Math.ceil(low / step) * step; tick <= high + step * 1e-9; tick += step) values.push(Number(tick.toPrecision(12)));
    return values;
  }

  // The position of the first step >= `step` in a sorted list.
  function lowerBound(steps, step) {
    let low = 0, high = steps.length;
    while (low < high) {
      const middle = (low + high) >> 1;
      if (steps[middle] < step) low = middle + 1; else high = middle;
    }
    return low;
  }

  class Chart {
    constructor(metric, number) {
      this.metric = metric;
      const steps = metric.series.flatMap(([, points]) => [points[0], points[points.length - 1]]);
      this.extent = [Math.min(...steps), Math.max(...steps)];
      this.view = null;      // the zoomed update range, or null for all of it
      this.hoverStep = null;
      this.dragFrom = null;
      this.clip = "curve-clip-" + number;
      this.svg = shape("svg", { viewBox: `0 0 ${WIDTH} ${HEIGHT}`, class: "chart-plot", role: "img",
        "aria-label": metric.key });
      const clip = shape("clipPath", { id: this.clip });
      clip.append(shape("rect", { x: LEFT, y: TOP, width: PLOT_WIDTH, height: PLOT_HEIGHT }));
      this.axes = shape("g", { class: "axes" });
      this.lines = shape("g", { class: "lines", "clip-path": `url(#${this.clip})` });
      this.hover = shape("g", { class: "hover" });
      this.selection = shape("rect", { class: "selection", y: TOP, height: PLOT_HEIGHT, width: 0, x: LEFT, visibility: "hidden",
        fill: "#2457c5", opacity: 0.15 });
      this.overlay = shape("rect", { class: "overlay", x: LEFT, y: TOP, width: PLOT_WIDTH, height: PLOT_HEIGHT, fill: "transparent" });
      this.svg.append(clip, this.axes, this.lines, this.hover, this.selection, this.overlay);
      this.readout = el("div", { class: "readout" }, "Hover over the chart to read its values.");
      const reset = el("button", { type: "button", class: "reset-zoom" }, "reset zoom");
      reset.addEventListener("click", () => this.zoom(null));
      this.node = el("figure", { class: "chart", "data-metric": metric.key },
        el("figcaption", {}, el("b", {}, metric.title), metric.title === metric.key ? "" : el("code", {}, metric.key), reset),
        this.svg, this.readout);
      this.listen();
    }

    domain() {
      const [low, high] = this.view || this.extent;
      return low === high ? [low - 1, high + 1] : [low, high];
    }

    x(step) { return LEFT + (step - this.low) / (this.high - this.low) * PLOT_WIDTH; }

    step(pixel) { return this.low + (pixel - LEFT) / PLOT_WIDTH * (this.high - this.low); }

    // The SVG x coordinate of a mouse event (the chart is scaled to its box).
    pixel(event) {
      const box = this.svg.getBoundingClientRect();
      return (event.clientX - box.left) * WIDTH / box.width;
    }

    visible() {
      return this.metric.series.filter(([run]) => !hidden.has(run))
        .map(([run, steps, values]) => ({ run, steps, values, smoothed: smooth(values, smoothing) }));
    }

    draw() {
      const [low, high] = this.domain();
      [this.low, this.high] = [low, high];  // the update axis of x() and step() until the next draw
      const series = this.visible();
      this.svg.dataset.x0 = String(low);
      this.svg.dataset.x1 = String(high);
      // The value axis fits the points in the zoomed range (raw and smoothed).
      let bottom = Infinity, top = -Infinity;
      for (const { steps, values, smoothed } of series) {
        for (let i = lowerBound(steps, low); i < steps.length && steps[i] <= high; i++) {
          bottom = Math.min(bottom, values[i], smoothed[i]);
          top = Math.max(top, values[i], smoothed[i]);
        }
      }
      if (bottom === Infinity) { bottom = 0; top = 1; }
      if (bottom === top) { const pad = Math.abs(top) * 0.1 || 1; bottom -= pad; top += pad; }
      const pad = (top - bottom) * 0.05;
      this.range = [bottom - pad, top + pad];
      this.drawAxes(low, high);
      this.lines.replaceChildren();
      for (const { run, steps, values, smoothed } of series) {
        if (smoothed !== values) this.lines.append(this.path(steps, values, run, "series raw"));
        this.lines.append(this.path(steps, smoothed, run, "series"));
        if (steps.length < DOTS_BELOW) {
          steps.forEach((step, i) => this.lines.append(shape("circle", { class: "point", cx: this.x(step), cy: this.y(smoothed[i]),
            r: 2.5, fill: colour(run) })));
        }
      }
      this.showHover(this.hoverStep);
    }

    y(value) { const [bottom, top] = this.range; return TOP + (top - value) / (top - bottom) * PLOT_HEIGHT; }

    // The line through the points in the zoomed range (and one beyond each end). Of the points
    // falling in one pixel column only the first, lowest, highest and last are kept: a run of
    // 10,000 updates draws as a line of a few per column, the same shape.
    path(steps, values, run, className) {
      const [low, high] = this.domain();
      const from = Math.max(0, lowerBound(steps, low) - 1), to = Math.min(steps.length, lowerBound(steps, high) + 1);
      const points = [];
      for (let i = from; i < to;) {
        const column = Math.floor(this.x(steps[i]));
        let end = i, lowest = i, highest = i;
        while (end + 1 < to && Math.floor(this.x(steps[end + 1])) === column) {
          end++;
          if (values[end] < values[lowest]) lowest = end;
          if (values[end] > values[highest]) highest = end;
        }
        for (const kept of [...new Set([i, lowest, highest, end])].sort((a, b) => a - b)) {
          points.push(`${this.x(steps[kept]).toFixed(1)},${this.y(values[kept]).toFixed(1)}`);
        }
        i = end + 1;
      }
      return shape("path", { class: className, "data-run": run, d: "M" + points.join("L"), fill: "none", stroke: colour(run),
        "stroke-width": className === "series" ? 1.8 : 1, opacity: className === "series" ? 1 : 0.25 });
    }

    drawAxes(low, high) {
      this.axes.replaceChildren(shape("rect", { x: LEFT, y: TOP, width: PLOT_WIDTH, height: PLOT_HEIGHT, fill: "#fbfbfc", stroke: "#d8dce4" }));
      for (const tick of ticks(low, high, 6).filter((value) => Number.isInteger(value) || high - low < 6)) {
        const at = this.x(tick);
        this.axes.append(shape("line", { x1: at, x2: at, y1: TOP + PLOT_HEIGHT, y2: TOP + PLOT_HEIGHT + 4, stroke: "#5d6678" }));
        const label = shape("text", { x: at, y: HEIGHT - 14, "text-anchor": "middle", class: "tick x-tick" });
        label.textContent = number(tick);
        this.axes.append(label);
      }
      for (const tick of ticks(this.range[0], this.range[1], 5)) {
        const at = this.y(tick);
        this.axes.append(shape("line", { x1: LEFT, x2: LEFT + PLOT_WIDTH, y1: at, y2: at, stroke: "#e6e8ee" }));
        const label = shape("text", { x: LEFT - 6, y: at, "text-anchor": "end", "dominant-baseline": "middle", class: "tick y-tick" });
        label.textContent = number(tick);
        this.axes.append(label);
      }
      const title = shape("text", { x: LEFT + PLOT_WIDTH / 2, y: HEIGHT - 2, "text-anchor": "middle", class: "axis-title" });
      title.textContent = "update";
      this.axes.append(title);
    }

    // The update nearest `step` among the shown runs' points in the zoomed range (null: none).
    nearest(step) {
      const [low, high] = this.domain();
      let best = null;
      for (const { steps } of this.visible()) {
        const at = lowerBound(steps, step);
        for (const i of [at - 1, at]) {
          if (i < 0 || i >= steps.length || steps[i] < low || steps[i] > high) continue;
          if (best === null || Math.abs(steps[i] - step) < Math.abs(best - step)) best = steps[i];
        }
      }
      return best;
    }

    // The readout (each shown run's value at `step`) and the crosshair; none for null.
    showHover(step) {
      this.hoverStep = step;
      this.hover.replaceChildren();
      if (step === null) return;
      const at = this.x(step);
      this.hover.append(shape("line", { x1: at, x2: at, y1: TOP, y2: TOP + PLOT_HEIGHT, stroke: "#5d6678", "stroke-dasharray": "3 3" }));
      const values = el("ul", {});
      for (const { run, steps, values: raw, smoothed } of this.visible()) {
        const i = lowerBound(steps, step);
        const has = steps[i] === step;
        if (has) this.hover.append(shape("circle", { cx: at, cy: this.y(smoothed[i]), r: 4, fill: colour(run), stroke: "#fff" }));
        const swatch = el("span", { class: "swatch", "data-run": run });
        swatch.style.background = colour(run);
        values.append(el("li", { class: "value", "data-run": run }, swatch, el("span", { class: "name" }, data.runs[run]), " ",
          el("span", { class: "raw" }, has ? number(raw[i]) : "—"),
          has && smoothed !== raw ? el("span", { class: "smoothed" }, " (smoothed ", el("span", { class: "ema" }, number(smoothed[i])), ")") : null));
      }
      this.readout.dataset.step = String(step);
      this.readout.replaceChildren(el("b", { class: "update" }, `update ${step}`), values);
    }

    zoom(range) {
      if (range !== null) {
        const low = Math.max(this.extent[0], Math.min(range[0], range[1]));
        const high = Math.min(this.extent[1], Math.max(range[0], range[1]));
        range = high > low && (low > this.extent[0] || high < this.extent[1]) ? [low, high] : null;
      }
      this.view = range;
      this.hoverStep = null;
      this.readout.replaceChildren("Hover over the chart to read its values.");
      delete this.readout.dataset.step;
      this.draw();
    }

    listen() {
      const overlay = this.overlay;
      overlay.addEventListener("mousemove", (event) => {
        const pixel = Math.min(LEFT + PLOT_WIDTH, Math.max(LEFT, this.pixel(event)));
        if (this.dragFrom !== null) {
          this.selection.setAttribute("x", Math.min(pixel, this.dragFrom));
          this.selection.setAttribute("width", Math.abs(pixel - this.dragFrom));
          this.selection.setAttribute("visibility", "visible");
        }
        this.showHover(this.nearest(this.step(pixel)));
      });
      overlay.addEventListener("mousedown", (event) => {
        if (event.button !== 0) return;
        event.preventDefault();
        this.dragFrom = this.pixel(event);
      });
      window.addEventListener("mouseup", (event) => {
        if (this.dragFrom === null) return;
        const from = this.dragFrom, to = Math.min(LEFT + PLOT_WIDTH, Math.max(LEFT, this.pixel(event)));
        this.dragFrom = null;
        this.selection.setAttribute("visibility", "hidden");
        if (Math.abs(to - from) > DRAG_PIXELS) this.zoom([this.step(from), this.step(to)]);
      });
      overlay.addEventListener("wheel", (event) => {
        event.preventDefault();
        const [low, high] = this.domain();
        const centre = this.step(this.pixel(event));
        const factor = event.deltaY > 0 ? 1.25 : 0.8;  // down: out, up: in
        this.zoom([centre - (centre - low) * factor, centre + (high - centre) * factor]);
      }, { passive: false });
      overlay.addEventListener("dblclick", () => this.zoom(null));
    }
  }

  function legend() {
    const box = el("div", { class: "legend" }, el("b", {}, "Runs "));
    data.runs.forEach((name, run) => {
      const check = el("input", { type: "checkbox", checked: "checked", "data-run": run });
      check.addEventListener("change", () => {
        if (check.checked) hidden.delete(run); else hidden.add(run);
        for (const chart of charts) chart.draw();
      });
      const swatch = el("span", { class: "swatch" });
      swatch.style.background = colour(run);
      box.append(el("label", { class: "legend-run", "data-run": run }, check, swatch, name));
    });
    return box;
  }

  function smoothingControl() {
    const slider = el("input", { type: "range", name: "smoothing", min: 0, max: 0.99, step: 0.01, value: 0 });
    const shown = el("output", {}, "0 (off)");
    let pending = false;  // a slider drag fires many events: redraw once per frame
    slider.addEventListener("input", () => {
      smoothing = Number(slider.value);
      shown.textContent = smoothing > 0 ? slider.value : "0 (off)";
      if (pending) return;
      pending = true;
      requestAnimationFrame(() => { pending = false; for (const chart of charts) chart.draw(); });
    });
    return el("label", { class: "smoothing" }, "smoothing (moving average weight) ", slider, " ", shown);
  }

  function draw() {
    const grid = el("div", { class: "charts" });
    const add = (metric) => {
      const chart = new Chart(metric, charts.length);
      charts.push(chart);
      grid.append(chart.node);
      chart.draw();
    };
    const rest = data.metrics.slice(data.shown);
    const more = el("select", { name: "metric" }, el("option", { value: "" }, `another metric (${rest.length})…`),
      rest.map((metric) => el("option", { value: metric.key }, metric.key)));
    more.addEventListener("change", () => {
      const metric = rest.find((candidate) => candidate.key === more.value);
      if (metric) { add(metric); more.selectedOptions[0].remove(); }
      more.value = "";
    });
    mount.replaceChildren(el("div", { class: "curve-controls" }, legend(), smoothingControl(),
      rest.length ? el("label", {}, "add a chart: ", more) : null,
      el("span", { class: "hint" }, "drag across a chart or use the wheel to zoom; double-click to reset")), grid);
    // One chart per task: the page stays responsive while many long runs are drawn.
    const first = data.metrics.slice(0, data.shown);
    const next = () => {
      if (first.length) { add(first.shift()); setTimeout(next, 0); } else mount.dataset.status = "ready";
    };
    next();
  }

  const script = document.createElement("script");
  script.src = "data/curves.js";
  script.onload = () => { script.remove(); if (data) draw(); };
  script.onerror = () => { mount.replaceChildren(el("p", { class: "error" }, "The learning curves (data/curves.js) could not be loaded.")); };
  document.head.append(script);
})();
