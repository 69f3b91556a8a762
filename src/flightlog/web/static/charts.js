// flightlog dashboard: a run's cumulative cost at list prices and its entropy score per turn, as inline SVG.
//
// Data: GET /api/charts?session= (flightlog.web.charts_api). Redrawn when app.js's live stream appends an
// event (the "flightlog:event" DOM event). Every node is built with createElementNS / createElement and
// every string goes in as textContent: nothing from the server becomes markup.
"use strict";

(function () {
  const doc = document;
  const SVG = "http://www.w3.org/2000/svg";
  const W = 600;
  const H = 160;
  const LEFT = 64;

  function svg(tag, attrs, text) {
    const node = doc.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, String(v));
    if (text !== undefined) node.textContent = String(text);
    return node;
  }

  function el(tag, cls, text) {
    const node = doc.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined) node.textContent = String(text);
    return node;
  }

  function usd(value) {
    if (value === null || value === undefined) return "unknown";
    if (value === 0) return "$0";
    return "$" + (value < 0.01 ? value.toFixed(5) : value.toFixed(value < 1 ? 4 : 2));
  }

  // A line over turns: points = [{turn, y, cls, tip}], top = the y axis maximum.
  function lineChart(id, title, points, top, unit, extra) {
    const root = svg("svg", { id: id, class: "chart", width: W, height: H, viewBox: "0 0 " + W + " " + H, role: "img" });
    root.append(svg("title", {}, title));
    const n = Math.max(points.length, 1);
    const step = (W - LEFT - 20) / Math.max(n - 1, 1);
    const x = (i) => LEFT + 10 + i * step;
    const y = (v) => H - 22 - (v / top) * (H - 44);
    root.append(svg("text", { class: "tick-label", x: 2, y: 14 }, unit(top)));
    root.append(svg("text", { class: "tick-label", x: 2, y: H - 22 }, unit(0)));
    root.append(svg("line", { class: "tick", x1: LEFT, x2: W, y1: H - 22, y2: H - 22 }));
    if (extra) extra(root, y);
    const known = points.filter((p) => p.y !== null);
    if (known.length > 1) {
      const d = points.map((p, i) => (p.y === null ? null : [x(i), y(p.y)])).filter(Boolean).map((xy, i) => (i ? "L" : "M") + xy[0].toFixed(1) + " " + xy[1].toFixed(1)).join(" ");
      root.append(svg("path", { class: "line " + id, d: d }));
    }
    points.forEach((p, i) => {
      if (p.y !== null) {
        const dot = svg("circle", { class: "dot " + (p.cls || ""), cx: x(i), cy: y(p.y), r: 3.5, "data-turn": p.turn });
        dot.append(svg("title", {}, p.tip));
        root.append(dot);
      } else {
        const gap = svg("text", { class: "tick-label unknown", x: x(i) - 3, y: H - 28 }, "?");
        gap.append(svg("title", {}, p.tip));
        root.append(gap);
      }
      if (n <= 30 || i % Math.ceil(n / 30) === 0) root.append(svg("text", { class: "tick-label", x: x(i) - 3, y: H - 6 }, String(p.turn)));
    });
    const figure = el("figure", "chart");
    figure.append(el("figcaption", null, title), root);
    return figure;
  }

  function costChart(cost) {
    const box = el("div", "cost-chart");
    box.id = "cost-chart";
    if (!cost.calls) return null;
    if (cost.total === null) {
      box.append(el("p", "empty", "Cost unknown: no list price for " + cost.unknown.join(", ") + " (never guessed)."));
      box.dataset.total = "unknown";
      return box;
    }
    const points = cost.turns.map((t) => ({
      turn: t.turn,
      y: t.cost === null ? null : t.cumulative,
      tip: "turn " + t.turn + " (" + t.models.join(", ") + "): " + (t.cost === null ? "cost unknown" : usd(t.cost) + ", " + usd(t.cumulative) + " so far"),
    }));
    const top = Math.max(cost.total, 1e-6);
    box.append(lineChart("cost-line", "Cumulative cost at list prices (USD)", points, top, usd));
    const note = el("p", "muted");
    note.append(
      "Total " + usd(cost.total) + (cost.partial ? " for the priced calls only; no list price for " + cost.unknown.join(", ") : "") +
        ". List prices read " + cost.checked + " (" + cost.sources.join("; ") + "); a picture, not a bill."
    );
    box.append(note);
    box.dataset.total = usd(cost.total);
    return box;
  }

  function entropyChart(entropy) {
    const samples = entropy.samples || [];
    if (!samples.length) return null;
    const threshold = entropy.threshold;
    const top = Math.max(1, threshold || 0, ...samples.map((s) => s.score));
    const points = samples.map((s) => ({
      turn: s.turn,
      y: s.score,
      cls: s.alert ? "alert" : "",
      tip: "turn " + s.turn + ": score " + s.score.toFixed(3) + (s.alert ? " (alert)" : ""),
    }));
    const drawThreshold = (root, y) => {
      if (threshold === null || threshold === undefined) return;
      root.append(svg("line", { class: "threshold", x1: LEFT, x2: W, y1: y(threshold), y2: y(threshold) }));
      root.append(svg("text", { class: "tick-label", x: W - 120, y: y(threshold) - 4 }, "alert threshold " + threshold));
    };
    const figure = lineChart("entropy-line", "Entropy score per turn (the entropy watch's samples)", points, top, (v) => v.toFixed(2), drawThreshold);
    figure.id = "entropy-chart";
    figure.dataset.samples = String(samples.length);
    return figure;
  }

  function start() {
    const box = doc.getElementById("run-charts");
    if (!box) return;
    const sessionId = box.dataset.session || "";
    let busy = false;
    let again = false;
    async function load() {
      if (busy) {
        again = true;
        return;
      }
      busy = true;
      try {
        const response = await fetch("/api/charts?session=" + encodeURIComponent(sessionId), { credentials: "same-origin", headers: { Accept: "application/json" } });
        const data = await response.json();
        if (!response.ok) throw new Error(data.error || "HTTP " + response.status);
        const parts = [costChart(data.cost), entropyChart(data.entropy)].filter(Boolean);
        box.replaceChildren(...parts);
        box.dataset.loaded = "1";
      } catch (e) {
        box.replaceChildren(el("p", "error", "cannot draw the cost and entropy charts: " + e.message));
      } finally {
        busy = false;
        if (again) {
          again = false;
          load();
        }
      }
    }
    doc.addEventListener("flightlog:event", load);
    load();
  }

  if (doc.readyState === "loading") doc.addEventListener("DOMContentLoaded", start);
  else start();
})();
