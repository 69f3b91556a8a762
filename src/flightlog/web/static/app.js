// flightlog dashboard: live updates over server-sent events, approvals, "show more".
// Everything from the server is data: nodes are built with createElement and filled with textContent,
// never innerHTML, and links are only ever the dashboard's own paths.
"use strict";

(function () {
  const doc = document;
  doc.documentElement.classList.add("js");
  const OPERATOR_KEY = "flightlog.operator";

  function csrf() {
    const meta = doc.querySelector('meta[name="csrf-token"]');
    return meta ? meta.getAttribute("content") || "" : "";
  }

  // a path of the dashboard, or an anchor on this page ("#approvals"); anything else is "#"
  function localPath(href) {
    if (typeof href !== "string") return "#";
    return (href.startsWith("/") && !href.startsWith("//")) || /^#[A-Za-z0-9_-]*$/.test(href) ? href : "#";
  }

  // el("span", {class: "badge", text: "x", href: "/..."}, child, ...): text goes in as a Text node.
  function el(tag, attrs, ...children) {
    const node = doc.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false || value === "") continue;
      if (key === "text") node.textContent = String(value);
      else if (key === "class") node.className = String(value);
      else if (key === "href") node.setAttribute("href", localPath(value));
      else node.setAttribute(key, String(value));
    }
    for (const child of children) {
      if (child !== null && child !== undefined && child !== "") node.append(child);
    }
    return node;
  }

  function notice(message, isError) {
    const box = doc.getElementById("notice");
    if (!box) return;
    box.textContent = message;
    box.classList.toggle("error", Boolean(isError));
    box.hidden = false;
  }

  function setLive(up, text) {
    const live = doc.getElementById("live");
    if (!live) return;
    live.textContent = text;
    live.classList.toggle("down", !up);
  }

  // ─── operator name (remembered in localStorage) ──────────────────────────────────────────
  function operatorInput() {
    return doc.getElementById("operator");
  }

  function initOperator() {
    const input = operatorInput();
    if (!input) return;
    try {
      input.value = localStorage.getItem(OPERATOR_KEY) || "";
    } catch (e) {
      /* storage disabled: the field still works for this page */
    }
    input.addEventListener("input", function () {
      try {
        localStorage.setItem(OPERATOR_KEY, input.value.trim());
      } catch (e) {
        /* ignore */
      }
    });
  }

  // ─── approvals ────────────────────────────────────────────────────────────────────────────
  function decideForm(row, next) {
    return el(
      "form",
      { class: "decide", method: "post", action: "/approvals/decide" },
      el("input", { type: "hidden", name: "csrf", value: csrf() }),
      el("input", { type: "hidden", name: "session_id", value: row.session_id }),
      el("input", { type: "hidden", name: "call_id", value: row.call_id }),
      el("input", { type: "hidden", name: "next", value: localPath(next) }),
      el("input", { class: "nojs", type: "text", name: "operator", maxlength: "80", placeholder: "operator name" }),
      el("input", { type: "text", name: "reason", maxlength: "2000", placeholder: "reason (told to the model on deny)" }),
      el("button", { type: "submit", name: "decision", value: "approve", class: "approve", text: "Approve" }),
      el("button", { type: "submit", name: "decision", value: "deny", class: "deny", text: "Deny" })
    );
  }

  function pendingItem(row, next) {
    return el(
      "li",
      { class: "pending", "data-session": row.session_id, "data-call": row.call_id },
      el(
        "div",
        { class: "pending-head" },
        el("span", { class: "tool", text: row.tool }),
        " ",
        el("span", { class: "badge", text: row.kind }),
        " ",
        el("span", { class: "muted", text: "call" }),
        " ",
        el("code", { class: "call", text: row.call }),
        " ",
        el("span", { class: "muted", text: "turn " + row.turn + " of" }),
        " ",
        el("a", { class: "session", href: row.href, text: row.session })
      ),
      el("div", { class: "reason", text: row.reason }),
      el("pre", { class: "args", text: row.arguments }),
      row.answer_in
        ? el(
            "div",
            { class: "answer-in muted" },
            "Answered where it runs, not here: ",
            el("code", { text: row.answer_in })
          )
        : decideForm(row, next)
    );
  }

  const rendered = { pending: null, waiting: null };

  function renderPending(rows, next) {
    const box = doc.getElementById("pending");
    if (!box) return;
    const key = JSON.stringify(rows.map((r) => [r.session_id, r.call_id]));
    if (key === rendered.pending) return; // keep what the operator is typing
    rendered.pending = key;
    const list = el("ul", { class: "pending-list" });
    for (const row of rows) list.append(pendingItem(row, next));
    if (!rows.length) list.append(el("li", { class: "empty", text: "Nothing is waiting for a decision." }));
    box.replaceChildren(list);
  }

  function renderWaiting(rows) {
    const box = doc.getElementById("waiting");
    if (!box) return;
    const key = JSON.stringify(rows);
    if (key === rendered.waiting) return;
    rendered.waiting = key;
    const list = el("ul", { class: "waiting-list" });
    for (const row of rows) {
      list.append(
        el(
          "li",
          { class: "waiting" },
          el("a", { href: row.href, text: row.session }),
          row.decisions && row.decisions.length ? " decided (" + row.decisions.join("; ") + "), waiting for a resume: " : " decided, waiting for a resume: ",
          el("code", { text: row.command })
        )
      );
    }
    box.replaceChildren(list);
  }

  function renderInDoubt(rows) {
    const box = doc.getElementById("in-doubt");
    if (!box || !rows) return;
    const list = el("ul", { class: "in-doubt-list" });
    for (const row of rows) {
      list.append(
        el(
          "li",
          { class: "in-doubt warn" },
          el("code", { text: row.call }),
          " of ",
          el("a", { href: row.href, text: row.session }),
          " (" + row.run + "): in doubt: " + row.said + ". " + row.todo
        )
      );
    }
    box.replaceChildren(...(rows.length ? [list] : []));
  }

  function renderUnreadable(rows) {
    const box = doc.getElementById("unreadable");
    if (!box || !rows) return;
    const list = el("ul", { class: "unreadable-list" });
    for (const row of rows) {
      list.append(el("li", { class: "unreadable warn" }, el("a", { href: row.href, text: row.session }), ": " + row.warning));
    }
    box.replaceChildren(...(rows.length ? [list] : []));
  }

  function renderQueueNav(q) {
    const box = doc.getElementById("queue-nav");
    if (!box || !q) return;
    if (!q.total) return box.replaceChildren();
    const what = q.exact
      ? " suspended (waiting for a decision or, once decided, for a resume)."
      : " that may be suspended (an upper bound: a session whose events hold no open wait is left off its page).";
    const line = el("p", { class: "queue-nav muted", text: "Sessions " + q.first + "–" + q.last + " of " + q.total + what });
    if (q.earlier) line.append(" ", el("a", { href: q.earlier, text: "earlier" }));
    if (q.later) line.append(" ", el("a", { href: q.later, text: "+" + q.more + " more" }));
    box.replaceChildren(line);
  }

  // POST form fields asking for JSON: the route's {ok: true, ...}, or {ok: false, error}
  async function postJson(path, body) {
    const response = await fetch(path, {
      method: "POST",
      body: body,
      credentials: "same-origin",
      headers: { Accept: "application/json" },
    });
    return response.json().catch(() => ({ ok: false, error: "HTTP " + response.status }));
  }

  doc.addEventListener("submit", async function (event) {
    const form = event.target;
    if (!(form instanceof HTMLFormElement) || !form.classList.contains("decide")) return;
    event.preventDefault();
    const input = operatorInput();
    const operator = input ? input.value.trim() : "";
    if (!operator) {
      notice("Enter your operator name (top right) first: it is recorded with the decision.", true);
      if (input) input.focus();
      return;
    }
    const submitter = event.submitter;
    const decision = submitter && submitter.value === "deny" ? "deny" : "approve";
    const body = new URLSearchParams(new FormData(form));
    body.set("decision", decision);
    body.set("operator", operator);
    body.set("csrf", csrf());
    const buttons = form.querySelectorAll("button");
    buttons.forEach((b) => (b.disabled = true));
    try {
      const data = await postJson("/approvals/decide", body);
      if (data.ok) {
        notice(data.message + ". The run continues when it is resumed: " + data.resume, false);
        const item = form.closest(".pending");
        if (item) item.classList.add("decided");
      } else {
        notice(data.error || "not recorded", true);
        buttons.forEach((b) => (b.disabled = false));
      }
    } catch (error) {
      notice("not recorded: " + error, true);
      buttons.forEach((b) => (b.disabled = false));
    }
  });

  // ─── signal and abort: the header's operator name, as approve and deny ─────────────────────
  // Posted with fetch (JSON answer), so a refusal is said under the form and what was typed stays.
  function formStatus(form, message, isError) {
    let line = form.nextElementSibling;
    if (!line || !line.classList.contains("form-status")) {
      line = el("p", { class: "form-status", role: "status", "aria-live": "polite" });
      form.after(line);
    }
    line.textContent = message;
    line.classList.toggle("error", Boolean(isError));
    line.scrollIntoView({ block: "nearest" });
  }

  const ACTIONS = {
    signal: {
      path: "/signals/send",
      done: (data, body) => body.get("kind") + " queued as " + body.get("operator") + " (signal " + data.signal_id + "): delivered at the run's next turn boundary",
    },
    abort: { path: "/runs/abort", done: (data) => data.message },
  };

  doc.addEventListener("submit", async function (event) {
    const form = event.target;
    if (!(form instanceof HTMLFormElement)) return;
    const action = form.classList.contains("signal") ? ACTIONS.signal : form.classList.contains("abort") ? ACTIONS.abort : null;
    if (!action) return;
    event.preventDefault();
    const input = operatorInput();
    const operator = input ? input.value.trim() : "";
    if (!operator) {
      formStatus(form, "Enter your operator name (top right) first: it is recorded with the " + (action === ACTIONS.signal ? "signal" : "abort") + ".", true);
      if (input) input.focus();
      return;
    }
    const body = new URLSearchParams(new FormData(form));
    body.set("operator", operator);
    body.set("csrf", csrf());
    const button = form.querySelector("button[type=submit]");
    if (button) button.disabled = true;
    try {
      const data = await postJson(action.path, body);
      if (data.ok) {
        formStatus(form, action.done(data, body), false);
        const text = form.querySelector("input[name=text]");
        if (text) text.value = "";
      } else {
        formStatus(form, data.error || "not recorded", true);
      }
    } catch (error) {
      formStatus(form, "not recorded: " + error, true);
    } finally {
      if (button) button.disabled = false;
    }
  });

  // ─── runs page ────────────────────────────────────────────────────────────────────────────
  // Parts of a line with one space between each present part, as the template's line breaks give them
  // (without it the live tree read "steps 1context 94/136,000").
  function spaced(...parts) {
    const present = parts.filter((p) => p !== null && p !== undefined && p !== "");
    return present.flatMap((p, i) => (i ? [" ", p] : [p]));
  }

  function runNode(node) {
    const line = el(
      "div",
      { class: "run-line" },
      ...spaced(
        node.href
          ? el("a", { class: "run-id", href: node.href, text: node.id })
          : el("span", { class: "run-id", text: node.id }),
        el("span", { class: "badge state", text: node.state }),
        node.outcome ? el("span", { class: "badge outcome outcome-" + node.outcome, text: node.outcome }) : null,
        el("span", { class: "badge source", title: "run source (seed 002 RunSource)", text: node.source }),
        node.liveness ? el("span", { class: "badge liveness", text: node.liveness }) : null,
        node.awaiting_resume ? el("span", { class: "badge resume", text: "decided, waiting for resume" }) : null,
        node.row_warning ? el("span", { class: "badge row-warning", title: node.row_warning, text: "row contradicts ledger" }) : null,
        node.unreadable ? el("span", { class: "badge unreadable", title: node.unreadable, text: "ledger does not decode" }) : null,
        el("span", { class: "muted budget", title: "spent/limit (a sub-agent's limits are its grant)", text: node.budget }),
        node.duration ? el("span", { class: "muted", text: node.duration }) : null,
        node.context ? el("span", { class: "muted context", title: "context window fill of the latest model call", text: "context " + node.context }) : null,
        node.task ? el("span", { class: "task", text: node.task }) : null,
        node.detail ? el("span", { class: "detail", text: node.detail }) : null
      )
    );
    const item = el("li", { class: "run state-" + node.state + (node.unlisted_parent ? " orphan" : ""), "data-run": node.id }, line);
    if (node.children && node.children.length) item.append(runTree(node.children));
    return item;
  }

  function runTree(nodes) {
    const list = el("ul", { class: "tree" });
    let parent = "";
    for (const node of nodes) {
      if (node.unlisted_parent && node.unlisted_parent !== parent) {
        // a child whose parent the listing leaves out: under a line naming that parent, as the page draws it
        list.append(
          el(
            "li",
            { class: "unlisted-parent muted" },
            "(parent ",
            el("a", { href: node.parent_href, text: node.unlisted_parent }),
            " not listed)"
          )
        );
      }
      parent = node.unlisted_parent || "";
      list.append(runNode(node));
    }
    return list;
  }

  function initRuns() {
    const box = doc.getElementById("runs");
    if (!box || !box.dataset.stream) return;
    const next = box.dataset.next || "/";
    const source = new EventSource(localPath(box.dataset.stream));
    source.onopen = () => setLive(true, "live");
    source.onerror = () => setLive(false, "reconnecting…");
    source.addEventListener("runs", function (message) {
      const data = JSON.parse(message.data);
      box.replaceChildren(data.runs.length ? runTree(data.runs) : el("p", { class: "empty", text: "No runs." }));
      renderUnreadable(data.unreadable);
      renderInDoubt(data.in_doubt);
      renderPending(data.pending, next);
      renderWaiting(data.waiting);
      renderQueueNav(data.queue);
      box.dataset.updated = String(Date.now());
    });
  }

  // ─── session page ─────────────────────────────────────────────────────────────────────────
  function eventRow(ev) {
    const details = el(
      "details",
      { class: "raw" },
      el("summary", { text: "raw JSON (" + ev.raw_size + " bytes)" }),
      el("pre", { class: "raw", text: ev.raw })
    );
    if (ev.more) details.append(el("a", { class: "more", href: ev.raw_href, text: "show more" }));
    return el(
      "div",
      { class: "ev new", id: "seq-" + ev.seq },
      el("span", { class: "seq" }, el("a", { href: ev.replay_href, text: String(ev.seq) })),
      el("span", { class: "time", text: ev.time }),
      el("span", { class: "kind", text: ev.kind }),
      el("span", { class: "text", text: ev.text }),
      details
    );
  }

  function setText(id, text) {
    const node = doc.getElementById(id);
    if (node) node.textContent = text;
  }

  function setHidden(id, hidden) {
    const node = doc.getElementById(id);
    if (node) node.hidden = Boolean(hidden);
  }

  function initSession() {
    const timeline = doc.getElementById("events");
    if (!timeline || !timeline.dataset.stream) return;
    const source = new EventSource(localPath(timeline.dataset.stream));
    source.onopen = () => setLive(true, "live");
    source.onerror = () => setLive(false, "reconnecting…");
    source.addEventListener("ev", function (message) {
      const ev = JSON.parse(message.data);
      if (doc.getElementById("seq-" + ev.seq)) return;
      timeline.append(eventRow(ev));
      doc.dispatchEvent(new CustomEvent("flightlog:event", { detail: { seq: ev.seq } })); // waterfall.js redraws
    });
    source.addEventListener("status", function (message) {
      const st = JSON.parse(message.data);
      setText("status", st.status);
      setText("row-warning", st.row_warning || "");
      const rowWarning = doc.getElementById("row-warning");
      if (rowWarning) rowWarning.hidden = !st.row_warning;
      setText("state", st.state || "unknown");
      setText("ended", st.ended || "");
      setHidden("ended-label", !st.ended);
      setHidden("ended", !st.ended);
      setText("head", String(st.head_seq + 1));
      const b = st.budget || {};
      setText("budget", (b.tokens ? b.tokens + " tokens " : "") + (b.steps ? b.steps + " steps " : "") + (b.duration || ""));
      const c = st.context || {};
      setText("context", c.text ? c.text + " at turn " + c.turn + " (" + c.basis + ")" : "not recorded");
      renderAttention(st.pending, st.waiting);
      renderPending(st.pending, location.pathname + location.search);
      renderWaiting(st.waiting);
      renderChildren(st.children || []);
      // the actions the run takes now: an abort pauses it (resumable), a resume makes it abortable again
      setHidden("signal", !st.signals);
      setHidden("aborted", !st.aborted);
      setHidden("abandoned", !st.abandoned);
      setHidden("abort", st.aborted || !st.abortable);
      doc.dispatchEvent(new CustomEvent("flightlog:status")); // a sub-agent moved: waterfall.js redraws
    });
  }

  // the banner at the top of a session page: what it waits for (drawn as macros.html's attention())
  function renderAttention(pending, waiting) {
    const box = doc.getElementById("attention");
    if (!box) return;
    const lines = pending.map((p) =>
      el(
        "p",
        { class: "wait" },
        "Waiting for " + (p.kind === "approval" ? "approval" : "a decision (" + p.kind + ")") + ": ",
        el("strong", { class: "tool", text: p.tool }),
        " call ",
        el("code", { class: "call", text: p.call }),
        " (turn " + p.turn + ") ",
        el("a", { href: "#approvals", text: p.answer_in ? "How it is answered" : "Approve or deny" })
      )
    );
    for (const w of waiting) lines.push(el("p", { class: "resume" }, "Decided, waiting for a resume: ", el("code", { text: w.command })));
    box.replaceChildren(...lines);
    box.hidden = lines.length === 0;
  }

  function childRow(c) {
    const b = c.budget || {};
    return el(
      "tr",
      { class: "child", "data-child": c.id },
      el("td", {}, c.href ? el("a", { class: "child-link", href: c.href, text: c.id }) : c.id),
      el(
        "td",
        { class: "state" },
        el("span", { class: "badge state state-" + c.state_class, text: c.state }),
        c.warning ? el("span", { class: "muted row-warning", text: " " + c.warning }) : null
      ),
      el("td", { class: "source" }, el("span", { class: "badge source source-" + c.source, text: c.source })),
      el("td", { class: "outcome", text: c.outcome || "-" }),
      el("td", { class: "tokens", text: b.tokens_of }),
      el("td", { class: "steps", text: b.steps_of })
    );
  }

  function renderChildren(rows) {
    const body = doc.getElementById("children");
    const section = doc.getElementById("subagents");
    if (!body || !section) return;
    body.replaceChildren(...rows.map(childRow));
    section.hidden = rows.length === 0;
  }

  // ─── "show more": the whole stored event, loaded on demand ───────────────────────────────
  doc.addEventListener("click", async function (event) {
    const target = event.target;
    const link = target instanceof Element ? target.closest("a.more") : null;
    if (!link) return;
    event.preventDefault();
    const pre = link.parentElement ? link.parentElement.querySelector("pre.raw") : null;
    if (!pre) return;
    link.textContent = "loading…";
    try {
      const response = await fetch(link.getAttribute("href"), { credentials: "same-origin" });
      pre.textContent = await response.text();
      link.remove();
    } catch (error) {
      link.textContent = "show more (failed: " + error + ")";
    }
  });

  function start() {
    initOperator();
    // The live streams open once the page has loaded: an open stream must not keep the page "loading"
    // (a headless `--dump-dom`, a load spinner).
    const live = () => {
      initRuns();
      initSession();
    };
    if (doc.readyState === "complete") live();
    else window.addEventListener("load", live, { once: true });
  }

  if (doc.readyState === "loading") doc.addEventListener("DOMContentLoaded", start);
  else start();
})();
