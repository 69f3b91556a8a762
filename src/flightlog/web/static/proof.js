// flightlog dashboard: check one event's inclusion proof in the browser, trusting nothing the server says.
//
// Each timeline row gets a "check" button. It fetches /api/proof?session=&seq= and verifies, with
// WebCrypto only (no library, no network beyond that fetch):
//   1. the stored event bytes hash to the leaf: SHA-256(0x00 || bytes)            RFC 9162 §2.1.1
//   2. the audit path leads from leaf `seq` to the root of `tree_size` events     RFC 9162 §2.1.3.2
//      (nodes SHA-256(0x01 || left || right))
//   3. the signed checkpoint at that size (C2SP tlog-checkpoint) names this session in its origin and
//      signs exactly that size and root
//   4. its Ed25519 signature (C2SP signed-note) verifies under a verifier key: the key(s) pinned in this
//      browser when there are any, else the keys the server says it trusts (and the page says so).
// Everything shown is text (textContent); nothing from the server becomes markup.
"use strict";

(function () {
  const doc = document;
  const PIN_KEY = "flightlog.pinned-vkeys";
  const enc = new TextEncoder();

  // ─── bytes ────────────────────────────────────────────────────────────────────────────────
  function concat(...parts) {
    const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
    let at = 0;
    for (const p of parts) {
      out.set(p, at);
      at += p.length;
    }
    return out;
  }

  function hexToBytes(hex) {
    if (typeof hex !== "string" || !/^([0-9a-f]{2})*$/.test(hex)) throw new Error("not lowercase hex: " + String(hex).slice(0, 80));
    const out = new Uint8Array(hex.length / 2);
    for (let i = 0; i < out.length; i++) out[i] = parseInt(hex.substr(2 * i, 2), 16);
    return out;
  }

  function toHex(bytes) {
    return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
  }

  function b64ToBytes(text) {
    if (typeof text !== "string" || !/^[A-Za-z0-9+/]*={0,2}$/.test(text)) throw new Error("not base64");
    const bin = atob(text);
    return Uint8Array.from(bin, (c) => c.charCodeAt(0));
  }

  function equal(a, b) {
    if (a.length !== b.length) return false;
    for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
    return true;
  }

  async function sha256(bytes) {
    return new Uint8Array(await crypto.subtle.digest("SHA-256", bytes));
  }

  const leafHash = (data) => sha256(concat(Uint8Array.of(0), data));
  const nodeHash = (left, right) => sha256(concat(Uint8Array.of(1), left, right));

  // RFC 9162 §2.1.3.2: the root reached from `leaf` at index `index` of a tree of `size` leaves, or an
  // error message. Numbers stay below 2**53, so halving uses Math.floor, not 32-bit shifts.
  async function rootFromPath(index, size, leaf, path) {
    if (!(index < size)) return { error: "leaf " + index + " is not inside a tree of " + size };
    let fn = index;
    let sn = size - 1;
    let r = leaf;
    for (const p of path) {
      if (sn === 0) return { error: "the audit path is longer than the tree is deep" };
      if (fn % 2 === 1 || fn === sn) {
        r = await nodeHash(p, r);
        if (fn % 2 === 0) {
          while (fn % 2 === 0 && fn !== 0) {
            fn = Math.floor(fn / 2);
            sn = Math.floor(sn / 2);
          }
        }
      } else {
        r = await nodeHash(r, p);
      }
      fn = Math.floor(fn / 2);
      sn = Math.floor(sn / 2);
    }
    if (sn !== 0) return { error: "the audit path is shorter than the tree is deep" };
    return { root: r };
  }

  // ─── signed notes and keys (C2SP signed-note, tlog-checkpoint) ────────────────────────────
  // Python's urllib.parse.quote(session_id, safe="-._~:") over UTF-8, as flightlog builds origins.
  function quoteId(text) {
    let out = "";
    for (const byte of enc.encode(text)) {
      const c = String.fromCharCode(byte);
      out += /[A-Za-z0-9\-._~:]/.test(c) ? c : "%" + byte.toString(16).toUpperCase().padStart(2, "0");
    }
    return out;
  }

  function parseNote(note) {
    if (typeof note !== "string" || !note.endsWith("\n")) throw new Error("the checkpoint does not end with a newline");
    const split = note.lastIndexOf("\n\n");
    if (split < 0) throw new Error("the checkpoint has no blank line before its signatures");
    const text = note.slice(0, split + 1);
    const sigs = [];
    for (const line of note.slice(split + 2, -1).split("\n")) {
      const m = /^\u2014 (\S+) ([A-Za-z0-9+/=]+)$/.exec(line);
      if (!m) throw new Error("malformed signature line: " + line.slice(0, 60));
      const blob = b64ToBytes(m[2]);
      if (blob.length < 5) throw new Error("signature of " + m[1] + " is too short");
      sigs.push({ name: m[1], keyId: toHex(blob.slice(0, 4)), sig: blob.slice(4) });
    }
    const lines = text.slice(0, -1).split("\n");
    if (lines.length < 3) throw new Error("the checkpoint text has fewer than three lines");
    if (!/^(0|[1-9][0-9]*)$/.test(lines[1])) throw new Error("the checkpoint size is not a decimal");
    const root = b64ToBytes(lines[2]);
    if (root.length !== 32) throw new Error("the checkpoint root is not 32 bytes");
    let time = null;
    for (const ext of lines.slice(3)) {
      const t = /^time (0|[1-9][0-9]*)$/.exec(ext);
      if (t) time = Number(t[1]);
    }
    return { text, sigs, origin: lines[0], size: Number(lines[1]), root, time };
  }

  // "<name>+<8 hex key id>+<base64(0x01 || 32-byte Ed25519 public key)>"; the id must match the key.
  async function parseVkey(text) {
    const m = /^([^+\s]+)\+([0-9a-f]{8})\+([A-Za-z0-9+/]+={0,2})$/.exec(String(text).trim());
    if (!m) throw new Error("not a verifier key (name+keyid+base64)");
    const parts = m.slice(1);
    const raw = b64ToBytes(parts[2]);
    if (raw.length !== 33 || raw[0] !== 1) throw new Error("not an Ed25519 verifier key");
    const digest = await sha256(concat(enc.encode(parts[0] + "\n"), raw));
    if (toHex(digest.slice(0, 4)) !== parts[1]) throw new Error("the key id " + parts[1] + " does not match the key");
    return { name: parts[0], keyId: parts[1], pub: raw.slice(1), text: String(text).trim() };
  }

  async function ed25519Verify(pub, sig, message) {
    const key = await crypto.subtle.importKey("raw", pub, { name: "Ed25519" }, false, ["verify"]);
    return crypto.subtle.verify({ name: "Ed25519" }, key, sig, message);
  }

  function pinnedKeys() {
    try {
      return JSON.parse(localStorage.getItem(PIN_KEY) || "[]").filter((k) => typeof k === "string");
    } catch (e) {
      return [];
    }
  }

  // ─── the check ────────────────────────────────────────────────────────────────────────────
  // Returns {ok, steps: [[ok, text]...], verdict}. Never throws for a bad proof: says what failed.
  async function check(sessionId, seq, data) {
    const steps = [];
    const fail = (text) => {
      steps.push([false, text]);
      return { ok: false, steps, verdict: "NOT verified: " + text };
    };
    if (!crypto || !crypto.subtle) return fail("this page is not a secure context, so WebCrypto is unavailable (open the dashboard on 127.0.0.1 or over HTTPS)");
    if (data.format !== "flightlog-proof/1" || data.type !== "inclusion") return fail("the server sent no inclusion proof");
    if (data.session_id !== sessionId || data.seq !== seq) return fail("the proof is for another event (" + data.session_id + " seq " + data.seq + ")");
    const size = data.tree_size;
    if (!Number.isSafeInteger(size) || size <= seq) return fail("the tree size " + size + " does not cover seq " + seq);

    const eventBytes = b64ToBytes(data.event_base64);
    const leaf = await leafHash(eventBytes);
    steps.push([true, "hashed the event's " + eventBytes.length + " stored bytes: leaf " + toHex(leaf).slice(0, 16) + "…"]);
    if (toHex(leaf) !== data.leaf_hash) steps.push([null, "the server's leaf hash differs from the one computed here (the computed one is used)"]);

    const path = (data.proof || []).map(hexToBytes);
    const walked = await rootFromPath(seq, size, leaf, path);
    if (walked.error) return fail(walked.error);
    steps.push([true, "walked the " + path.length + "-step audit path to root " + toHex(walked.root).slice(0, 16) + "… of " + size + " events"]);

    if (!data.checkpoint) {
      steps.push([false, "no signed checkpoint covers this tree head: the root is the server's word only"]);
      return { ok: false, steps, verdict: "NOT verified: the tree head at size " + size + " is unsigned (the math holds, but proves nothing without a signature)" };
    }
    let cp;
    try {
      cp = parseNote(data.checkpoint);
    } catch (e) {
      return fail("the checkpoint is malformed: " + e.message);
    }
    if (!cp.origin.endsWith("/" + quoteId(sessionId))) return fail("the checkpoint is for another log (" + cp.origin + ")");
    if (cp.size !== size) return fail("the checkpoint signs size " + cp.size + ", not " + size);
    if (!equal(cp.root, walked.root)) {
      return fail("the event's audit path leads to root " + toHex(walked.root).slice(0, 16) + "…, but the signed checkpoint at size " + size + " says " + toHex(cp.root).slice(0, 16) + "…: the stored events were changed after they were signed");
    }
    steps.push([true, "the signed checkpoint at size " + size + " (" + cp.origin + ") holds that root"]);

    const pinned = pinnedKeys();
    const fromServer = pinned.length === 0;
    const candidates = [];
    if (fromServer) {
      for (const k of data.keys || []) {
        try {
          candidates.push(Object.assign(await parseVkey(k.vkey), { notBefore: k.not_before_ms, notAfter: k.not_after_ms }));
        } catch (e) {
          steps.push([null, "skipped a server key: " + e.message]);
        }
      }
    } else {
      for (const text of pinned) candidates.push(await parseVkey(text).catch(() => null));
    }
    const keys = candidates.filter(Boolean);
    if (!keys.length) return fail(fromServer ? "the server offered no verifier key" + (data.keys_error ? " (" + data.keys_error + ")" : "") : "no usable pinned key");
    const message = enc.encode(cp.text);
    let good = null;
    for (const sig of cp.sigs) {
      for (const key of keys) {
        if (key.name !== sig.name || key.keyId !== sig.keyId) continue;
        let valid;
        try {
          valid = await ed25519Verify(key.pub, sig.sig, message);
        } catch (e) {
          return fail("this browser cannot verify Ed25519 signatures with WebCrypto (" + e.message + ")");
        }
        if (!valid) return fail("the signature by " + key.name + "+" + key.keyId + " does not verify");
        const windowOk =
          cp.time === null ||
          ((key.notBefore === undefined || key.notBefore === null || cp.time >= key.notBefore) &&
            (key.notAfter === undefined || key.notAfter === null || cp.time < key.notAfter));
        if (!windowOk) return fail("key " + key.name + "+" + key.keyId + " was not valid when the checkpoint was signed");
        good = good || key;
      }
    }
    if (!good) {
      const seen = cp.sigs.map((s) => s.name + "+" + s.keyId).join(", ");
      return fail("no signature by " + (fromServer ? "a key the server trusts" : "your pinned key") + " (signed by " + seen + ")");
    }
    const whose = fromServer ? "a key the dashboard server says it trusts (pin your own key in this section to not rely on it)" : "the key you pinned in this browser";
    steps.push([true, "Ed25519 signature by " + good.name + "+" + good.keyId + " verified: " + whose]);
    return { ok: true, steps, verdict: "verified in your browser: event " + seq + " is in the signed tree of " + size + " events, signed by " + good.name + "+" + good.keyId + (fromServer ? " (key from the server)" : " (your pinned key)") };
  }

  // ─── the page ─────────────────────────────────────────────────────────────────────────────
  function el(tag, cls, text) {
    const node = doc.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined) node.textContent = String(text);
    return node;
  }

  function show(box, seq, result) {
    const list = el("ol", "proof-steps");
    for (const [ok, text] of result.steps) list.append(el("li", ok === true ? "ok" : ok === false ? "bad" : "muted", text));
    const verdict = el("p", "proof-verdict " + (result.ok ? "ok" : "bad"), result.verdict);
    verdict.id = "proof-verdict";
    box.dataset.seq = String(seq);
    box.dataset.ok = result.ok ? "1" : "0";
    box.replaceChildren(el("h3", null, "Event " + seq), verdict, list);
  }

  async function prove(section, seq) {
    const box = doc.getElementById("proof-result");
    if (!box) return;
    const sessionId = section.dataset.session || "";
    delete box.dataset.ok;
    box.replaceChildren(el("p", "muted", "checking event " + seq + "…"));
    try {
      const url = "/api/proof?session=" + encodeURIComponent(sessionId) + "&seq=" + seq;
      const response = await fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } });
      const data = await response.json().catch(() => ({ error: "HTTP " + response.status }));
      if (!response.ok) {
        show(box, seq, { ok: false, steps: [], verdict: "NOT verified: the server sent no proof (" + (data.error || response.status) + ")" });
        return;
      }
      show(box, seq, await check(sessionId, seq, data));
    } catch (e) {
      show(box, seq, { ok: false, steps: [], verdict: "NOT verified: " + e.message });
    }
  }

  function addButton(row) {
    if (!(row instanceof HTMLElement) || !row.classList.contains("ev") || row.querySelector("button.prove")) return;
    const seq = /^seq-(\d+)$/.exec(row.id);
    if (!seq) return;
    const button = el("button", "prove", "check");
    button.type = "button";
    button.title = "verify this event's inclusion proof and signed checkpoint in your browser";
    button.dataset.seq = seq[1];
    const cell = row.querySelector(".seq"); // inside the seq cell: the row's grid keeps its columns
    if (cell) cell.append(" ", button);
  }

  function initPins(section) {
    const input = doc.getElementById("proof-pin");
    const status = doc.getElementById("proof-pin-status");
    if (!input || !status) return;
    const say = () => {
      const keys = pinnedKeys();
      status.textContent = keys.length ? "pinned: " + keys.map((k) => k.split("+").slice(0, 2).join("+")).join(", ") : "no key pinned: the server's keys are used";
    };
    say();
    section.addEventListener("submit", async function (event) {
      const form = event.target;
      if (!(form instanceof HTMLFormElement) || form.id !== "proof-pin-form") return;
      event.preventDefault();
      const text = input.value.trim();
      try {
        if (text) await parseVkey(text);
        localStorage.setItem(PIN_KEY, JSON.stringify(text ? [text] : []));
        say();
      } catch (e) {
        status.textContent = "not pinned: " + e.message;
      }
    });
  }

  function start() {
    const section = doc.getElementById("proof");
    const timeline = doc.getElementById("events");
    if (!section || !timeline) return;
    for (const row of timeline.children) addButton(row);
    new MutationObserver((changes) => {
      for (const change of changes) for (const node of change.addedNodes) addButton(node);
    }).observe(timeline, { childList: true });
    timeline.addEventListener("click", function (event) {
      const target = event.target;
      const button = target instanceof Element ? target.closest("button.prove") : null;
      if (!button) return;
      prove(section, Number(button.dataset.seq));
    });
    initPins(section);
  }

  if (doc.readyState === "loading") doc.addEventListener("DOMContentLoaded", start);
  else start();
})();
