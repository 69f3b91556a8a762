// flightlog dashboard: the run waterfall and the per-turn token and context charts, as inline SVG.
//
// Data: GET /api/waterfall?session= (flightlog.web.waterfall_api). Redrawn when app.js's live stream
// appends an event (the "flightlog:event" DOM event), so a live run grows as its events land.
// Every node is built with createElementNS / createElement and every string goes in as textContent:
// nothing from the server becomes markup.
"use strict";

(function () {
  const doc = document;
  const SVG = "http://www.w3.org/2000/svg";
  const LANES = [
    ["model", "model calls"],
    ["tool", "tool runs"],
    ["approval", "approval waits"],
    ["suspended", "suspended"],
    ["compaction", "compaction"],
  ];
  const ROW = 22;
  const LABEL_W = 150;

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

  function ms(value) {
    if (value < 1000) return value + " ms";
    if (value < 60000) return (value / 1000).toFixed(value < 10000 ? 2 : 1) + " s";
    return Math.floor(value / 60000) + " min " + Math.round((value % 60000) / 1000) + " s";
  }

  function eventHref(sessionId, seq, elsewhere) {
    if (!elsewhere && doc.getElementById("seq-" + seq)) return "#seq-" + seq;
    return "/session?id=" + encodeURIComponent(sessionId) + "&start=" + seq + "#seq-" + seq;
  }

  function detail(box, pageSession, item) {
    const sessionId = typeof item.session === "string" ? item.session : pageSession; // a sub-agent's own span
    const elsewhere = sessionId !== pageSession;
    const lines = [el("strong", null, item.label)];
    if (elsewhere) lines.push(el("span", "muted", " · in sub-agent " + sessionId));
    if (item.start_ms !== undefined) lines.push(el("span", "muted", " · " + ms(item.end_ms - item.start_ms) + (item.open ? " so far" : "")));
    const out = el("p", "wf-detail-line");
    out.append(...lines);
    const more = el("p", "muted");
    if (item.seq !== undefined) {
      more.append("events ");
      const link = el("a", null, item.end_seq !== undefined && item.end_seq !== item.seq ? item.seq + "–" + item.end_seq : String(item.seq));
      link.setAttribute("href", eventHref(sessionId, item.seq, elsewhere));
      more.append(link, " (" + item.kind + ") ");
      const raw = el("pre", "raw wf-event");
      const button = el("button", "wf-show", "show event " + item.seq);
      button.type = "button";
      button.addEventListener("click", async function () {
        button.disabled = true;
        try {
          const url = "/api/event?session=" + encodeURIComponent(sessionId) + "&seq=" + item.seq;
          const response = await fetch(url, { credentials: "same-origin" });
          raw.textContent = await response.text();
        } catch (e) {
          raw.textContent = "cannot load the event: " + e.message;
        }
      });
      more.append(button);
      box.replaceChildren(out, more, raw);
      box.dataset.shown = item.label;
      return;
    } else if (item.href && item.href.startsWith("/") && !item.href.startsWith("//")) {
      const link = el("a", null, "open the sub-agent's session");
      link.setAttribute("href", item.href);
      more.append(link);
    }
    box.replaceChildren(out, more);
    box.dataset.shown = item.label;
  }

  function drawWaterfall(box, detailBox, sessionId, data) {
    const width = Math.max(box.clientWidth || 0, 600);
    const plot = width - LABEL_W - 10;
    const start = data.start_ms;
    const span = Math.max(1, data.end_ms - start);
    const x = (t) => LABEL_W + ((t - start) / span) * plot;
    const rows = LANES.filter(([lane]) => data.spans.some((s) => s.lane === lane));
    const childRows = data.children || [];
    const total = rows.length + childRows.length + (data.marks.length ? 1 : 0) + ((data.integrity || []).length ? 1 : 0);
    const height = 24 + Math.max(total, 1) * ROW;
    const root = svg("svg", { class: "waterfall", width: width, height: height, viewBox: "0 0 " + width + " " + height, role: "img" });
    root.append(svg("title", {}, "Where the time went: " + data.spans.length + " spans over " + ms(span)));
    for (let i = 0; i <= 4; i++) {
      const t = start + (span * i) / 4;
      root.append(svg("line", { class: "tick", x1: x(t), x2: x(t), y1: 16, y2: height }));
      root.append(svg("text", { class: "tick-label", x: Math.min(x(t) + 2, width - 50), y: 12 }, ms(t - start)));
    }
    const bar = (y, item, cls) => {
      const x0 = x(item.start_ms);
      const w = Math.max(3, x(item.end_ms) - x0);
      const rect = svg("rect", { class: "bar " + cls + (item.open ? " open" : ""), x: x0, y: y + 4, width: w, height: ROW - 8, tabindex: 0 });
      if (item.seq !== undefined) rect.setAttribute("data-seq", item.seq);
      rect.append(svg("title", {}, item.label + " · " + ms(item.end_ms - item.start_ms)));
      const show = () => detail(detailBox, sessionId, item);
      rect.addEventListener("click", show);
      rect.addEventListener("mouseenter", show);
      rect.addEventListener("focus", show);
      root.append(rect);
    };
    let y = 20;
    for (const [lane, name] of rows) {
      root.append(svg("text", { class: "lane-label", x: 4, y: y + ROW - 7 }, name));
      for (const s of data.spans) if (s.lane === lane) bar(y, s, "lane-" + lane);
      y += ROW;
    }
    for (const child of childRows) {
      const depth = Math.max(1, Math.min(child.depth || 1, 4));
      root.append(svg("text", { class: "lane-label sub depth-" + depth, x: 4 + 8 * depth, y: y + ROW - 7 }, "↳ " + child.label.slice(0, 22 - 2 * depth)));
      bar(y, child, "lane-sub-agent depth-" + depth);
      for (const inner of child.spans || []) {
        // the sub-agent's own model calls, tool runs and waits, nested inside its bar
        const x0 = x(inner.start_ms);
        const rect = svg("rect", { class: "bar inner lane-" + inner.lane + (inner.open ? " open" : ""), x: x0, y: y + 8, width: Math.max(2, x(inner.end_ms) - x0), height: ROW - 16, tabindex: 0, "data-seq": inner.seq });
        rect.append(svg("title", {}, inner.label + " · " + ms(inner.end_ms - inner.start_ms)));
        const show = () => detail(detailBox, sessionId, inner);
        rect.addEventListener("click", show);
        rect.addEventListener("mouseenter", show);
        rect.addEventListener("focus", show);
        root.append(rect);
      }
      y += ROW;
    }
    const markRow = (label, marks) => {
      if (!marks.length) return;
      root.append(svg("text", { class: "lane-label", x: 4, y: y + ROW - 7 }, label));
      for (const m of marks) {
        const cx = x(Math.min(Math.max(m.at_ms, start), data.end_ms));
        const mark = svg("path", { class: "mark mark-" + m.kind, d: "M" + cx + " " + (y + 4) + " l5 7 l-5 7 l-5 -7 z", tabindex: 0, "data-seq": m.seq });
        mark.append(svg("title", {}, m.label));
        const show = () => detail(detailBox, sessionId, m);
        mark.addEventListener("click", show);
        mark.addEventListener("mouseenter", show);
        mark.addEventListener("focus", show);
        root.append(mark);
      }
      y += ROW;
    };
    markRow("marks", data.marks);
    markRow("signatures", data.integrity || []);
    box.replaceChildren(root);
    box.dataset.spans = String(data.spans.length + childRows.length);
    box.dataset.events = String(data.events);
  }

  // A bar chart of per-turn values: series = [[key, name], ...] stacked; value(turn, key) -> number.
  function barChart(title, turns, series, value, unit) {
    const width = 600;
    const height = 150;
    const left = 60;
    const n = Math.max(turns.length, 1);
    const slot = (width - left - 10) / n;
    const totals = turns.map((t) => series.reduce((sum, [key]) => sum + value(t, key), 0));
    const top = Math.max(1, ...totals);
    const yOf = (v) => height - 20 - (v / top) * (height - 40);
    const root = svg("svg", { class: "chart", width: width, height: height, viewBox: "0 0 " + width + " " + height, role: "img" });
    root.append(svg("title", {}, title));
    root.append(svg("text", { class: "tick-label", x: 2, y: 12 }, String(top.toLocaleString()) + " " + unit));
    root.append(svg("line", { class: "tick", x1: left, x2: width, y1: height - 20, y2: height - 20 }));
    turns.forEach((t, i) => {
      let base = 0;
      for (const [key, name] of series) {
        const v = value(t, key);
        if (!v) continue;
        const rect = svg("rect", { class: "bar series-" + key, x: left + i * slot + 2, y: yOf(base + v), width: Math.max(2, slot - 4), height: yOf(base) - yOf(base + v) });
        rect.append(svg("title", {}, "turn " + t.turn + ": " + v.toLocaleString() + " " + name));
        root.append(rect);
        base += v;
      }
      if (n <= 40 || i % Math.ceil(n / 40) === 0) root.append(svg("text", { class: "tick-label", x: left + i * slot + 2, y: height - 6 }, String(t.turn)));
    });
    const legend = el("p", "legend");
    for (const [key, name] of series) {
      const swatch = el("span", "swatch series-" + key);
      legend.append(swatch, " " + name + "  ");
    }
    const figure = el("figure", "chart");
    figure.append(el("figcaption", null, title), root, legend);
    return figure;
  }

  function drawCharts(box, data) {
    const turns = data.turns || [];
    if (!turns.length) {
      box.replaceChildren(el("p", "empty", "No model usage recorded (not a kernel run, or no model call yet)."));
      return;
    }
    const tokens = barChart(
      "Tokens per turn",
      turns,
      [["input", "input"], ["output", "output"], ["cache_read", "cache read"], ["cache_write", "cache write"]],
      (t, key) => t[key] || 0,
      "tokens"
    );
    const filled = turns.filter((t) => t.fill);
    const parts = [tokens];
    if (filled.length) {
      const pct = filled.every((t) => t.fill.usable);
      parts.push(
        barChart(
          pct ? "Context window fill per turn (% of the tokens the window leaves for input)" : "Context fill per turn (estimated input tokens; window unknown)",
          filled,
          [["fill", pct ? "% full" : "tokens"]],
          (t) => (pct ? Math.round((100 * t.fill.fill) / t.fill.usable) : t.fill.fill),
          pct ? "%" : "tokens"
        )
      );
    }
    box.replaceChildren(...parts);
    box.dataset.turns = String(turns.length);
  }

  function start() {
    const section = doc.getElementById("waterfall");
    const chart = doc.getElementById("waterfall-chart");
    const detailBox = doc.getElementById("waterfall-detail");
    const charts = doc.getElementById("turn-charts");
    if (!section || !chart || !detailBox || !charts) return;
    const sessionId = section.dataset.session || "";
    let busy = false;
    let again = false;
    async function load() {
      if (busy) {
        again = true;
        return;
      }
      busy = true;
      try {
        const response = await fetch("/api/waterfall?session=" + encodeURIComponent(sessionId), { credentials: "same-origin", headers: { Accept: "application/json" } });
        const data = await response.json();
        if (!response.ok) throw new Error(data.error || "HTTP " + response.status);
        drawWaterfall(chart, detailBox, sessionId, data);
        drawCharts(charts, data);
      } catch (e) {
        chart.replaceChildren(el("p", "error", "cannot draw the waterfall: " + e.message));
      } finally {
        busy = false;
        if (again) {
          again = false;
          load();
        }
      }
    }
    doc.addEventListener("flightlog:event", load);
    doc.addEventListener("flightlog:status", load); // status changes carry the sub-agents' progress
    load();
  }

  if (doc.readyState === "loading") doc.addEventListener("DOMContentLoaded", start);
  else start();
})();
