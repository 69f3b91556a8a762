// flightlog dashboard: check a session's signed heads and one event's inclusion proof in the browser,
// trusting nothing the server says.
//
// The "Signed heads" section fetches /api/integrity?session= and checks, with WebCrypto only: each
// checkpoint's Ed25519 signature (C2SP signed-note, tlog-checkpoint), each witness cosignature (C2SP
// tlog-cosignature v1 over a checkpoint text that verified) and each seal (its inclusion in the signed
// tree, and the root it claims over the events before it), and draws them on the chain's seq axis. The
// keys are the ones pinned in this browser (localStorage) when there are any, else the server's; each is
// shown with its fingerprint, and a server key that is not pinned is flagged as a key change.
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

  // ─── signed notes and keys (C2SP signed-note, tlog-checkpoint, tlog-cosignature) ──────────
  const LOG_TYPE = 0x01; // Ed25519 signed-note key
  const WITNESS_TYPE = 0x04; // Ed25519 tlog-cosignature key
  const PINS = { [LOG_TYPE]: PIN_KEY, [WITNESS_TYPE]: "flightlog.pinned-witness-vkeys" };
  const KIND = { [LOG_TYPE]: "log key", [WITNESS_TYPE]: "witness key" };

  // Python's urllib.parse.quote(session_id, safe="-._~:") over UTF-8, as flightlog builds origins.
  function quoteId(text) {
    let out = "";
    for (const byte of enc.encode(text)) {
      const c = String.fromCharCode(byte);
      out += /[A-Za-z0-9\-._~:]/.test(c) ? c : "%" + byte.toString(16).toUpperCase().padStart(2, "0");
    }
    return out;
  }

  // A signed note: text (ending in a newline) up to the last blank line, then "— name base64" lines.
  function splitNote(note) {
    if (typeof note !== "string" || !note.endsWith("\n")) throw new Error("the note does not end with a newline");
    const split = note.lastIndexOf("\n\n");
    if (split < 0) throw new Error("the note has no blank line before its signatures");
    const text = note.slice(0, split + 1);
    const sigs = [];
    for (const line of note.slice(split + 2, -1).split("\n")) {
      const m = /^\u2014 (\S+) ([A-Za-z0-9+/=]+)$/.exec(line);
      if (!m) throw new Error("malformed signature line: " + line.slice(0, 60));
      const blob = b64ToBytes(m[2]);
      if (blob.length < 5) throw new Error("signature of " + m[1] + " is too short");
      sigs.push({ name: m[1], keyId: toHex(blob.slice(0, 4)), sig: blob.slice(4) });
    }
    return { text, sigs };
  }

  function parseNote(note) {
    const { text, sigs } = splitNote(note);
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

  // "<name>+<8 hex key id>+<base64(type || 32-byte Ed25519 public key)>"; the id must match the key
  // (SHA-256(name || "\n" || type || key)[:4]). The fingerprint is SHA-256 of the key text itself, so a
  // reader can compare it with `printf %s KEY | sha256sum` on the output of `flightlog keys show`.
  async function parseVkey(text, type) {
    type = type || LOG_TYPE;
    const trimmed = String(text).trim();
    const m = /^([^+\s]+)\+([0-9a-f]{8})\+([A-Za-z0-9+/]+={0,2})$/.exec(trimmed);
    if (!m) throw new Error("not a verifier key (name+keyid+base64)");
    const parts = m.slice(1);
    const raw = b64ToBytes(parts[2]);
    if (raw.length !== 33 || raw[0] !== type) throw new Error("not an Ed25519 " + KIND[type]);
    const digest = await sha256(concat(enc.encode(parts[0] + "\n"), raw));
    if (toHex(digest.slice(0, 4)) !== parts[1]) throw new Error("the key id " + parts[1] + " does not match the key");
    const fingerprint = toHex(await sha256(enc.encode(trimmed)));
    return { name: parts[0], keyId: parts[1], pub: raw.slice(1), text: trimmed, fingerprint };
  }

  const keyName = (key) => key.name + "+" + key.keyId;
  const shortFp = (key) => "SHA-256 " + key.fingerprint.slice(0, 16) + "…";

  // RFC 8032 §7.1 TEST 1 (empty message): proves this browser's WebCrypto verifies Ed25519 at all.
  const RFC8032_PUB = "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a";
  const RFC8032_SIG = "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b";
  let ed25519Probe = null;
  function ed25519Support() {
    if (!ed25519Probe) {
      ed25519Probe = (async () => {
        if (!window.crypto || !crypto.subtle) return "this page is not a secure context, so WebCrypto is unavailable (open the dashboard on 127.0.0.1 or over HTTPS)";
        try {
          const key = await crypto.subtle.importKey("raw", hexToBytes(RFC8032_PUB), { name: "Ed25519" }, false, ["verify"]);
          const ok = await crypto.subtle.verify({ name: "Ed25519" }, key, hexToBytes(RFC8032_SIG), new Uint8Array(0));
          return ok ? null : "this browser's WebCrypto Ed25519 fails the RFC 8032 test vector";
        } catch (e) {
          return "this browser has no Ed25519 in WebCrypto (" + e.message + "): signatures cannot be checked here; use `flightlog audit` or a newer browser";
        }
      })();
    }
    return ed25519Probe;
  }

  async function ed25519Verify(pub, sig, message) {
    const key = await crypto.subtle.importKey("raw", pub, { name: "Ed25519" }, false, ["verify"]);
    return crypto.subtle.verify({ name: "Ed25519" }, key, sig, message);
  }

  function pinnedKeys(type) {
    try {
      return JSON.parse(localStorage.getItem(PINS[type || LOG_TYPE]) || "[]").filter((k) => typeof k === "string");
    } catch (e) {
      return [];
    }
  }

  function setPins(type, texts) {
    localStorage.setItem(PINS[type], JSON.stringify(texts));
  }

  // The keys to check against: those pinned in this browser when there are any, else the server's.
  // `changed` lists server keys that are not pinned while pins exist: a key change to flag.
  async function trustedKeys(type, serverKeys) {
    const pinned = pinnedKeys(type);
    const fromServer = pinned.length === 0;
    const keys = [];
    const skipped = [];
    const offered = [];
    for (const k of serverKeys || []) {
      try {
        offered.push(Object.assign(await parseVkey(k.vkey, type), { notBefore: k.not_before_ms, notAfter: k.not_after_ms, url: k.url }));
      } catch (e) {
        skipped.push("skipped a server " + KIND[type] + ": " + e.message);
      }
    }
    if (fromServer) keys.push(...offered);
    else for (const text of pinned) keys.push(await parseVkey(text, type).catch(() => null));
    const good = keys.filter(Boolean);
    const pinnedTexts = new Set(good.map((k) => k.text));
    const changed = fromServer ? [] : offered.filter((k) => !pinnedTexts.has(k.text));
    return { keys: good, fromServer, skipped, offered, changed };
  }

  // A checkpoint note checked against `trust` for session `sessionId`: {ok, error, cp, key}.
  async function verifyCheckpoint(note, sessionId, trust) {
    let cp;
    try {
      cp = parseNote(note);
    } catch (e) {
      return { ok: false, error: "the checkpoint is malformed: " + e.message };
    }
    if (!cp.origin.endsWith("/" + quoteId(sessionId))) return { ok: false, cp, error: "the checkpoint is for another log (" + cp.origin + ")" };
    const unsupported = await ed25519Support();
    if (unsupported) return { ok: false, cp, error: unsupported };
    if (!trust.keys.length) return { ok: false, cp, error: trust.fromServer ? "the server offered no log verifier key" : "no usable pinned log key" };
    const message = enc.encode(cp.text);
    for (const sig of cp.sigs) {
      for (const key of trust.keys) {
        if (key.name !== sig.name || key.keyId !== sig.keyId) continue;
        if (!(await ed25519Verify(key.pub, sig.sig, message))) return { ok: false, cp, key, error: "the Ed25519 signature by " + keyName(key) + " does not verify over the checkpoint text" };
        const windowOk =
          cp.time === null ||
          ((key.notBefore === undefined || key.notBefore === null || cp.time >= key.notBefore) &&
            (key.notAfter === undefined || key.notAfter === null || cp.time < key.notAfter));
        if (!windowOk) return { ok: false, cp, key, error: "key " + keyName(key) + " was not valid when the checkpoint was signed" };
        return { ok: true, cp, key };
      }
    }
    const seen = cp.sigs.map((s) => s.name + "+" + s.keyId).join(", ") || "nobody";
    const flagged = trust.changed.filter((k) => cp.sigs.some((s) => s.name === k.name && s.keyId === k.keyId));
    if (flagged.length) return { ok: false, cp, error: "signed by " + flagged.map(keyName).join(", ") + ", which the server now offers but you have not pinned: the log key changed (pinned: " + trust.keys.map(keyName).join(", ") + ")" };
    return { ok: false, cp, error: "no signature by " + (trust.fromServer ? "a key the server trusts" : "your pinned key") + " (signed by " + seen + ")" };
  }

  // One stored cosigned note checked against the witness keys and the checkpoint texts that verified.
  async function verifyCosignature(entry, verifiedTexts, trust) {
    let note;
    try {
      note = splitNote(entry.note);
    } catch (e) {
      return { ok: false, error: "the cosigned note is malformed: " + e.message };
    }
    if (!verifiedTexts.has(note.text)) return { ok: false, error: "it cosigns a checkpoint text that did not verify here (size " + entry.size + ")" };
    const unsupported = await ed25519Support();
    if (unsupported) return { ok: false, error: unsupported };
    if (!trust.keys.length) return { ok: false, error: trust.fromServer ? "the server trusts no witness key" : "no usable pinned witness key" };
    for (const sig of note.sigs) {
      for (const key of trust.keys) {
        if (key.name !== sig.name || key.keyId !== sig.keyId) continue;
        if (sig.sig.length !== 72) return { ok: false, key, error: "the cosignature by " + keyName(key) + " is not 8 + 64 bytes" };
        const stamp = new DataView(sig.sig.buffer, sig.sig.byteOffset, 8).getBigUint64(0);
        if (stamp === 0n) return { ok: false, key, error: "the cosignature by " + keyName(key) + " has a zero timestamp" };
        const message = enc.encode("cosignature/v1\ntime " + stamp.toString() + "\n" + note.text);
        if (!(await ed25519Verify(key.pub, sig.sig.slice(8), message))) return { ok: false, key, error: "the cosignature by " + keyName(key) + " does not verify (forged or altered)" };
        return { ok: true, key, time: Number(stamp) };
      }
    }
    const seen = note.sigs.map((s) => s.name + "+" + s.keyId).join(", ");
    return { ok: false, error: "no cosignature line by " + (trust.fromServer ? "a witness the server trusts" : "your pinned witness") + " (lines by " + seen + ")" };
  }

  // ─── the inclusion check ──────────────────────────────────────────────────────────────────
  // Returns {ok, steps: [[ok, text]...], verdict}. Never throws for a bad proof: says what failed.
  async function check(sessionId, seq, data) {
    const steps = [];
    const fail = (text) => {
      steps.push([false, text]);
      return { ok: false, steps, verdict: "NOT verified: " + text };
    };
    if (!window.crypto || !crypto.subtle) return fail("this page is not a secure context, so WebCrypto is unavailable (open the dashboard on 127.0.0.1 or over HTTPS)");
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
    const trust = await trustedKeys(LOG_TYPE, data.keys);
    for (const text of trust.skipped) steps.push([null, text]);
    const head = await verifyCheckpoint(data.checkpoint, sessionId, trust);
    if (!head.ok) {
      if (!trust.keys.length && trust.fromServer && data.keys_error) return fail(head.error + " (" + data.keys_error + ")");
      return fail(head.error);
    }
    if (head.cp.size !== size) return fail("the checkpoint signs size " + head.cp.size + ", not " + size);
    const whose = trust.fromServer ? "a key the dashboard server says it trusts (pin it below to not rely on the server next time)" : "the key you pinned in this browser";
    steps.push([true, "verified the tree head: Ed25519 signature by " + keyName(head.key) + " (" + shortFp(head.key) + "), " + whose]);
    if (!equal(head.cp.root, walked.root)) {
      return fail("the event's audit path leads to root " + toHex(walked.root).slice(0, 16) + "…, but the signed checkpoint at size " + size + " says " + toHex(head.cp.root).slice(0, 16) + "…: the stored events were changed after they were signed");
    }
    steps.push([true, "the verified tree head at size " + size + " (" + head.cp.origin + ") holds that root"]);
    return { ok: true, steps, verdict: "verified in your browser: event " + seq + " is in the signed tree of " + size + " events, signed by " + keyName(head.key) + (trust.fromServer ? " (key from the server)" : " (your pinned key)") };
  }

  // ─── the signed heads (checkpoints, cosignatures, seals) ──────────────────────────────────
  // RFC 9162 §2.1.3: the audit path of the last leaf n of a tree of n + 1 is the compact range of
  // [0, n), smallest subtree first; folding it from the left gives the root over [0, n).
  async function rootBefore(path) {
    if (!path.length) return new Uint8Array(await crypto.subtle.digest("SHA-256", new Uint8Array(0)));
    let r = path[0];
    for (const p of path.slice(1)) r = await nodeHash(p, r);
    return r;
  }

  async function verifySeal(seal, sessionId, heads) {
    const where = "the seal at seq " + seal.seq;
    let event;
    const bytes = b64ToBytes(seal.event_base64);
    try {
      event = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes));
    } catch (e) {
      return { ok: false, error: where + " does not decode: " + e.message };
    }
    if (!event || event.kind !== "custom" || event.custom_kind !== "session_sealed") return { ok: false, error: "seq " + seal.seq + " is not a seal" };
    const payload = event.payload || {};
    const status = typeof payload.status === "string" ? payload.status : "?";
    if (seal.tree_size === null || seal.tree_size === undefined) return { ok: false, status, error: where + " is covered by no signed checkpoint" + (seal.error ? " (" + seal.error + ")" : "") };
    const head = heads.get(seal.tree_size);
    if (!head) return { ok: false, status, error: "the checkpoint over " + seal.tree_size + " events that covers " + where + " did not verify" };
    const path = (seal.proof || []).map(hexToBytes);
    const walked = await rootFromPath(seal.seq, seal.tree_size, await leafHash(bytes), path);
    if (walked.error) return { ok: false, status, error: where + ": " + walked.error };
    if (!equal(walked.root, head.root)) return { ok: false, status, error: where + " is not in the signed tree of " + seal.tree_size + " events (its audit path leads to another root): the stored events were changed after they were signed" };
    if (payload.size !== seal.seq) return { ok: false, status, error: where + " claims " + payload.size + " events before it" };
    if (seal.tree_size === seal.seq + 1) {
      const before = toHex(await rootBefore(path));
      if (payload.root !== before) return { ok: false, status, error: where + " claims root " + String(payload.root).slice(0, 16) + "… over events 0-" + (seal.seq - 1) + ", but they hash to " + before.slice(0, 16) + "…" };
      return { ok: true, status, text: "sealed (" + status + ") at seq " + seal.seq + ": in the signed tree of " + seal.tree_size + " events, and its root over events 0-" + (seal.seq - 1) + " is the one recomputed here" };
    }
    return { ok: true, status, text: "sealed (" + status + ") at seq " + seal.seq + ": in the signed tree of " + seal.tree_size + " events (its claimed root over the events before it is not recomputed here: no checkpoint at " + (seal.seq + 1) + ")" };
  }

  // Everything the integrity document holds, checked; returns rows for the page.
  async function checkHeads(sessionId, data) {
    const logTrust = await trustedKeys(LOG_TYPE, data.log_keys);
    const witnessTrust = await trustedKeys(WITNESS_TYPE, data.witness_keys);
    const heads = new Map(); // size -> {root, text}
    const rows = [];
    for (const c of data.checkpoints || []) {
      const result = await verifyCheckpoint(c.note, sessionId, logTrust);
      let error = result.error;
      if (result.ok && (result.cp.size !== c.size || toHex(result.cp.root) !== c.root)) error = "its note signs size " + result.cp.size + " but is stored as size " + c.size + " with another root";
      const last = Math.max(c.size - 1, 0);
      if (result.ok && !error) {
        heads.set(c.size, { root: result.cp.root, text: result.cp.text });
        rows.push({ kind: "checkpoint", seq: last, size: c.size, ok: true, text: "signed checkpoint over events 0-" + last + ": Ed25519 signature by " + keyName(result.key) + " (" + shortFp(result.key) + ") verified in your browser" });
      } else rows.push({ kind: "checkpoint", seq: last, size: c.size, ok: false, text: "checkpoint over events 0-" + last + " NOT verified: " + error });
    }
    const texts = new Set(Array.from(heads.values(), (h) => h.text));
    for (const c of data.cosignatures || []) {
      const result = await verifyCosignature(c, texts, witnessTrust);
      const last = Math.max(c.size - 1, 0);
      const name = String(c.witness).split("+").slice(0, 2).join("+");
      if (result.ok) rows.push({ kind: "cosignature", seq: last, size: c.size, ok: true, text: "witness " + keyName(result.key) + " (" + shortFp(result.key) + ") cosigned the head over " + c.size + " events at " + new Date(result.time * 1000).toISOString() + ": verified in your browser" });
      else rows.push({ kind: "cosignature", seq: last, size: c.size, ok: false, text: "cosignature by " + name + " over " + c.size + " events NOT verified: " + result.error });
    }
    for (const s of data.seals || []) {
      const result = await verifySeal(s, sessionId, heads);
      rows.push({ kind: "seal", seq: s.seq, size: s.tree_size, ok: result.ok, text: result.ok ? result.text + ": verified in your browser" : "seal NOT verified: " + result.error });
    }
    rows.sort((a, b) => a.seq - b.seq || a.kind.localeCompare(b.kind));
    return { rows, logTrust, witnessTrust };
  }

  // ─── the page ─────────────────────────────────────────────────────────────────────────────
  const SVG = "http://www.w3.org/2000/svg";

  function el(tag, cls, text) {
    const node = doc.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined) node.textContent = String(text);
    return node;
  }

  function svg(tag, attrs, text) {
    const node = doc.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, String(v));
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
    box.scrollIntoView({ block: "nearest" });
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

  // The chain's seq axis with a mark per checkpoint, cosignature and seal, coloured by its verdict.
  function drawChain(box, events, rows) {
    const width = Math.max(box.clientWidth || 0, 600);
    const left = 90;
    const plot = width - left - 20;
    const span = Math.max(events, 1);
    const x = (seq) => left + ((seq + 1) / span) * plot;
    const lanes = [["checkpoint", "checkpoints"], ["cosignature", "witnesses"], ["seal", "seal"]].filter(([k]) => rows.some((r) => r.kind === k));
    const height = 26 + lanes.length * 20;
    const root = svg("svg", { class: "chain", width, height, viewBox: "0 0 " + width + " " + height, role: "img" });
    root.append(svg("title", {}, "the hash chain's " + events + " events with their signed heads"));
    root.append(svg("line", { class: "chain-axis", x1: left, x2: left + plot, y1: 12, y2: 12 }));
    root.append(svg("text", { class: "tick-label", x: left, y: 24 + lanes.length * 20 }, "seq 0"));
    root.append(svg("text", { class: "tick-label", x: left + plot - 60, y: 24 + lanes.length * 20 }, "seq " + (events - 1)));
    lanes.forEach(([kind, label], i) => {
      const y = 16 + i * 20;
      root.append(svg("text", { class: "lane-label", x: 4, y: y + 12 }, label));
      for (const r of rows.filter((row) => row.kind === kind)) {
        const cx = x(r.seq);
        const mark = svg("path", { class: "head head-" + kind + (r.ok ? " ok" : " bad"), d: "M" + cx + " " + y + " l6 7 l-6 7 l-6 -7 z", tabindex: 0, "data-seq": r.seq });
        mark.append(svg("title", {}, r.text));
        const pick = () => {
          const row = doc.querySelector('#heads-list li[data-key="' + kind + "-" + r.seq + "-" + rows.indexOf(r) + '"]');
          if (row) {
            for (const other of doc.querySelectorAll("#heads-list li.picked")) other.classList.remove("picked");
            row.classList.add("picked");
            row.scrollIntoView({ block: "nearest" });
          }
        };
        mark.addEventListener("click", pick);
        mark.addEventListener("focus", pick);
        root.append(mark);
      }
    });
    box.replaceChildren(root);
  }

  function keyItem(key, type, pinned, refresh) {
    const item = el("li", pinned ? "key pinned" : "key");
    item.append(el("span", "badge", KIND[type]), " ", el("code", "vkey", key.text), " ", el("span", "muted", "fingerprint SHA-256 " + key.fingerprint));
    if (key.url) item.append(" ", el("span", "muted", "at " + key.url));
    const button = el("button", "pin", pinned ? "unpin" : "pin");
    button.type = "button";
    button.addEventListener("click", function () {
      const now = pinnedKeys(type).filter((t) => t !== key.text);
      setPins(type, pinned ? now : [...now, key.text]);
      refresh();
    });
    item.append(" ", button);
    return item;
  }

  function drawKeys(box, type, trust, refresh) {
    const list = el("ul", "keys keys-" + (type === LOG_TYPE ? "log" : "witness"));
    const pinned = new Set(pinnedKeys(type));
    const shown = new Set();
    for (const key of trust.fromServer ? trust.offered : trust.keys) {
      shown.add(key.text);
      list.append(keyItem(key, type, pinned.has(key.text), refresh));
    }
    const parts = [];
    const what = type === LOG_TYPE ? "Log keys" : "Witness keys";
    if (trust.fromServer) parts.push(el("p", "muted", what + ": " + (trust.offered.length ? "checked against the key(s) the dashboard server says it trusts. Compare with `flightlog keys show` on a machine you trust, then pin." : "the server trusts none.")));
    else parts.push(el("p", "muted", what + ": checked against the key(s) pinned in this browser only."));
    for (const key of trust.changed) {
      const flag = el("p", "key-changed bad", "KEY CHANGED: the server now offers " + KIND[type] + " " + keyName(key) + " (fingerprint SHA-256 " + key.fingerprint + "), which you have not pinned. Signatures by it are not accepted here until you pin it.");
      parts.push(flag);
      list.append(keyItem(key, type, false, refresh));
    }
    for (const text of trust.skipped) parts.push(el("p", "muted", text));
    box.append(...parts, list);
  }

  async function loadHeads(section) {
    const box = doc.getElementById("heads-result");
    const chart = doc.getElementById("heads-chain");
    const keysBox = doc.getElementById("heads-keys");
    if (!box || !chart || !keysBox) return;
    const sessionId = section.dataset.session || "";
    delete box.dataset.ok;
    try {
      const response = await fetch("/api/integrity?session=" + encodeURIComponent(sessionId), { credentials: "same-origin", headers: { Accept: "application/json" } });
      const data = await response.json().catch(() => ({ error: "HTTP " + response.status }));
      if (!response.ok) throw new Error(data.error || "HTTP " + response.status);
      const unsupported = await ed25519Support();
      const { rows, logTrust, witnessTrust } = await checkHeads(sessionId, data);
      const refresh = () => loadHeads(section);
      keysBox.replaceChildren();
      drawKeys(keysBox, LOG_TYPE, logTrust, refresh);
      if (data.log_keys_error) keysBox.append(el("p", "error", "the server's log keys could not be loaded: " + data.log_keys_error));
      if ((data.cosignatures || []).length || witnessTrust.offered.length || witnessTrust.keys.length) drawKeys(keysBox, WITNESS_TYPE, witnessTrust, refresh);
      if (data.witness_keys_error) keysBox.append(el("p", "error", "the server's witness keys could not be loaded: " + data.witness_keys_error));
      const list = el("ol", "heads-list proof-steps");
      list.id = "heads-list";
      rows.forEach((r, i) => {
        const item = el("li", (r.ok ? "ok" : "bad") + " head-" + r.kind, r.text);
        item.dataset.key = r.kind + "-" + r.seq + "-" + i;
        item.dataset.kind = r.kind;
        item.dataset.ok = r.ok ? "1" : "0";
        list.append(item);
      });
      const bad = rows.filter((r) => !r.ok);
      let verdict;
      if (unsupported) verdict = "NOT checked: " + unsupported;
      else if (!rows.length) verdict = "nothing signed: this session has no signed checkpoint, so nothing here can be verified";
      else if (bad.length) verdict = "NOT verified: " + bad.length + " of " + rows.length + " signed heads failed (first: " + bad[0].text + ")";
      else verdict = "verified in your browser: " + rows.length + " signed head(s), every signature checked with WebCrypto";
      const p = el("p", "proof-verdict " + (rows.length && !bad.length && !unsupported ? "ok" : "bad"), verdict);
      p.id = "heads-verdict";
      const extra = data.truncated ? [el("p", "muted", "seals searched in the first " + data.sealed_rows_scanned + " events only")] : [];
      box.replaceChildren(p, list, ...extra);
      box.dataset.ok = rows.length && !bad.length && !unsupported ? "1" : "0";
      drawChain(chart, data.events, rows);
    } catch (e) {
      box.replaceChildren(el("p", "proof-verdict bad", "NOT checked: " + e.message));
      box.dataset.ok = "0";
    }
  }

  function initPins(section) {
    const input = doc.getElementById("proof-pin");
    const status = doc.getElementById("proof-pin-status");
    if (!input || !status) return;
    const say = () => {
      const keys = pinnedKeys(LOG_TYPE);
      status.textContent = keys.length ? "pinned: " + keys.map((k) => k.split("+").slice(0, 2).join("+")).join(", ") : "no key pinned: the server's keys are used";
    };
    say();
    section.addEventListener("submit", async function (event) {
      const form = event.target;
      if (!(form instanceof HTMLFormElement) || form.id !== "proof-pin-form") return;
      event.preventDefault();
      const text = input.value.trim();
      try {
        if (text) await parseVkey(text, LOG_TYPE);
        setPins(LOG_TYPE, text ? [text] : []);
        say();
        const heads = doc.getElementById("heads");
        if (heads) loadHeads(heads);
      } catch (e) {
        status.textContent = "not pinned: " + e.message;
      }
    });
  }

  async function sayEd25519() {
    const box = doc.getElementById("ed25519-support");
    if (!box) return;
    const unsupported = await ed25519Support();
    box.textContent = unsupported ? "This browser cannot check signatures: " + unsupported + ". Hashes and audit paths are still checked." : "This browser verifies Ed25519 with WebCrypto (checked against the RFC 8032 test vector).";
    box.className = unsupported ? "error" : "muted";
    box.dataset.ed25519 = unsupported ? "0" : "1";
  }

  function start() {
    const section = doc.getElementById("proof");
    const timeline = doc.getElementById("events");
    const heads = doc.getElementById("heads");
    sayEd25519();
    if (heads) {
      loadHeads(heads);
      // a live run signs new heads and seals as its events land: re-check at most once a second
      let pendingReload = null;
      const reload = () => {
        if (pendingReload) return;
        pendingReload = setTimeout(() => {
          pendingReload = null;
          loadHeads(heads);
        }, 1000);
      };
      doc.addEventListener("flightlog:event", reload);
      heads.addEventListener("click", function (event) {
        const target = event.target;
        if (target instanceof Element && target.id === "heads-recheck") loadHeads(heads);
      });
    }
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
