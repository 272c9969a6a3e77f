/* spu view: draws the runs page and the run pages from the JSON in #spu-data. No network, no libraries.
   Every text from a run goes in through textContent (never innerHTML), so a tool output cannot inject. */
"use strict";
async function spuInflate(node) {
  // gzip-compressed JSON in base64 (see environment/view/collect.py: encode_data)
  const b64 = node.textContent.trim();
  if (node.dataset.encoding !== "gzip+base64") return JSON.parse(b64);
  const raw = atob(b64);
  const bytes = new Uint8Array(raw.length);
  for (let i = 0; i < raw.length; i++) bytes[i] = raw.charCodeAt(i);
  const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
  return JSON.parse(await new Response(stream).text());
}
spuInflate(document.getElementById("spu-data")).then(spuView, (err) => {
  const app = document.getElementById("app");
  app.textContent = "";
  const box = document.createElement("section");
  box.className = "problems";
  box.setAttribute("data-testid", "render-error");
  box.textContent = "The page's data could not be read (" + err + "). Open the file in a current browser " +
    "(Chrome, Edge, Firefox 113+, Safari 16.4+), or write it again with spu view --out.";
  app.append(box);
  window.spuRendered = performance.now();
});
function spuView(DATA) {
  window.spuParsed = performance.now();
  const CATS = DATA.categories;
  const EXTRA_CATS = {
    model: { label: "model turn", color: "#ffffff" },
    message: { label: "message", color: "#e8e8ff" },
    event: { label: "event", color: "#ffd6d6" },
    end: { label: "end of run", color: "#222222" },
  };
  const CHUNK = 150;
  const app = document.getElementById("app");

  // -- small DOM helpers ------------------------------------------------------------------------------
  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === "class") node.className = v;
      else if (k === "text") node.textContent = v;
      else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
      else node.setAttribute(k, v === true ? "" : v);
    }
    for (const child of children.flat()) {
      if (child === null || child === undefined || child === false) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }
  const fmt = (v, d = 3) => (v === null || v === undefined || Number.isNaN(v) ? "–" : Number(v).toFixed(d));
  const fmtInt = (v) => (v === null || v === undefined ? "–" : Number(v).toLocaleString("en-US"));
  function fmtDur(s) {
    if (s === null || s === undefined) return "–";
    if (s < 1) return (s * 1000).toFixed(0) + " ms";
    if (s < 120) return s.toFixed(1) + " s";
    if (s < 7200) return (s / 60).toFixed(1) + " min";
    return (s / 3600).toFixed(2) + " h";
  }
  const fmtUsd = (v) => (v === null || v === undefined ? "–" : "$" + Number(v).toFixed(v < 1 ? 4 : 2));
  const catOf = (c) => CATS[c] || EXTRA_CATS[c] || { label: c, color: "#cccccc" };
  const chip = (c) => el("span", { class: "chip", style: "background:" + catOf(c).color, title: catOf(c).label });

  function statusBadge(status) {
    const cls = status === "submitted" ? "ok" : status === "limit_reached" ? "warn" : "bad";
    return el("span", { class: "badge " + cls, "data-testid": "exit-status" }, status || "unknown");
  }

  function problemsBox(problems, testid) {
    if (!problems || !problems.length) return null;
    const errors = problems.filter((p) => p.level === "error");
    const box = el("section", { class: "problems" + (errors.length ? "" : " warn"), "data-testid": testid });
    box.append(el("h2", { text: errors.length ? "What is wrong with these files" : "Warnings" }));
    const list = el("ul");
    for (const p of problems) {
      list.append(el("li", {}, el("b", { text: p.where + ": " }), p.message, p.hint ? el("span", { class: "muted" }, " — " + p.hint) : null));
    }
    box.append(list);
    return box;
  }

  // A score on [-1, 1] with the chance threshold (black tick) and attainable maximum (grey tick).
  function scoreBar(score, chance) {
    const W = 160, H = 16, x = (v) => ((v + 1) / 2) * (W - 8) + 4;
    const ns = "http://www.w3.org/2000/svg";
    const svg = document.createElementNS(ns, "svg");
    svg.setAttribute("width", W); svg.setAttribute("height", H); svg.setAttribute("class", "scorebar");
    const add = (tag, a) => { const n = document.createElementNS(ns, tag); for (const k in a) n.setAttribute(k, a[k]); svg.append(n); return n; };
    add("line", { x1: 4, x2: W - 4, y1: H / 2, y2: H / 2, stroke: "#ccc" });
    add("line", { x1: x(0), x2: x(0), y1: 3, y2: H - 3, stroke: "#ddd" });
    if (chance) {
      add("line", { x1: x(chance.attainable_max), x2: x(chance.attainable_max), y1: 1, y2: H - 1, stroke: "#999", "stroke-width": 2 });
      add("line", { x1: x(chance.chance_threshold), x2: x(chance.chance_threshold), y1: 1, y2: H - 1, stroke: "#000", "stroke-width": 2 });
    }
    if (score !== null && score !== undefined) {
      const above = chance ? score > chance.chance_threshold : null;
      add("circle", { cx: x(score), cy: H / 2, r: 5, fill: above === null ? "#0b5cad" : above ? "#1b7f3b" : "#b3261e" });
    }
    const title = document.createElementNS(ns, "title");
    title.textContent = "score " + fmt(score) + (chance ? "; chance threshold " + fmt(chance.chance_threshold) + "; attainable max " + fmt(chance.attainable_max) : "");
    svg.append(title);
    return svg;
  }

  // -- minimal markdown (headings, tables, lists, code, images from the figures) ---------------------
  function inline(text, figures) {
    const out = document.createDocumentFragment();
    const re = /(`[^`]+`|\*\*[^*]+\*\*|\*[^*\s][^*]*\*|!\[[^\]]*\]\([^)]+\)|\[[^\]]+\]\([^)]+\))/g;
    let last = 0, m;
    while ((m = re.exec(text))) {
      out.append(text.slice(last, m.index));
      const t = m[0];
      if (t[0] === "`") out.append(el("code", { text: t.slice(1, -1) }));
      else if (t.startsWith("**")) out.append(el("b", { text: t.slice(2, -2) }));
      else if (t[0] === "*") out.append(el("i", { text: t.slice(1, -1) }));
      else if (t[0] === "!") {
        const name = t.slice(t.indexOf("(") + 1, -1).split("/").pop();
        const fig = (figures || []).find((f) => f.name === name);
        out.append(fig ? el("img", { src: fig.src, alt: name }) : el("span", { class: "muted", text: "[figure " + name + " not present]" }));
      } else out.append(t.slice(1, t.indexOf("]")));
      last = m.index + t.length;
    }
    out.append(text.slice(last));
    return out;
  }
  function markdown(text, figures) {
    const root = el("div", { class: "md" });
    const lines = (text || "").split("\n");
    let i = 0;
    while (i < lines.length) {
      const line = lines[i];
      if (line.startsWith("```")) {
        const buf = []; i++;
        while (i < lines.length && !lines[i].startsWith("```")) buf.push(lines[i++]);
        root.append(el("pre", { text: buf.join("\n") })); i++; continue;
      }
      const h = /^(#{1,4})\s+(.*)$/.exec(line);
      if (h) { root.append(el("h" + Math.min(6, h[1].length + 1), {}, inline(h[2], figures))); i++; continue; }
      if (line.trim().startsWith("|")) {
        const rows = [];
        while (i < lines.length && lines[i].trim().startsWith("|")) rows.push(lines[i++]);
        const cells = (r) => r.trim().replace(/^\||\|$/g, "").split("|").map((c) => c.trim());
        const table = el("table");
        rows.forEach((r, k) => {
          if (k === 1 && /^[\s|:-]+$/.test(r)) return;
          table.append(el("tr", {}, cells(r).map((c) => el(k === 0 ? "th" : "td", {}, inline(c, figures)))));
        });
        root.append(el("div", { class: "scroll" }, table)); continue;
      }
      if (/^\s*[-*]\s+/.test(line)) {
        const ul = el("ul");
        while (i < lines.length && /^\s*[-*]\s+/.test(lines[i])) ul.append(el("li", {}, inline(lines[i++].replace(/^\s*[-*]\s+/, ""), figures)));
        root.append(ul); continue;
      }
      if (!line.trim()) { i++; continue; }
      const para = [];
      while (i < lines.length && lines[i].trim() && !/^(#|\||```|\s*[-*]\s)/.test(lines[i])) para.push(lines[i++]);
      if (!para.length) { root.append(el("p", {}, inline(line, figures))); i++; continue; }
      root.append(el("p", {}, inline(para.join(" "), figures)));
    }
    return root;
  }

  function csvTable(t) {
    const table = el("table", { class: "small" }, el("tr", {}, t.columns.map((c) => el("th", { text: c }))));
    for (const row of t.rows) table.append(el("tr", {}, row.map((c) => el("td", { text: c }))));
    return el("div", {}, el("h3", { text: t.name + (t.total > t.rows.length ? " (first " + t.rows.length + " of " + t.total + " rows)" : "") }), el("div", { class: "scroll" }, table));
  }

  // -- runs page -------------------------------------------------------------------------------------
  function runsPage() {
    const page = el("div", { "data-testid": "runs-page" });
    page.append(el("h1", { text: "Runs in " + DATA.title }));
    const ov = DATA.overview;
    const nTasks = ov ? ov.tasks.length : 0;
    page.append(el("p", { class: "muted" }, DATA.runs.length + " run(s), " + nTasks + " task(s), " + (ov ? ov.configurations.length : 0) + " configuration(s). " +
      "Scores are Spearman correlations weighted over groups, from −1 to 1; a dot right of the black tick beats chance (95th percentile of random rankings), the grey tick is the best attainable. Each cell shows the mean over the configuration's runs of the task; above chance is counted per run."));
    if (ov && ov.tasks.length) {
      page.append(el("h2", { text: "Scores against the chance threshold" }));
      const table = el("table", { "data-testid": "overview" });
      table.append(el("tr", {}, el("th", { text: "task" }), el("th", { class: "num", text: "chance threshold" }), el("th", { class: "num", text: "attainable max" }),
        ov.configurations.map((c) => el("th", { text: c }))));
      for (const t of ov.tasks) {
        const row = el("tr", {}, el("td", { text: t.task_id }), el("td", { class: "num", text: t.chance ? fmt(t.chance.chance_threshold) : "–" }),
          el("td", { class: "num", text: t.chance ? fmt(t.chance.attainable_max) : "–" }));
        for (const c of ov.configurations) {
          const cell = t.cells[c];
          if (!cell) { row.append(el("td", { class: "muted", text: "no run" })); continue; }
          const links = cell.runs.map((i) => el("a", { href: "#/run/" + i, title: DATA.runs[i].label }, DATA.runs[i].label.split("/").pop()));
          row.append(el("td", {}, scoreBar(cell.mean, t.chance), " ", el("b", { text: fmt(cell.mean) }), el("div", { class: "small" }, links.flatMap((a, k) => (k ? [" · ", a] : [a])))));
        }
        table.append(row);
      }
      const cov = el("tr", {}, el("th", { text: "coverage" }), el("td"), el("td"));
      for (const c of ov.configurations) {
        const v = ov.coverage[c];
        cov.append(el("td", { text: v.scored + "/" + v.tasks + " tasks scored · " + v.runs_above_chance + "/" + v.graded_runs + " runs above chance" }));
      }
      table.append(cov);
      page.append(el("div", { class: "scroll" }, table));
    }
    if (DATA.runs.length) {
      page.append(el("h2", { text: "All runs" }));
      const table = el("table", { "data-testid": "run-list" }, el("tr", {}, ["run", "task", "model", "ended", "score", "drafts", "steps", "tokens", "cost", "time"].map((h) => el("th", { text: h }))));
      DATA.runs.forEach((r, i) => {
        const e = r.ending || {};
        table.append(el("tr", {}, el("td", {}, el("a", { href: "#/run/" + i }, r.label)), el("td", { text: r.task_id || "–" }), el("td", { text: r.model || "–" }),
          el("td", {}, statusBadge(e.exit_status), r.problems.length ? el("span", { class: "badge bad", title: r.problems.map((p) => p.message).join("\n") }, r.problems.length + " problem(s)") : null),
          el("td", { class: "num", text: r.score ? fmt(r.score.score) : "–" }), el("td", { class: "num", text: r.drafts.length }),
          el("td", { class: "num", text: fmtInt(e.steps) }), el("td", { class: "num", text: fmtInt(e.tokens) }), el("td", { class: "num", text: fmtUsd(e.cost_usd) }),
          el("td", { class: "num", text: fmtDur(e.elapsed_s) })));
      });
      page.append(el("div", { class: "scroll" }, table));
    }
    for (const out of DATA.outputs) page.append(outputSection(out));
    if (!DATA.outputs.length && DATA.runs.length > 1) {
      page.append(el("p", { class: "muted small", "data-testid": "no-outputs" }, "No `spu report` or `spu analyze` output found beside these runs; run `spu report " + DATA.title + "` or `spu analyze " + DATA.title + " --out " + DATA.title + "/_analyze` to add their figures here."));
    }
    return page;
  }

  function outputSection(out) {
    const sec = el("section", { "data-testid": "output-" + out.kind });
    sec.append(el("h2", { text: (out.kind === "report" ? "spu report" : "spu analyze") + ": " + out.name }));
    const used = new Set();
    if (out.markdown) {
      for (const m of out.markdown.matchAll(/!\[[^\]]*\]\(([^)]+)\)/g)) used.add(m[1].split("/").pop());
    }
    const figs = out.figures.filter((f) => !used.has(f.name));
    if (figs.length) sec.append(el("div", { class: "figures" }, figs.map((f) => el("figure", {}, el("img", { src: f.src, alt: f.name }), el("figcaption", { class: "small muted", text: f.name })))));
    if (out.markdown) sec.append(markdown(out.markdown, out.figures));
    for (const t of out.tables) sec.append(csvTable(t));
    return sec;
  }

  // -- run page --------------------------------------------------------------------------------------
  function card(k, v, testid) { return el("div", { class: "card", "data-testid": testid }, el("div", { class: "k", text: k }), el("div", { class: "v" }, v)); }

  function runPage(index) {
    const run = DATA.runs[index];
    if (!run) return el("p", { text: "There is no run number " + index + " here." });
    const e = run.ending || {};
    const page = el("div", { "data-testid": "run-page" });
    if (!DATA.single_run) page.append(el("div", { class: "small" }, el("a", { href: "#/" }, "← all runs")));
    page.append(el("h1", {}, (run.task_id || "unknown task") + " · " + (run.model || "unknown model")));
    page.append(el("div", { class: "muted small" }, run.label + (run.started ? " · started " + run.started : "") + (run.run_id ? " · run " + run.run_id : "")));
    const runProblems = problemsBox(run.problems, "run-problems");
    if (runProblems) page.append(runProblems);
    const ended = el("p", { "data-testid": "ending" }, el("b", { text: "How it ended: " }), statusBadge(e.exit_status), " ", e.reason || "");
    if (e.submission) ended.append(el("span", { class: "muted" }, " · submission from " + e.submission));
    page.append(ended);
    const calls = run.rows.filter((r) => r.k === "call");
    const cards = el("div", { class: "cards" });
    if (run.score) {
      const s = el("span", {}, fmt(run.score.score), " ");
      if (run.chance) s.append(el("span", { class: "small muted", text: "chance " + fmt(run.chance.chance_threshold) + " · max " + fmt(run.chance.attainable_max) }));
      if (run.score.recovered_score !== null && run.score.recovered_score !== run.score.score) s.append(el("div", { class: "small muted", text: "after recovering schema departures: " + fmt(run.score.recovered_score) }));
      cards.append(card("score", s, "score"));
    } else if (run.grading) cards.append(card("score", el("span", { class: "small muted", text: run.grading }), "score"));
    cards.append(card("model turns", fmtInt(run.rows.filter((r) => r.k === "turn").length), "turns"));
    cards.append(card("tool calls", fmtInt(calls.length) + (calls.some((c) => c.e && c.e !== "withheld") ? " (" + calls.filter((c) => c.e && c.e !== "withheld").length + " failed)" : ""), "calls"));
    cards.append(card("drafts", fmtInt(run.drafts.length), "drafts"));
    cards.append(card("tokens", fmtInt(e.tokens), "tokens"));
    cards.append(card("cost", fmtUsd(e.cost_usd), "cost"));
    cards.append(card("wall time", fmtDur(e.elapsed_s), "time"));
    page.append(cards);
    if (run.score) {
      page.append(el("p", { class: "small muted", "data-testid": "score-help" }, "The score is the Spearman correlation between the submitted order and the measured one, weighted over the task's groups: 1 is the measured order, 0 no relation, −1 reversed. The chance threshold is what 5% of random rankings beat; the maximum is the best any ranking can reach (ties in the measurements can keep it below 1)."));
    }
    page.append(activity(run));
    const tabs = [["timeline", "Timeline", () => timelineView(run, index)], ["drafts", "Drafts", () => draftsView(run)], ["sources", "Sources", () => sourcesView(run)], ["report", "Report", () => reportView(run)]];
    const bar = el("div", { class: "tabs", role: "tablist" });
    const body = el("div", { "data-testid": "tab-body" });
    const show = (key) => {
      for (const b of bar.children) b.classList.toggle("on", b.dataset.tab === key);
      body.replaceChildren(tabs.find((t) => t[0] === key)[2]());
    };
    for (const [key, label] of tabs) bar.append(el("button", { "data-tab": key, "data-testid": "tab-" + key, onclick: () => show(key) }, label));
    page.append(bar, body);
    show("timeline");
    return page;
  }

  // Activity strip: one lane per category, each tool call a mark at its time (width = its duration).
  function activity(run) {
    const calls = run.rows.filter((r) => r.k === "call" && r.t !== null && r.t !== undefined);
    const wrap = el("section", { "data-testid": "activity" });
    if (!calls.length) return wrap;
    const counts = {};
    for (const c of calls) counts[c.c] = (counts[c.c] || 0) + 1;
    const lanes = Object.keys(CATS).filter((c) => counts[c]);
    const legend = el("div", { class: "legend" }, lanes.map((c) => el("span", {}, el("span", { class: "sw", style: "background:" + catOf(c).color }), catOf(c).label + " (" + counts[c] + ")")));
    const canvas = el("canvas", { class: "strip", title: "tool calls over the run, by category" });
    wrap.append(el("h2", { text: "Tool calls over time" }), legend, canvas);
    requestAnimationFrame(() => {
      const dpr = window.devicePixelRatio || 1, W = canvas.clientWidth || 800, H = 120;
      canvas.width = W * dpr; canvas.height = H * dpr;
      const g = canvas.getContext("2d"); g.scale(dpr, dpr);
      const end = Math.max(...calls.map((c) => c.t), (run.ending || {}).elapsed_s || 0, 1e-6);
      const laneH = (H - 14) / lanes.length;
      g.font = "10px sans-serif"; g.fillStyle = "#888";
      g.fillText("0", 2, H - 2); g.fillText(fmtDur(end), W - 50, H - 2);
      lanes.forEach((c, lane) => g.fillText(catOf(c).label, 4, lane * laneH + Math.min(laneH - 3, 12)));
      for (const c of calls) {
        const lane = lanes.indexOf(c.c);
        const x1 = ((c.t - (c.d || 0)) / end) * (W - 4) + 2;
        const w = Math.max(1.5, ((c.d || 0) / end) * (W - 4));
        g.fillStyle = catOf(c.c).color;
        g.fillRect(Math.max(0, x1), lane * laneH + 1, w, laneH - 2);
      }
    });
    return wrap;
  }

  // Arguments, outputs and provenance live in compressed blocks of rows, inflated on first use.
  const blocks = {};
  function block(runIndex, k) {
    const key = runIndex + "-" + k;
    if (!blocks[key]) {
      const node = document.getElementById("spu-detail-" + key);
      blocks[key] = node ? spuInflate(node) : Promise.resolve([]);
    }
    return blocks[key];
  }
  async function detailOf(runIndex, r) {
    const size = DATA.runs[runIndex].detail_chunk;
    return (await block(runIndex, Math.floor(r.i / size)))[r.i % size] || {};
  }
  async function allDetails(runIndex) {
    const run = DATA.runs[runIndex];
    const parts = [];
    for (let k = 0; k * run.detail_chunk < run.rows.length; k++) parts.push(block(runIndex, k));
    return (await Promise.all(parts)).flat();
  }

  function rowMatches(r, q, cat, errorsOnly, d) {
    if (cat && r.c !== cat) return false;
    if (errorsOnly && !r.e && r.k !== "event") return false;
    if (!q) return true;
    return (r.n + " " + (r.x || "") + " " + (d.a || "") + " " + (d.o || "")).toLowerCase().includes(q);
  }

  function rowSummary(r) {
    const kind = r.k === "turn" ? "model" : r.k === "call" ? catOf(r.c).label : r.k;
    const text = r.k === "turn" ? (r.calls && r.calls.length ? "→ " + r.calls.join(", ") + (r.x ? " · " : "") : "") + (r.x || "") : r.e ? r.e : r.x || "";
    return el("summary", {},
      el("span", { class: "muted", text: "#" + r.s }), el("span", { class: "muted", text: fmtDur(r.t) }), chip(r.c),
      el("span", { class: r.e && r.e !== "withheld" ? "err" : "", text: r.n, title: kind }),
      el("span", { class: "num", text: r.d !== undefined && r.d !== null ? fmtDur(r.d) : "" }),
      el("span", { class: "num", text: r.tok ? fmtInt(r.tok) + " tok" : "" }),
      el("span", { class: "num", text: r.usd ? fmtUsd(r.usd) : "" }),
      el("span", { class: r.e && r.e !== "withheld" ? "err" : "muted", text: text.slice(0, 300) }));
  }

  function rowBody(r, d) {
    const body = el("div", { class: "body" });
    const part = (title, text) => text ? [el("div", { class: "small muted", text: title }), el("pre", { text })] : [];
    if (r.k === "turn") { body.append(...part("model text", r.x), ...part("reasoning", d.a)); }
    else if (r.k === "call") {
      body.append(el("div", { class: "small" }, "category: ", catOf(r.c).label, r.e ? el("span", { class: "err" }, " · " + r.e) : null));
      body.append(...part("arguments", d.a), ...part("raw call (as the model sent it)", d.r), ...part("output (as the model read it; long outputs cut)", d.o), ...part("provenance", d.p));
    } else if (r.k === "retry") body.append(...part("failed attempt (raw)", d.r || r.x));
    else body.append(...part("text", d.o || r.x));
    if (!body.childNodes.length) body.append(el("span", { class: "muted", text: "nothing more recorded" }));
    return body;
  }

  function timelineView(run, runIndex) {
    const wrap = el("div", { class: "tl", "data-testid": "timeline" });
    if (!run.rows.length) { wrap.append(el("p", { class: "muted", text: "No trajectory records to show." })); return wrap; }
    const q = el("input", { type: "search", placeholder: "filter: tool, text, output …", "data-testid": "filter" });
    const cats = [...new Set(run.rows.map((r) => r.c))];
    const sel = el("select", { "data-testid": "category" }, el("option", { value: "" }, "all kinds"), cats.map((c) => el("option", { value: c }, catOf(c).label)));
    const errs = el("input", { type: "checkbox" });
    const count = el("span", { class: "muted small" });
    const list = el("div", { "data-testid": "rows" });
    const more = el("button", { class: "more", "data-testid": "more" }, "show more");
    wrap.append(el("div", { class: "filters" }, q, sel, el("label", {}, errs, " errors and events only"), count), list, more);
    let rows = run.rows, shown = 0;
    const addChunk = () => {
      const frag = document.createDocumentFragment();
      for (const r of rows.slice(shown, shown + CHUNK)) {
        const d = el("details", { class: r.k });
        d.append(rowSummary(r));
        d.addEventListener("toggle", async () => {
          if (!d.open || d.dataset.filled) return;
          d.dataset.filled = "1";
          d.append(rowBody(r, await detailOf(runIndex, r)));
        });
        frag.append(d);
      }
      shown = Math.min(rows.length, shown + CHUNK);
      list.append(frag);
      more.hidden = shown >= rows.length;
      more.textContent = "show more (" + fmtInt(rows.length - shown) + " left)";
      count.textContent = fmtInt(rows.length) + " of " + fmtInt(run.rows.length) + " records";
    };
    let generation = 0;
    const refilter = async () => {
      const mine = ++generation;
      const text = q.value.trim().toLowerCase();
      const details = text ? await allDetails(runIndex) : [];
      if (mine !== generation) return; // a newer keystroke started its own filtering
      rows = run.rows.filter((r) => rowMatches(r, text, sel.value, errs.checked, details[r.i] || {}));
      shown = 0; list.replaceChildren(); addChunk();
      list.dataset.filtered = String(mine);
    };
    q.addEventListener("input", refilter); sel.addEventListener("change", refilter); errs.addEventListener("change", refilter);
    more.addEventListener("click", addChunk);
    if ("IntersectionObserver" in window) {
      new IntersectionObserver((entries) => { if (entries.some((x) => x.isIntersecting) && shown < rows.length) addChunk(); }).observe(more);
    }
    addChunk();
    return wrap;
  }

  function draftsView(run) {
    const wrap = el("div", { "data-testid": "drafts-view" });
    if (!run.drafts.length) {
      wrap.append(el("p", { class: "muted", text: "The agent accepted no draft: the submission is " + ((run.ending || {}).submission || "the fallback (experiments in their presented order)") + "." }));
      return wrap;
    }
    const truth = run.truth || null;
    wrap.append(el("p", { class: "muted small" }, "Each column is a draft in the order the agent submitted them; positions run from lowest to highest predicted value. " +
      (truth ? "The small number is the experiment's true position; a cell is shaded where it moved since the previous draft." : "No answers were found, so drafts are not scored (give --answers).")));
    if (run.drafts.some((d) => d.score)) {
      const t = el("table", { "data-testid": "draft-scores" }, el("tr", {}, el("th", { text: "draft" }), el("th", { text: "score" }), el("th", { text: "against chance" })));
      for (const d of run.drafts) t.append(el("tr", {}, el("td", { text: d.name }), el("td", { class: "num", text: d.score ? fmt(d.score.score) : "–" }), el("td", {}, d.score ? scoreBar(d.score.score, run.chance) : "")));
      wrap.append(t);
    }
    const groups = [...new Set(run.drafts.flatMap((d) => Object.keys(d.orders)))];
    const side = el("div", { class: "side" });
    wrap.append(side);
    for (const g of groups) {
      const info = (run.groups || []).find((x) => x.group_id === g);
      const box = el("div", { class: "group" });
      side.append(box);
      box.append(el("h3", { text: "Group " + g, title: info && info.endpoint ? info.endpoint : "" }), info && info.endpoint ? el("div", { class: "small muted", text: info.endpoint }) : null);
      const n = Math.max(...run.drafts.map((d) => (d.orders[g] || []).length));
      const table = el("table", { class: "grid" });
      const trueOrder = truth && truth[g] ? Object.keys(truth[g]).sort((a, b) => truth[g][a] - truth[g][b]) : null;
      table.append(el("tr", {}, el("th", { text: "position" }), run.drafts.map((d) => el("th", {}, d.name, d.score && d.score.groups[g] !== undefined ? el("div", { class: "small muted", text: "ρ " + fmt(d.score.groups[g]) }) : null)),
        trueOrder ? el("th", { text: "measured order" }) : null));
      for (let pos = 0; pos < n; pos++) {
        const tr = el("tr", {}, el("td", { class: "num", text: pos + 1 }));
        run.drafts.forEach((d, k) => {
          const exp = (d.orders[g] || [])[pos];
          const prev = k ? (run.drafts[k - 1].orders[g] || [])[pos] : exp;
          const tr_ = truth && truth[g] && exp !== undefined ? truth[g][exp] : undefined;
          tr.append(el("td", { class: "cell" + (exp !== prev ? " moved" : "") }, exp === undefined ? "–" : exp, tr_ !== undefined ? el("span", { class: "tr", title: "true position", text: tr_ }) : null));
        });
        if (trueOrder) tr.append(el("td", { class: "cell truth", text: trueOrder[pos] || "" }));
        table.append(tr);
      }
      box.append(table);
    }
    return wrap;
  }

  function sourcesView(run) {
    const s = run.sources || {};
    const wrap = el("div", { "data-testid": "sources" });
    if (s.audit) wrap.append(el("p", { class: "small" }, "Audit log " + (s.audit.file || "") + ": " + fmtInt(s.audit.records) + " records, " + (s.audit.verified ? "chain verified" : "chain NOT verified")));
    if (s.note) wrap.append(el("p", { class: "muted", text: s.note }));
    if (!s.present) wrap.append(el("p", { class: "muted", text: "This run has no sources.json." }));
    if (s.searches && s.searches.length) {
      wrap.append(el("h3", { text: "Searches" }));
      const t = el("table", {}, el("tr", {}, ["tool", "provider", "query", "results"].map((h) => el("th", { text: h }))));
      for (const q of s.searches) t.append(el("tr", {}, el("td", { text: q.tool || "" }), el("td", { text: q.provider || "" }), el("td", { text: q.query || "" }), el("td", { class: "num", text: q.n_results ?? "" })));
      wrap.append(t);
    }
    const items = s.items || [];
    if (items.length) {
      const counts = {};
      for (const i of items) counts[i.outcome] = (counts[i.outcome] || 0) + 1;
      wrap.append(el("h3", { text: "Sources" }), el("p", { class: "small" }, Object.entries(counts).map(([k, v]) => k + ": " + v).join(" · ")));
      const t = el("table", {}, el("tr", {}, ["outcome", "tool", "URL", "detail"].map((h) => el("th", { text: h }))));
      for (const i of items) t.append(el("tr", {}, el("td", { class: "outcome-" + i.outcome, text: i.outcome === "withheld" ? "withheld by the detector" : i.outcome }),
        el("td", { text: i.tool || "" }), el("td", { class: "mono", text: i.url || "" }), el("td", { class: "small", text: i.detail || "" })));
      wrap.append(t);
    } else if (!(s.searches || []).length) wrap.append(el("p", { class: "muted", text: "No web source was searched, fetched or refused in this run." }));
    return wrap;
  }

  function reportView(run) {
    const wrap = el("div", { "data-testid": "report" });
    if (run.members && run.members.length) wrap.append(el("p", { class: "small" }, "Ensemble of " + run.members.length + " members (members/" + run.members.join(", members/") + "); open a member with spu view on its directory."));
    if (!run.report_md) { wrap.append(el("p", { class: "muted", text: "This run has no report.md." })); return wrap; }
    wrap.append(markdown(run.report_md, []));
    return wrap;
  }

  // -- routing ---------------------------------------------------------------------------------------
  function render() {
    const m = /^#\/run\/(\d+)/.exec(location.hash);
    const content = [];
    content.push(problemsBox(DATA.problems, "problems"));
    if (m) content.push(runPage(Number(m[1])));
    else if (DATA.single_run) content.push(runPage(0));
    else if (DATA.runs.length || DATA.outputs.length) content.push(runsPage());
    else content.push(el("p", { "data-testid": "nothing", class: "muted", text: "Nothing to show in " + DATA.title + "." }));
    app.replaceChildren(...content.filter(Boolean));
    window.scrollTo(0, 0);
    window.spuRendered = performance.now();
  }

  const nav = document.getElementById("nav");
  if (!DATA.single_run && (DATA.runs.length || DATA.outputs.length)) nav.append(el("a", { href: "#/" }, "all runs"));
  window.addEventListener("hashchange", () => { try { render(); } catch (err) { fail(err); } });
  function fail(err) {
    app.replaceChildren(el("section", { class: "problems", "data-testid": "render-error" }, el("h2", { text: "This page could not be drawn" }),
      el("p", { text: "The run files hold something the viewer did not expect: " + err }), el("pre", { text: err && err.stack ? err.stack : "" })));
    window.spuRendered = performance.now();
  }
  try { render(); } catch (err) { fail(err); }
}
