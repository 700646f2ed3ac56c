// The page of `collective serve` (docs/page.md): a run's events from POST /collective/v1/runs
// (the ones `collective ask`'s live view reads, collective/serve/runs.py) drawn as they come.
// Model text is always set as text, never as markup.
"use strict";

(() => {
  const $ = (id) => document.getElementById(id);
  const MARKS = {
    supported: ["✓", "supported by its chunk"],
    retagged: ["↻", "retagged to the chunk that states it"],
    fixed: ["✎", "fixed"],
    uncited: ["?", "uncited"],
  };
  const TAG = /\[KB#([^\]\s]+)\]/g;

  let run = null;

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (key === "class") node.className = value;
      else if (key === "text") node.textContent = value;
      else if (key.startsWith("on") || key === "selected") node[key] = value;  // handlers, state
      else node.setAttribute(key, String(value));  // id, type, title, tabindex, data-*, aria-*
    }
    for (const child of children) {
      if (child === null || child === undefined) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  const clear = (node) => node.replaceChildren();

  function ms(value) {
    if (value === null || value === undefined) return "";
    return value < 1000 ? `${Math.round(value)} ms` : `${(value / 1000).toFixed(1)} s`;
  }

  const num = (n) => Number(n).toLocaleString("en-US");

  function status(text) {
    $("status").textContent = text;
  }

  function note(text, kind) {
    const item = el("li", { class: kind === "fault" ? "fault" : "note" });
    item.append(el("strong", { text: kind === "fault" ? "fault: " : "note: " }), text);
    $("note-list").append(item);
    $("no-notes").hidden = true;
  }

  // --- the run's rows: members as columns, the other nodes as stages ---------------------

  const isMember = (node) => /^specialist-\d+$/.test(node);

  function row(node) {
    if (run.rows[node]) return run.rows[node];
    const r = { node, status: "waiting", streamed: 0, text: "" };
    if (isMember(node)) {
      r.box = el("article", { class: "member", "aria-labelledby": `m-${node}-h`, "data-node": node });
      r.title = el("h3", { id: `m-${node}-h`, text: node });
      r.meta = el("p", { class: "meta" });
      r.answer = el("div", { class: "answer", "data-answer": node, tabindex: 0, role: "region",
        "aria-label": `${node}'s answer` });
      r.box.append(r.title, r.meta, r.answer);
      $("members").append(r.box);
    } else {
      r.box = el("li", { class: "stage", "data-node": node });
      r.meta = el("span", { class: "meta" });
      r.stage = el("span", { class: "judge-stage" });
      r.box.append(el("strong", { text: node }), " ", r.meta, " ", r.stage);
      $("stages").append(r.box);
    }
    run.rows[node] = r;
    draw(r);
    return r;
  }

  function draw(r) {
    const parts = [r.status];
    if (r.model) parts.push(r.model.split("/").pop());
    if (r.tokens_in !== undefined) parts.push(`in ${r.tokens_in}`);
    if (r.tokens_out !== undefined) parts.push(`out ${r.tokens_out}`);
    else if (r.streamed) parts.push(r.status === "running" ? `out ${r.streamed}…` : `out ~${r.streamed}`);
    if (r.ms !== undefined) parts.push(ms(r.ms));
    if (r.error) parts.push(r.error);
    r.meta.textContent = parts.join(" · ");
    r.box.dataset.status = r.status;
  }

  // --- the timeline: each node from its start to its end, on the run's clock ---------------

  function mark(node, status, t, took) {
    const span = (run.spans[node] = run.spans[node] || {});
    if (status === "running" && span.start === undefined) span.start = t;
    if (status === "done" || status === "failed") {
      span.end = t;
      // A node's first `running` is its start (the judge's draft runs beside the members).
      if (span.start === undefined) span.start = took !== undefined ? Math.max(0, t - took) : t;
      span.status = status;
    }
    drawTimeline();
  }

  function drawTimeline() {
    const box = $("timeline-rows");
    clear(box);
    const spans = Object.entries(run.spans).filter(([, s]) => s.start !== undefined);
    const end = Math.max(run.now, ...spans.map(([, s]) => s.end ?? run.now), 1);
    for (const [node, s] of spans) {
      const stop = s.end ?? run.now;
      const label = `${node}: ${ms(s.start)} to ${s.end === undefined ? "now" : ms(stop)}`;
      const bar = el("div", { class: `span s-${s.status || "running"}`, title: label });
      bar.style.marginLeft = `${(100 * s.start) / end}%`;
      bar.style.width = `${Math.max(0.5, (100 * (stop - s.start)) / end)}%`;
      box.append(el("div", { class: "tl-row", "data-node": node },
        el("span", { class: "tl-name", text: node }),
        el("div", { class: "tl-track", role: "img", "aria-label": label }, bar)));
    }
  }

  // --- retrieval, and the chunks as the model saw them ------------------------------------

  function retrieval(event) {
    const found = event.retrieval || {};
    const scores = Object.fromEntries((found.chunks || []).map((c) => [c.id, c.score]));
    $("retrieval-summary").textContent =
      `${found.applied || "?"} profile (${found.reason || "no reason given"}): ` +
      `${found.candidates ?? "?"} candidates, ${(event.chunks || []).length} injected`;
    clear($("chunk-list"));
    for (const chunk of event.chunks || []) {
      run.chunks[chunk.id] = chunk;
      const tags = (chunk.tags || []).map((t) => el("span", { class: "chip", text: t }));
      $("chunk-list").append(el("li", { "data-chunk": chunk.id },
        el("button", { type: "button", class: "tag", text: `[KB#${chunk.id}]`, "aria-controls": "chunk-view",
          onclick: (e) => showChunk(chunk.id, e.currentTarget) }),
        " ", el("span", { class: "hint", text: `score ${scores[chunk.id] ?? chunk.score}` }),
        el("div", { class: "chunk-head", text: [chunk.heading, chunk.source].filter(Boolean).join(" · ") }),
        tags.length ? el("div", { class: "chips" }, ...tags) : null));
    }
  }

  function showChunk(id, opener) {
    const view = $("chunk-view");
    const chunk = run.chunks[id];
    const shown = run.shown[id];
    $("chunk-view-h").textContent = `[KB#${id}]`;
    const where = chunk ? [chunk.heading, chunk.source].filter(Boolean).join(" · ") : "";
    $("chunk-view-meta").textContent = shown
      ? `As the judge's prompt showed it. ${where}`
      : chunk
        ? `Not in the judge's prompt: the chunk as retrieved. ${where}`
        : "This run sent no chunks (the answer modes without the council graph send none).";
    const text = $("chunk-view-text");
    clear(text);
    text.append(el("span", { class: "seen", text: shown ? shown.text : chunk ? chunk.text : "" }));
    if (shown && shown.trimmed) {
      text.append(el("span", { class: "trim-marker", text: " [… trimmed: the model did not see what follows …] " }),
        el("del", { class: "trimmed", text: shown.trimmed }));
    }
    view.hidden = false;
    view.dataset.chunk = id;
    run.opener = opener || null;
    view.focus();
  }

  function closeChunk() {
    const view = $("chunk-view");
    if (view.hidden) return;
    view.hidden = true;
    if (run && run.opener) run.opener.focus();
  }

  // --- the verdict ---------------------------------------------------------------------------

  function tagged(text) {
    const out = [];
    let at = 0;
    for (const found of text.matchAll(TAG)) {
      out.push(text.slice(at, found.index));
      const id = found[1];
      const seen = run.shown[id] || run.chunks[id];
      const button = el("button", { type: "button", class: "tag", text: found[0],
        "aria-controls": "chunk-view", "data-tag": id,
        title: seen ? `${seen.text.slice(0, 280)}${seen.text.length > 280 ? "…" : ""}` : null });
      button.addEventListener("click", () => showChunk(id, button));
      out.push(button);
      at = found.index + found[0].length;
    }
    out.push(text.slice(at));
    return out;
  }

  function verdict(result, lines) {
    const list = $("verdict-lines");
    clear(list);
    const answer = (result.answer || "").trim();
    $("verdict-state").textContent = answer ? "" : "The judge gave no answer.";
    for (const line of lines || []) {
      if (!line.text.trim()) continue;
      const marks = line.marks.map((s) => el("span", { class: `mark m-${s}`, title: MARKS[s][1],
        "aria-label": MARKS[s][1], role: "img", text: MARKS[s][0] }));
      list.append(el("li", { "data-marks": line.marks.join(" ") },
        el("span", { class: "marks" }, ...marks), el("span", { class: "line" }, ...tagged(line.text))));
    }
    $("legend").hidden = !(result.claims || []).length;
    const dropped = (result.claims || []).filter((c) => c.status === "dropped");
    $("dropped-box").hidden = !dropped.length;
    clear($("dropped-list"));
    for (const claim of dropped) {
      $("dropped-list").append(el("li", {}, el("q", { text: claim.text.trim() }), ` (${claim.reason})`));
    }
    const check = result.claim_check || {};
    const agreement = Object.entries(check.agreement || {});
    $("agreement-box").hidden = !agreement.length && !check.selected;
    $("agreement-selected").textContent = check.selected ? `The answer that stands: ${check.selected}.` : "";
    const body = $("agreement").tBodies[0];
    clear(body);
    for (const [what, who] of agreement) {
      body.append(el("tr", {}, el("td", { text: what }), el("td", { text: who.join(", ") })));
    }
    const citations = result.citations || [];
    $("citations-box").hidden = !citations.length;
    clear($("citation-list"));
    for (const c of citations) {
      const button = el("button", { type: "button", class: "tag", text: `[KB#${c.id}]`, "aria-controls": "chunk-view" });
      button.addEventListener("click", () => showChunk(c.id, button));
      $("citation-list").append(el("li", {}, button, ` ${c.source || ""}`));
    }
  }

  // --- budgets: one stacked bar per model call ------------------------------------------

  const SECTION_COLOURS = 8;

  function budgetFigure(report, index, live) {
    const n = report.n_ctx;
    const sections = (report.sections || []).filter((s) => s.allocated || s.used);
    const used = sections.reduce((sum, s) => sum + s.used, 0);
    const overhead = Math.max(0, report.prompt_tokens - used);
    const free = Math.max(0, n - report.prompt_tokens - report.max_output_tokens);
    const pct = (v) => `${(100 * v) / n}%`;
    const bar = el("div", { class: "bar", role: "img",
      "aria-label": `${report.node}: prompt ${num(report.prompt_tokens)} and output ${num(report.max_output_tokens)} of a ${num(n)}-token window` });
    sections.forEach((s, i) => {
      const seg = el("span", { class: `seg c${i % SECTION_COLOURS}${s.trimmed ? " cut" : ""}`,
        title: `${s.name}: ${num(s.used)} used of ${num(s.allocated)}` });
      seg.style.width = pct(s.used);
      bar.append(seg);
    });
    if (overhead) {
      const other = el("span", { class: "seg overhead", title: `template and joins: ${num(overhead)}` });
      other.style.width = pct(overhead);
      bar.append(other);
    }
    const out = el("span", { class: "seg output", title: `output reserved: ${num(report.max_output_tokens)}` });
    out.style.width = pct(report.max_output_tokens);
    bar.append(out);
    const plan = el("div", { class: "bar plan", role: "img",
      "aria-label": `${report.node}: the plan's allocation per section` });
    sections.forEach((s, i) => {
      const seg = el("span", { class: `seg c${i % SECTION_COLOURS} alloc`, title: `${s.name}: ${num(s.allocated)} allocated` });
      seg.style.width = pct(s.allocated);
      plan.append(seg);
    });
    const planOut = el("span", { class: "seg output" });
    planOut.style.width = pct(report.max_output_tokens);
    plan.append(planOut);

    const rows = sections.map((s, i) => {
      const slack = s.granted ? s.granted - s.allocated : 0;
      return el("tr", { "data-section": s.name },
        el("th", { scope: "row" }, el("span", { class: `swatch c${i % SECTION_COLOURS}`, "aria-hidden": "true" }), s.name),
        el("td", { class: "n", "data-used": s.used, text: num(s.used) }),
        el("td", { class: "n", "data-allocated": s.allocated, text: num(s.allocated) }),
        el("td", { class: "n", "data-slack": slack, text: slack ? `+${num(slack)}` : "" }),
        el("td", { "data-trimmed": s.trimmed ? "1" : "0", text: s.trimmed ? "✂ trimmed" : "" }));
    });
    const table = el("table", { class: "numbers" },
      el("thead", {}, el("tr", {}, ...["section", "used", "allocated", "slack", "trimmed"].map(
        (h) => el("th", { scope: "col", text: h })))),
      el("tbody", {}, ...rows));
    const fits = report.prompt_tokens + report.max_output_tokens <= n;
    const where = [report.model && report.model.split("/").pop(), report.server].filter(Boolean).join(" @ ");
    const summary = el("p", { class: "budget-sum" },
      el("span", { "data-n-ctx": n, text: `window ${num(n)}` }), " · ",
      el("span", { "data-prompt": report.prompt_tokens, text: `prompt ${num(report.prompt_tokens)}` }), " · ",
      el("span", { "data-output": report.max_output_tokens, text: `output reserved ${num(report.max_output_tokens)}` }), " · ",
      el("span", { "data-free": free, text: `free ${num(free)}` }),
      fits ? "" : el("strong", { class: "over", text: " · over the window" }),
      ` · ${report.token_counter}`);
    return el("figure", { class: "budget", "data-call": index, "data-node": report.node, "data-live": live ? "1" : "0" },
      el("figcaption", {}, el("strong", { text: report.node }), where ? ` ${where}` : ""),
      bar, plan, summary, table);
  }

  function budgets(reports, live) {
    const box = $("budget-list");
    clear(box);
    reports.forEach((r, i) => box.append(budgetFigure(r, i, live)));
  }

  // --- events ---------------------------------------------------------------------------------

  function liveRows(members, planned) {
    const rows = ["retrieve"];
    if (planned) rows.push("plan");
    for (let i = 1; i <= members; i += 1) rows.push(`specialist-${i}`);
    rows.push("judge");
    return rows;
  }

  function handle(event) {
    event.t = run.now = performance.now() - run.t0;
    switch (event.type) {
      case "run":
        run.id = event.run_id;
        status(`Running ${event.model} (${event.mode}${event.thread ? `, ${event.members} members` : ""})…`);
        if (event.thread) {
          $("thread").value = event.thread;
          for (const node of liveRows(event.members, event.planned)) row(node);
        }
        $("cancel-button").disabled = false;
        break;
      case "progress": {
        const r = row(event.node);
        r.status = event.status || r.status;
        for (const key of ["model", "server", "tokens_in", "tokens_out", "ms"]) {
          if (event[key] !== undefined && event[key] !== null) r[key] = event[key];
        }
        if (event.error) r.error = event.error;
        if (event.status === "waiting" && event.message) note(`${event.node}: ${event.message}`);
        if (r.stage && event.status === "done") r.stage.textContent = "";
        draw(r);
        mark(event.node, event.status, event.t, event.ms);
        break;
      }
      case "finished": {
        const r = row(event.node);
        if (r.status === "waiting" || r.status === "running") {
          r.status = event.error ? "failed" : "done";
          if (event.error) r.error = event.error;
          draw(r);
        }
        break;
      }
      case "token": {
        const r = row(event.node);
        r.streamed += 1;
        if (r.answer) r.answer.textContent += event.text;
        else if (event.node === "judge") $("verdict-state").textContent = (r.text += event.text);
        draw(r);
        break;
      }
      case "stage":
        row(event.node).stage.textContent = event.stage;
        break;
      case "retrieval":
        retrieval(event);
        break;
      case "shown":
        Object.assign(run.shown, event.chunks || {});
        break;
      case "budget":
        run.live.push(event.report);
        budgets(run.live, true);
        break;
      case "budget_event":
        note(`${event.node}: ${event.message}`);
        break;
      case "fault":
        note(`${event.node}: ${event.message}`, "fault");
        break;
      case "tool_call":
        note(`judge tool call (round ${event.round}): ${event.name}(${JSON.stringify(event.arguments)})`);
        break;
      case "note":
        note(event.text);
        break;
      case "result":
        finish(event);
        break;
      case "error": {
        const error = event.error || {};
        const cancelled = event.status === 499 || String(error.code).toLowerCase() === "cancelled";
        for (const r of Object.values(run.rows)) {  // what was still going stopped with the run
          if (r.status === "running" || r.status === "waiting") {
            r.status = cancelled ? "cancelled" : "stopped";
            draw(r);
          }
        }
        if (cancelled) {
          note(error.message || "the run was cancelled", "fault");
          end("Cancelled: the run was stopped.");
        } else {
          note(error.message || "the run failed", "fault");
          end(`The run failed: ${error.message || event.status}`);
        }
        break;
      }
      default:
        break;
    }
  }

  function finish(event) {
    const result = event.result;
    for (const p of result.proposals || []) {
      const r = row(p.member);
      if (r.answer && !r.answer.textContent.trim()) r.answer.textContent = p.text || p.error || "";
      if (p.error && r.status !== "failed") { r.status = "failed"; r.error = p.error; draw(r); }
      if (p.error) note(`${p.member} failed: ${p.error}`, "fault");
    }
    verdict(result, event.lines);
    budgets(result.budgets || [], false);
    for (const n of result.notes || []) if (!run.notes.has(n)) note(n);
    const timings = Object.entries(result.timings || {}).map(([k, v]) => `${k.replace(/_ms$/, "")} ${ms(v)}`);
    $("timings").textContent = timings.length ? `timings: ${timings.join(" · ")}` : "";
    end(result.answer ? "Done: the verdict is in." : "Done: the judge gave no answer.");
    $("verdict").focus();
    loadTurns();
  }

  function end(text) {
    status(text);
    run.ended = true;
    $("ask-button").disabled = false;
    $("cancel-button").disabled = true;
    document.body.dataset.run = "ended";
  }

  // --- asking, following, cancelling -----------------------------------------------------------

  function headers(json) {
    const out = json ? { "Content-Type": "application/json" } : {};
    const key = sessionStorage.getItem("collective-key");
    if (key) out.Authorization = `Bearer ${key}`;
    return out;
  }

  function reset() {
    run = { id: null, rows: {}, spans: {}, chunks: {}, shown: {}, live: [], notes: new Set(),
      now: 0, t0: performance.now(), ended: false, reader: null, opener: null };
    for (const id of ["stages", "members", "verdict-lines", "chunk-list", "budget-list", "timeline-rows", "note-list"]) clear($(id));
    $("chunk-view").hidden = true;
    $("no-notes").hidden = false;
    $("dropped-box").hidden = $("agreement-box").hidden = $("citations-box").hidden = $("legend").hidden = true;
    $("verdict-state").textContent = "The judge is at work.";
    $("timings").textContent = "";
    $("retrieval-summary").textContent = "Retrieving…";
  }

  async function refused(answer) {
    const data = await answer.json().catch(() => ({}));
    if (answer.status === 401) $("key-box").open = true;
    return (data.error && data.error.message) || `${answer.status} ${answer.statusText}`;
  }

  async function ask(submitted) {
    submitted.preventDefault();
    const question = $("question").value;
    if (!question.trim()) { status("Write a question first."); $("question").focus(); return; }
    const body = { question, model: $("mode").value };
    const thread = $("thread").value.trim();
    if (thread) body.thread = thread;
    if ($("k").value) body.k = Number($("k").value);
    $("ask-button").disabled = true;
    if (run && run.reader) run.reader.cancel();
    reset();
    document.body.dataset.run = "going";
    status("Starting…");
    let answer;
    try {
      answer = await fetch("/collective/v1/runs", { method: "POST", headers: headers(true), body: JSON.stringify(body) });
    } catch (error) {
      end(`The server did not answer: ${error}`);
      return;
    }
    if (!answer.ok) {
      const message = await refused(answer);
      note(message, "fault");
      end(`Refused: ${message}`);
      return;
    }
    await follow(answer.body.getReader());
  }

  async function follow(reader) {
    const mine = run;
    mine.reader = reader;
    const decoder = new TextDecoder();
    let buffer = "";
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += decoder.decode(value, { stream: true });
        let cut;
        while ((cut = buffer.indexOf("\n\n")) >= 0) {
          const block = buffer.slice(0, cut);
          buffer = buffer.slice(cut + 2);
          const data = block.split("\n").filter((l) => l.startsWith("data:")).map((l) => l.slice(5).trimStart()).join("\n");
          if (!data || run !== mine) continue;
          const event = JSON.parse(data);
          if (event.type === "note") mine.notes.add(event.text);
          handle(event);
        }
      }
    } catch (error) {
      if (run === mine && !mine.ended) note(`the connection to the server broke: ${error}`, "fault");
    }
    if (run === mine && !mine.ended) end("The connection ended before the run did.");
  }

  async function cancel() {
    if (!run || run.ended || !run.id) return;
    $("cancel-button").disabled = true;
    status("Cancelling…");
    const answer = await fetch(`/collective/v1/runs/${encodeURIComponent(run.id)}`, { method: "DELETE", headers: headers(false) }).catch(() => null);
    if (answer && !answer.ok && run && !run.ended) status(`Not cancelled: ${await refused(answer)}`);
  }

  async function loadTurns() {
    const thread = $("thread").value.trim();
    clear($("turn-list"));
    $("no-turns").hidden = false;
    $("summarized").textContent = "";
    if (!thread) return;
    const answer = await fetch(`/collective/v1/threads/${encodeURIComponent(thread)}`, { headers: headers(false) }).catch(() => null);
    if (!answer || !answer.ok) return;
    const data = await answer.json();
    const turns = data.turns || [];
    for (const turn of turns) {  // the thread's memory: the recent turns verbatim
      $("turn-list").append(el("li", { class: turn.role === "user" ? "q" : "a", "data-role": turn.role },
        el("span", { class: "who", text: turn.role === "user" ? "asked: " : "answered: " }), turn.text));
    }
    $("no-turns").hidden = turns.length > 0;
    if (data.summarized) {
      $("summarized").textContent = `${data.summarized} older episode(s) summarized in the thread's memory.`;
    }
  }

  async function loadModels() {
    const answer = await fetch("/v1/models", { headers: headers(false) }).catch(() => null);
    if (!answer || !answer.ok) {
      status(answer ? `The server refused: ${await refused(answer)}` : "The server did not answer.");
      return;
    }
    const models = (await answer.json()).data || [];
    const select = $("mode");
    clear(select);
    for (const model of models) {
      const info = model.collective || {};
      select.append(el("option", { value: model.id, text: `${model.id} (${info.mode || "?"})`,
        selected: model.id === "collective" }));
    }
    const chosen = models.find((m) => m.id === select.value);
    if (chosen && chosen.collective) $("k").placeholder = String(chosen.collective.members);
    status("Ready: ask the council a question.");
  }

  async function init() {
    $("ask-form").addEventListener("submit", ask);
    $("cancel-button").addEventListener("click", cancel);
    $("chunk-view-close").addEventListener("click", closeChunk);
    $("chunk-view").addEventListener("keydown", (e) => { if (e.key === "Escape") closeChunk(); });
    $("thread").addEventListener("change", loadTurns);
    $("question").addEventListener("keydown", (e) => {
      if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) $("ask-form").requestSubmit();
    });
    $("key-form").addEventListener("submit", (e) => {
      e.preventDefault();
      sessionStorage.setItem("collective-key", $("key").value);
      $("key").value = "";
      status("Trying the key…");
      loadModels();
    });
    await loadModels();
    document.body.dataset.ready = "1";
  }

  document.addEventListener("DOMContentLoaded", init);
})();
