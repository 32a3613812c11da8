// gpuplan web app, the drawing half: formats the API's figures and draws the answer, tables and
// charts. Every shown figure carries its raw API value in data-raw, so tests can compare page and
// API. app.js (loaded after this file) gathers the form, keeps it in the URL and calls the API.
"use strict";

const GIB = 2 ** 30;
const PLOT_CONFIG = { displaylogo: false, responsive: true, modeBarButtonsToRemove: ["lasso2d", "select2d"] };
const MODEBAR_PX = 30; // room above a top legend for Plotly's toolbar, so the toolbar never covers it
const TOP_ROWS = 10; // plan rows shown before "show all"
const $ = (id) => document.getElementById(id);

// --- formatting (display units chosen here, once; the API speaks SI) ---------------------------
const fmt = {
  bytes: (b) => (b == null ? "—" : `${(b / GIB).toFixed(2)} GiB`), // binary GiB, as the CLI and nvidia-smi
  gib: (b) => `${(b / GIB).toFixed(1)} GiB`,
  dur(s) {
    if (s == null) return "—";
    if (s < 1e-3) return `${(s * 1e6).toPrecision(2)} µs`;
    if (s < 1) return `${(s * 1e3).toPrecision(3)} ms`;
    if (s < 120) return `${s.toPrecision(3)} s`;
    if (s < 7200) return `${(s / 60).toFixed(1)} min`;
    if (s < 172800) return `${(s / 3600).toFixed(1)} h`;
    return `${(s / 86400).toFixed(1)} days`;
  },
  usd(x) {
    if (x == null) return "—";
    if (x < 0.01) return `$${x.toPrecision(2)}`;
    if (x < 100) return `$${x.toFixed(2)}`;
    return `$${Math.round(x).toLocaleString("en-US")}`;
  },
  rate: (x, unit = "tok/s") => (x == null ? "—" : `${x >= 100 ? Math.round(x).toLocaleString("en-US") : x.toPrecision(3)} ${unit}`.trim()),
  pct: (x) => (x == null ? "—" : `${(100 * x).toFixed(1)}%`),
  kwh: (x) => (x == null ? "—" : `${x < 1 ? x.toPrecision(2) : x.toFixed(1)} kWh`),
  yesno: (b) => (b == null ? "—" : b ? "yes" : "no"),
  n: (x) => (x >= 100 ? Math.round(x).toLocaleString("en-US") : String(+x.toPrecision(3))),
};

function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v == null) continue;
    if (k === "class") e.className = v;
    else if (k.startsWith("data-")) e.setAttribute(k, typeof v === "object" ? JSON.stringify(v) : String(v));
    else e.setAttribute(k, v);
  }
  for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(c == null ? "" : String(c)));
  return e;
}

// a table cell with its raw value kept for comparison
function num(field, raw, text) {
  return el("td", { class: "num", "data-field": field, "data-raw": raw == null ? "null" : raw }, text);
}

// log-axis ticks at whole decades, labelled in the axis's own unit (no "100µ")
function decades(values, label) {
  const xs = values.filter((v) => v > 0);
  if (!xs.length) return {};
  const lo = Math.floor(Math.log10(Math.min(...xs))), hi = Math.ceil(Math.log10(Math.max(...xs)));
  const step = Math.max(1, Math.ceil((hi - lo) / 6));
  const vals = [];
  for (let e = lo; e <= hi; e += step) vals.push(10 ** e);
  return { tickvals: vals, ticktext: vals.map(label), range: [lo - 0.1, hi + 0.1] };
}
const plain = (v) => (v >= 1e4 || v < 1e-3 ? v.toExponential(0).replace("e+", "e") : String(+v.toPrecision(3)));
const tickUsd = (v) => `$${v >= 1e4 ? plain(v) : String(+v.toPrecision(2))}`; // $0.0001, not $1e-4 or $100µ
function tickDur(s) {
  if (s < 1) return `${plain(s * 1e3)} ms`;
  if (s < 60) return `${plain(s)} s`;
  if (s < 3600) return `${plain(s / 60)} min`;
  if (s < 86400) return `${plain(s / 3600)} h`;
  return `${plain(s / 86400)} d`;
}
// log-axis ticks for durations at round values of their own unit (1 min, 10 min, 1 h, 1 d), not
// at powers of ten of seconds (which read 16.7 min, 27.8 h)
const ROUND_S = [1e-4, 1e-3, 1e-2, 0.1, 1, 10, 60, 600, 3600, 36000, 86400, 864000, 8640000];
function durTicks(values) {
  const xs = values.filter((v) => v > 0);
  if (!xs.length) return {};
  const lo = Math.min(...xs), hi = Math.max(...xs);
  const vals = ROUND_S.filter((v) => v >= lo / 3 && v <= hi * 3);
  if (vals.length < 2) return decades(xs, tickDur);
  return { tickvals: vals, ticktext: vals.map(tickDur), range: [Math.log10(Math.min(lo, vals[0])) - 0.1, Math.log10(Math.max(hi, vals.at(-1))) + 0.1] };
}

// --- the answer block ----------------------------------------------------------------------------
const LATENCY_MISS = "misses its latency target"; // the estimate's verdict note (api/estimate.py)
function setAnswer(kind, verdict, binds, headline, notes) {
  const box = $("answer-box");
  box.className = kind;
  box.dataset.fits = kind === "fits" ? "true" : kind === "nofit" ? "false" : "null";
  $("verdict").textContent = verdict;
  $("binds").textContent = binds;
  $("headline").textContent = headline || "";
  $("headline").hidden = !headline;
  // a job that runs but misses the latency target asked for says so in the answer, not in small print
  const misses = (notes || []).filter((n) => n.startsWith(LATENCY_MISS));
  $("target-miss").textContent = misses.map((n) => `${n[0].toUpperCase()}${n.slice(1)}.`).join(" ")
    + (misses.length ? " The plan's $/Mtok column shows each GPU's largest batch within it." : "");
  $("target-miss").hidden = !misses.length;
  $("answer-notes").textContent = (notes || []).filter((n) => !n.startsWith(LATENCY_MISS)).join(" · ");
  box.hidden = false;
}

// the estimate's key figures in one line (only for a job that runs)
function headlineOf(e) {
  const t = e.time, c = e.cost, parts = [];
  if (t && "step_time_s" in t) {
    parts.push(`${fmt.dur(t.step_time_s)} per step`, `MFU ${fmt.pct(t.mfu)}`);
    if (t.time_to_train_s != null) parts.push(`${fmt.dur(t.time_to_train_s)} to train`);
  } else if (t && t.ttft_s != null) {
    parts.push(`first token in ${fmt.dur(t.ttft_s)}`, `${fmt.dur(t.tpot_s)} per output token`, fmt.rate(t.output_tokens_per_s, e.throughput_unit === "images/s" ? "img/s" : "tok/s"));
  } else if (t) parts.push(fmt.rate(t.output_tokens_per_s, "img/s"));
  if (c && c.usd != null) parts.push(`${fmt.usd(c.usd)} for the job`);
  if (c && c.usd_per_gpu_hour) parts.push(`${fmt.usd(c.usd_per_gpu_hour * e.num_gpus)}/h`);
  return parts.join(" · ");
}

function renderAnswer(e, onFix) {
  const v = e.verdict, m = e.memory;
  const where = `${v.num_gpus}× ${v.gpu}`;
  if (v.fits === false) {
    setAnswer("nofit", `Does not fit: ${fmt.gib(v.short_by_bytes)} short on ${where}`,
      `What binds: ${v.limit} — it needs ${fmt.bytes(v.per_gpu_bytes)} per GPU of ${fmt.bytes(v.capacity_bytes)} usable. It would not run, so it has no time or cost.`, "", v.notes);
  } else if (v.fits) {
    const speed = e.time && e.time.bottleneck ? `; speed is ${e.time.bottleneck}-bound` : "";
    setAnswer("fits", `Fits on ${where} with ${fmt.gib(v.headroom_bytes)} to spare`,
      `What binds: ${v.limit} (${fmt.bytes(v.per_gpu_bytes)} of ${fmt.bytes(v.capacity_bytes)} usable per GPU)${speed}.`, headlineOf(e), v.notes);
  } else {
    setAnswer("", "No GPU chosen", "Pick a GPU for a verdict; the plan below ranks every GPU.", "", v.notes);
  }
  // a fit whose validation range reaches past the card is no sure thing
  const high = m.per_gpu_bytes_high;
  $("tight").hidden = !(v.fits && high != null && v.capacity_bytes != null && high > v.capacity_bytes);
  $("tight").textContent = $("tight").hidden ? "" : `Tight: the estimate's validation range reaches ${fmt.bytes(high)} per GPU, over the ${fmt.bytes(v.capacity_bytes)} usable; leave more room (a smaller batch, checkpointing) to be safe.`;
  const fixes = (v.fixes || []).slice(0, 3).map((f) => {
    const spec = Object.entries(f.changes).map(([k, x]) => `${k}=${x}`).join(", ");
    const b = el("button", { type: "button", class: "fix", "data-changes": f.changes },
      el("strong", {}, `${f.label}`),
      el("span", {}, `${spec} → ${fmt.bytes(f.per_gpu_bytes)} per GPU on ${f.num_gpus}× ${f.gpu}, ${fmt.gib(f.headroom_bytes)} spare`
        + (f.time_s != null ? `; ${fmt.dur(f.time_s)} per ${f.time_what}` : "")
        + (f.usd_per_hour != null ? `; ${fmt.usd(f.usd_per_hour)}/h` : "") + `; costs: ${f.cost}`));
    b.addEventListener("click", () => onFix(f.changes));
    return b;
  });
  $("fixes").replaceChildren(...fixes);
  $("fixes-box").hidden = !fixes.length;
}

// --- the estimate -----------------------------------------------------------------------------------
function card(key, label, raw, text, sub) {
  return el("div", { "data-key": key, "data-raw": raw == null ? "null" : raw }, el("dt", {}, label), el("dd", {}, text, sub ? el("small", {}, sub) : null));
}

function band(rec, key, f) {
  const lo = rec[`${key}_low`], hi = rec[`${key}_high`];
  return lo != null && hi != null ? `range ${f(Math.min(lo, hi))} – ${f(Math.max(lo, hi))}` : null;
}

function renderEstimate(e) {
  $("estimate-gpu").textContent = `${e.num_gpus} × ${e.gpu}` + (e.layout ? `, the best layout: ${e.layout}` : "");
  const m = e.memory, t = e.time, c = e.cost, en = e.energy;
  const images = e.throughput_unit === "images/s", unit = images ? "img/s" : "tok/s";
  const cards = [
    card("memory.per_gpu_bytes", "memory per GPU", m.per_gpu_bytes, fmt.bytes(m.per_gpu_bytes), band(m, "per_gpu_bytes", fmt.bytes)),
    card("memory.fits", "fits", m.fits, fmt.yesno(m.fits),
      `of ${fmt.bytes(m.capacity_bytes)} usable` + (m.paged_spill_bytes ? `; ${fmt.bytes(m.paged_spill_bytes)} of paged optimizer states in host RAM` : "")),
  ];
  if (t && "step_time_s" in t) {
    cards.push(
      card("time.step_time_s", "step time", t.step_time_s, fmt.dur(t.step_time_s), band(t, "step_time_s", fmt.dur)),
      card("time.tokens_per_s", "throughput (all GPUs)", t.tokens_per_s, fmt.rate(t.tokens_per_s, unit), band(t, "tokens_per_s", (x) => fmt.rate(x, unit))),
      card("time.mfu", "MFU", t.mfu, fmt.pct(t.mfu), `bottleneck: ${t.bottleneck}`),
      card("time.time_to_train_s", "time to train", t.time_to_train_s, fmt.dur(t.time_to_train_s), t.train_tokens ? `${t.train_tokens.toExponential(2)} tokens` : "set tokens"),
    );
  } else if (t && images) {
    cards.push(
      card("time.prefill_batch_s", `batch of ${t.batch} images`, t.prefill_batch_s, fmt.dur(t.prefill_batch_s), band(t, "prefill_batch_s", fmt.dur)),
      card("time.output_tokens_per_s", "images/s (all)", t.output_tokens_per_s, fmt.rate(t.output_tokens_per_s, unit), `bottleneck: ${t.bottleneck}`),
    );
  } else if (t) {
    // a batch the KV cache does not hold at once runs in waves: the median request's figures, the whole batch's rate
    const q = t.queue;
    cards.push(
      card("time.ttft_s", q ? "time to first token (median request)" : "time to first token", t.ttft_s, fmt.dur(t.ttft_s), band(t, "ttft_s", fmt.dur)),
      card("time.tpot_s", q ? "time per output token (median gap)" : "time per output token", t.tpot_s, fmt.dur(t.tpot_s), band(t, "tpot_s", fmt.dur)),
      card("time.output_tokens_per_s", "output tokens/s (all)", t.output_tokens_per_s, fmt.rate(t.output_tokens_per_s),
        q ? `${q.held} of ${q.requests} at once, ${q.waves} waves` : `batch ${t.batch}, max ${t.max_batch}`),
      card("time.job_s", "job time", t.job_s, fmt.dur(t.job_s), `bottleneck: ${t.bottleneck}`),
    );
  }
  if (c) cards.push(card("cost.usd", "cost", c.usd, fmt.usd(c.usd), c.usd_per_gpu_hour ? `${fmt.usd(c.usd_per_gpu_hour)}/GPU-h` : "no price"));
  if (en) cards.push(card("energy.kwh", "energy", en.kwh, fmt.kwh(en.kwh), `${Math.round(en.avg_power_w_per_gpu)} W per GPU`));
  $("estimate").replaceChildren(...cards);
  $("estimate").querySelector("[data-key='memory.fits'] dd").className = m.fits ? "yes" : m.fits === false ? "no" : "";
  $("would-not-run").hidden = m.fits !== false;
  $("would-not-run").textContent = m.fits === false ? `Would not run on ${e.num_gpus}× ${e.gpu}: the memory below is what it would need; it has no time, cost or energy.` : "";
  const lines = (m.lines || []).map((x) =>
    el("tr", { "data-line": x.name }, el("td", {}, x.name), num("bytes", x.bytes, fmt.bytes(x.bytes)), el("td", { class: "why" }, x.note || "")));
  lines.push(el("tr", {}, el("th", {}, "total per GPU"), num("per_gpu_bytes", m.per_gpu_bytes, fmt.bytes(m.per_gpu_bytes)), el("td", { class: "why" }, `peak during ${m.peak_phase || "the step"}`)));
  $("breakdown-table").replaceChildren(el("tbody", {}, ...lines));
  // the API's "would not run" note is the banner above, in the page's words
  const notes = [...(m.notes || []), ...((t && t.notes) || []), ...(e.notes || [])].filter((n) => !(m.fits === false && n.startsWith("would not run:")));
  $("estimate-notes").textContent = notes.join(" · ");
  $("estimate-box").hidden = false;
}

// --- the plan -------------------------------------------------------------------------------------
function missesOf(o) {
  const marks = [];
  if (o.meets_deadline === false) marks.push("deadline");
  if (o.within_budget === false) marks.push("budget");
  if (o.too_slow) marks.push("too slow");
  if (o.licence_barred) marks.push("licence");
  return marks;
}

// what a plan's time and cost figures are: per step, per request or per job
function planUnits(p) {
  const w = p.workload || {};
  if (p.mode === "service") return { time: "latency per request", cost: "cost per hour", axisT: "latency per request", axisC: "cost per hour of serving (USD)", perStep: false };
  if (p.mode === "training" && !(w.tokens || w.epochs)) return { time: "time per step", cost: "cost per step", axisT: "time per step", axisC: "cost per step (USD)", perStep: true };
  return { time: "time for the job", cost: "cost of the job", axisT: "time for the whole job", axisC: "cost of the whole job (USD)", perStep: false };
}

// a serving option's $ per million output tokens at the largest batch within the latency targets
// (results/plan.py ServingCost), as the CLI's "$/Mtok @ batch" column; hover: what stops a larger batch
function servingCell(s) {
  if (!s) return num("serving", null, "—");
  const attrs = { "data-batch": s.batch == null ? "null" : s.batch, title: `limited by ${s.limited_by}` };
  if (s.batch == null) return el("td", { class: "num miss", "data-field": "serving", "data-raw": "null", ...attrs }, "misses target");
  const td = num("serving", s.usd_per_million_tokens, `${s.usd_per_million_tokens == null ? "no price" : fmt.usd(s.usd_per_million_tokens)} @ ${fmt.n(s.batch)}`);
  for (const [k, v] of Object.entries(attrs)) td.setAttribute(k, v);
  return td;
}

// the workload's GPU is the user's own card only when `have` lists it (else it is their pick)
function yours(p, o) {
  return !!p.have && [o.gpu, ...(o.same_as || [])].some((g) => g === p.chosen_gpu && g in p.have);
}

// `owned`: options on the user's own GPUs, whose cost is electricity only (the CLI's "power cost")
function optionRows(p, opts, units, start = 0, owned = false) {
  const unit = p.throughput_unit || "tokens/s", power = owned ? "power " : "";
  const serving = opts.some((o) => o.serving);
  const heads = ["#", "GPU", "×", units.time, unit, power + units.cost, `${power}$/h (all GPUs)`, serving ? `${power}$/Mtok @ batch` : null, "misses", "bottleneck", "why"];
  const head = el("tr", {}, ...heads.filter((h) => h != null).map((h) => el("th", { scope: "col" }, h)));
  const rows = opts.map((o, i) => {
    // a row may stand for several cards with the very same figures (`same_as`): yours among them too
    const mine = o.gpu === p.chosen_gpu || (o.same_as || []).includes(p.chosen_gpu), misses = missesOf(o);
    return el("tr", { "data-gpu": o.gpu, "data-n": o.num_gpus, "data-same-as": o.same_as, class: [o.usable ? "" : "unusable", mine ? "chosen" : ""].join(" ").trim() || null },
      // a pinned row (your GPU, ranked below the top N) shows its place in the whole ranking
      el("td", {}, `${o.pinned && o.rank ? o.rank : start + i + 1}${o.pareto ? " ★" : ""}`),
      el("td", {}, o.gpu, mine ? ` (${yours(p, o) ? "yours" : "your pick"}${o.pinned ? ", pinned" : ""})` : "", o.same_as && o.same_as.length ? ` (= ${o.same_as.join(", ")})` : ""),
      num("num_gpus", o.num_gpus, o.num_gpus),
      num("time_s", o.time_s, fmt.dur(o.time_s)),
      num("throughput", o.throughput, fmt.rate(o.throughput, "")),
      num("cost_usd", o.cost_usd, o.cost_usd == null ? "no price" : fmt.usd(o.cost_usd)),
      num("usd_per_hour", o.usd_per_hour, fmt.usd(o.usd_per_hour)),
      serving ? servingCell(o.serving) : null,
      el("td", { class: misses.length ? "miss" : "", "data-field": "misses" }, misses.join(", ")),
      el("td", {}, o.bottleneck),
      el("td", { class: "why" }, o.why));
  });
  return [el("thead", {}, head), el("tbody", {}, ...rows)];
}

function renderPlan(p) {
  $("plan-box").hidden = false;
  $("plan-title").textContent = p.mode === "cluster" ? "Best parallel layouts" : p.have ? "On the GPUs you have" : "Recommended GPUs";
  $("unpriced-box").hidden = $("rent-box").hidden = $("plan-more").hidden = $("own-note").hidden = $("serving-note").hidden = true;
  if (p.mode === "cluster") return renderLayouts(p);
  const units = planUnits(p);
  const fitting = p.options.filter((o) => o.fits);
  // what can be rented first (the API ranks priced options before unpriced ones); unpriced apart
  const priced = fitting.filter((o) => o.usd_per_hour != null), unpriced = fitting.filter((o) => o.usd_per_hour == null);
  const main = p.have ? fitting : priced;
  const owned = p.have ? ` on ${Object.entries(p.have).map(([g, n]) => `${n}× ${g}`).join(", ")}` : "";
  $("plan-caption").textContent = `${main.length} ${p.have ? "options that fit" : "rentable options (a listed price) that fit"}${owned} of ${p.considered} considered (${p.mode}), ranked by ${p.objective}; ★ = on the cost-time Pareto front; ${units.perStep ? "figures are per training step (set tokens for the whole job)" : units.time === "latency per request" ? "cost is per hour of serving" : "figures are for the whole job"}.`;
  const show = (all) => {
    $("plan-table").replaceChildren(...optionRows(p, all ? main : main.slice(0, TOP_ROWS), units, 0, !!p.have));
    $("plan-more").hidden = main.length <= TOP_ROWS;
    $("plan-more").textContent = all ? `Show the top ${TOP_ROWS}` : `Show all ${main.length}`;
    $("plan-more").onclick = () => show(!all);
  };
  show(false);
  if (!p.have && unpriced.length) {
    $("unpriced-box").hidden = false;
    $("unpriced-title").textContent = `${unpriced.length} more that fit but have no listed price (not rentable from the price list, e.g. rack-scale systems)`;
    $("unpriced-table").replaceChildren(...optionRows(p, unpriced, units));
  }
  if (p.rent_options && p.rent_options.length) {
    $("rent-box").hidden = false;
    $("rent-table").replaceChildren(...optionRows(p, p.rent_options, units));
  }
  planNotes(p, main);
  drawPareto(p, units);
}

// the CLI's lines under its table (interfaces/cli/plan.py): what an owned GPU's cost is, and what
// "$/Mtok @ batch" means
const OWN_POWER = "electricity only, GPU energy x the EIA 2022 US commercial average price"; // specs/prices.py
function planNotes(p, main) {
  $("own-note").hidden = !p.have;
  $("own-note").textContent = p.have ? `Power cost on your GPUs: ${OWN_POWER}; what renting would add is priced at rental rates.` : "";
  const serving = main.filter((o) => o.serving);
  $("serving-note").hidden = !serving.length;
  if (!serving.length) return;
  const w = p.workload || {};
  const targets = ["max_tpot_ms", "max_ttft_ms"].filter((k) => w[k] != null).map((k) => `${k}=${w[k]}`);
  const at = targets.length ? `the largest batch that fits and meets ${targets.join(", ")}` : "the workload's batch_size";
  const first = serving[0], s = first.serving, where = `${first.num_gpus}× ${first.gpu}`;
  const limit = s.batch == null ? `on ${where}, ${s.limited_by}` : `on ${where}, batch ${fmt.n(s.batch)}: a larger one is limited by ${s.limited_by}`;
  $("serving-note").textContent = `$/Mtok @ batch: $ per million output tokens at ${at} (concurrent sequences)`
    + (targets.length ? `; ${limit}` : "; set a max time per output token (max_tpot_ms) or to first token (max_ttft_ms) to price the largest batch within it") + ".";
}

function renderLayouts(p) {
  const cl = p.cluster;
  $("plan-caption").textContent = `Best layouts on ${cl.spec} (${cl.num_gpus} GPUs, ${cl.interconnect}); ${p.search.evaluated.toLocaleString("en-US")} layouts searched in ${p.search.seconds.toFixed(2)} s.`;
  const head = el("tr", {}, ...["#", "layout", "time per step", "tokens/s", "MFU", "memory/GPU", "comm", "bubble", "time to train", "cost of the job"].map((h) => el("th", { scope: "col" }, h)));
  const rows = p.layouts.map((l, i) =>
    el("tr", { "data-layout": l.layout },
      el("td", {}, i + 1), el("td", {}, l.layout),
      num("step_time_s", l.step_time_s, fmt.dur(l.step_time_s)),
      num("tokens_per_s", l.tokens_per_s, fmt.rate(l.tokens_per_s, "")),
      num("mfu", l.mfu, fmt.pct(l.mfu)),
      num("per_gpu_bytes", l.per_gpu_bytes, fmt.bytes(l.per_gpu_bytes)),
      num("comm_share", l.comm_share, fmt.pct(l.comm_share)),
      num("bubble_share", l.bubble_share, fmt.pct(l.bubble_share)),
      num("time_to_train_s", l.time_to_train_s, fmt.dur(l.time_to_train_s)),
      num("cost_usd", l.cost_usd, fmt.usd(l.cost_usd))));
  $("plan-table").replaceChildren(el("thead", {}, head), el("tbody", {}, ...rows));
  Plotly.purge($("chart-pareto"));
  $("chart-pareto").hidden = true;
  $("pareto-title").textContent = "Cost against time";
  $("pareto-note").textContent = "One cluster: every layout costs in proportion to its time, so the table is the whole trade-off.";
}

function drawPareto(p, units) {
  $("chart-pareto").hidden = false; // shown before measuring its width
  const pts = [...p.options, ...(p.rent_options || [])].filter((o) => o.fits && o.time_s != null && o.cost_usd != null);
  const label = (o) => `${o.num_gpus}× ${o.gpu}`;
  const hover = (o) => `${label(o)}<br>${fmt.dur(o.time_s)}, ${fmt.usd(o.cost_usd)}<br>${o.why}`;
  const usable = pts.filter((o) => o.usable), other = pts.filter((o) => !o.usable);
  const front = pts.filter((o) => o.pareto).sort((a, b) => a.time_s - b.time_s);
  const traces = [
    { name: "usable", x: usable.map((o) => o.time_s), y: usable.map((o) => o.cost_usd), text: usable.map(hover), hoverinfo: "text", mode: "markers", type: "scatter", marker: { size: 8, color: "#0b62c4" } },
    { name: "misses deadline, budget, speed or licence", x: other.map((o) => o.time_s), y: other.map((o) => o.cost_usd), text: other.map(hover), hoverinfo: "text", mode: "markers", type: "scatter", marker: { size: 7, color: "#8c959f" } },
    { name: "Pareto front", x: front.map((o) => o.time_s), y: front.map((o) => o.cost_usd), text: front.map(label), mode: front.length <= 6 && $("chart-pareto").clientWidth >= 600 ? "lines+markers+text" : "lines+markers" /* labels while legible */, textposition: front.map((_, i) => (i % 2 ? "bottom left" : "top right")), type: "scatter", line: { shape: "hv", color: "#b42318" }, marker: { size: 10, color: "#b42318", symbol: "star" }, hoverinfo: "skip" },
  ];
  const layout = {
    margin: { t: 10, r: 20, b: 60, l: 80 }, legend: { orientation: "h", y: -0.25 },
    xaxis: { type: "log", title: { text: units.axisT }, ...durTicks(pts.map((o) => o.time_s)) },
    yaxis: { type: "log", title: { text: units.axisC }, ...decades(pts.map((o) => o.cost_usd), tickUsd) },
  };
  $("pareto-title").textContent = units.perStep ? "Cost against time, per training step" : "Cost against time";
  $("chart-pareto").hidden = !pts.length;
  $("pareto-note").textContent = pts.length ? "" : "No fitting option has both a time and a price.";
  if (pts.length) Plotly.react($("chart-pareto"), traces, layout, PLOT_CONFIG);
}

// --- a graphics job's plan ------------------------------------------------------------------------
const count = (x, unit) => `${fmt.n(x)} ${fmt.n(x) === "1" && unit.endsWith("s") ? unit.slice(0, -1) : unit}`; // 1 stream, 3 streams
function renderGraphics(p) {
  const w = p.workload, opts = p.options;
  const service = w.task !== "render";
  const best = opts[0];
  if (best) {
    // a service's cost_usd is an hour of all its GPUs (usd_per_hour is one GPU's)
    const cost = best.cost_usd != null ? (service ? `${fmt.usd(best.cost_usd)} per hour for ${best.num_gpus} GPUs` : `${fmt.usd(best.cost_usd)} for the job`) : "no listed price";
    setAnswer("fits", `Runs on ${best.num_gpus}× ${best.gpu}: ${count(best.per_gpu, best.unit)} per GPU for ${count(best.demand, service ? best.unit : "frames")}`,
      `What binds: ${best.bottleneck}. Ranked by ${p.objective}; ${cost}${best.time_s != null ? `, ${fmt.dur(best.time_s)}` : ""}.`, "", []);
  } else setAnswer("nofit", "No GPU in the catalog can run this job", "Every GPU lacks something it needs; the list below says what.", "", []);
  $("fixes-box").hidden = $("tight").hidden = true;
  $("graphics-title").textContent = `GPUs for ${w.task}`;
  $("graphics-caption").textContent = `${opts.length} GPUs can run it, ranked by ${p.objective}; ${p.unsuitable.length} cannot.`;
  const head = el("tr", {}, ...["#", "GPU", "GPUs", `per GPU`, service ? "cost per hour" : "cost of the job", service ? "" : "time", "energy", "limited by", "why"].filter((h) => h !== "").map((h) => el("th", { scope: "col" }, h)));
  const rows = opts.map((o, i) => el("tr", { "data-gpu": o.gpu, "data-n": o.num_gpus },
    el("td", {}, i + 1), el("td", {}, o.gpu), num("num_gpus", o.num_gpus, o.num_gpus),
    num("per_gpu", o.per_gpu, count(o.per_gpu, o.unit)),
    num("cost_usd", o.cost_usd, o.cost_usd == null ? "no price" : service ? `${fmt.usd(o.cost_usd)}/h` : fmt.usd(o.cost_usd)),
    service ? null : num("time_s", o.time_s, fmt.dur(o.time_s)),
    num("energy_kwh", o.energy_kwh, service ? `${fmt.kwh(o.energy_kwh)}/h` : fmt.kwh(o.energy_kwh)),
    el("td", {}, o.bottleneck), el("td", { class: "why" }, o.why)));
  $("graphics-table").replaceChildren(el("thead", {}, head), el("tbody", {}, ...rows));
  $("unsuitable-title").textContent = `${p.unsuitable.length} GPUs that cannot run it, and why`;
  $("unsuitable-list").replaceChildren(...p.unsuitable.map((u) => el("li", { "data-gpu": u.gpu }, `${u.gpu}: ${u.why}`)));
  $("graphics-box").hidden = false;
}

// --- does it fit, every GPU -------------------------------------------------------------------------
// the chart shows the GPUs near the line: the largest that do not fit and the smallest that do
// (and the chosen one); the table lists every GPU
function fitCandidates(f, chosen) {
  const yes = f.gpus.filter((g) => g.fits).sort((a, b) => a.memory_bytes - b.memory_bytes);
  const no = f.gpus.filter((g) => !g.fits).sort((a, b) => b.memory_bytes - a.memory_bytes);
  const pick = [...no.slice(0, 6), ...yes.slice(0, 10)];
  const mine = f.gpus.find((g) => g.gpu === chosen);
  if (mine && !pick.includes(mine)) pick.push(mine);
  return pick.sort((a, b) => a.memory_bytes - b.memory_bytes);
}

function renderFit(f, chosen) {
  $("fit-box").hidden = false;
  // an engine that preallocates its KV cache (vLLM, SGLang) reserves a share of every card whatever the
  // job needs: "needs per GPU" is the job's (the whole batch's KV), the share a column of its own
  const srv = (f.gpus.find((g) => g.serving) || {}).serving;
  const cols = ["GPU", "memory", "needs per GPU", ...(srv ? [`${srv.engine} reserves`] : []), `fits on ${f.num_gpus}`, ...(srv ? ["runs at once"] : []), "fewest GPUs", "layout"];
  const head = el("tr", {}, ...cols.map((h) => el("th", { scope: "col" }, h)));
  const atOnce = (s, fits) => !fits || !s ? "" : s.runs_at_once >= s.batch_size ? `all ${s.batch_size} (holds ${s.max_sequences})` : `${s.runs_at_once} of ${s.batch_size} (${s.batch_size - s.runs_at_once} wait)`;
  const rows = f.gpus.map((g) =>
    el("tr", { "data-gpu": g.gpu, class: g.gpu === chosen ? "chosen" : null },
      el("td", {}, g.gpu),
      num("memory_bytes", g.memory_bytes, fmt.bytes(g.memory_bytes)),
      num("per_gpu_bytes", g.per_gpu_bytes, fmt.bytes(g.per_gpu_bytes)),
      srv ? num("reserved_bytes", g.serving.reserved_bytes, fmt.bytes(g.serving.reserved_bytes)) : null,
      el("td", { "data-field": "fits", "data-raw": g.fits, class: g.fits ? "yes" : "no" }, fmt.yesno(g.fits)),
      srv ? num("runs_at_once", g.serving.runs_at_once, atOnce(g.serving, g.fits)) : null,
      num("min_gpus", g.min_gpus, g.min_gpus == null ? "none" : g.min_gpus),
      el("td", {}, Object.entries(g.min_gpus_layout || {}).map(([k, v]) => `${k}=${v}`).join(" "))));
  $("fit-table").replaceChildren(el("thead", {}, head), el("tbody", {}, ...rows));
  const shown = fitCandidates(f, chosen);
  const layout = Object.entries(f.workload).filter(([k, v]) => ["tp", "pp", "zero"].includes(k) && (k === "zero" ? v > 0 : v > 1)).map(([k, v]) => `${k}=${v}`).join(" ");
  $("fit-caption").textContent = (f.num_gpus > 1 ? `On ${f.num_gpus} GPUs of each type${layout ? ` (${layout})` : ""}. ` : "") + `The chart shows the ${shown.length} GPUs nearest the line (the largest that do not fit on ${f.num_gpus}, the smallest that do); the table lists all ${f.gpus.length}. Bars: memory each GPU needs${srv ? ` for the whole batch; ${srv.engine} reserves gpu_memory_utilization ${srv.gpu_memory_utilization} of each card at start-up and starts where one sequence's KV fits in it` : ""}; ┃ the card's memory.`;
  const names = shown.map((g) => g.gpu);
  const parts = [];
  for (const g of shown) for (const k of Object.keys(g.breakdown || {})) if (!parts.includes(k)) parts.push(k);
  const traces = parts.map((k) => ({
    name: k, type: "bar", orientation: "h", y: names, x: shown.map((g) => (g.breakdown[k] || 0) / GIB),
    hovertemplate: `%{y}<br>${k}: %{x:.2f} GiB<extra></extra>`,
  }));
  traces.push({
    name: "card memory", type: "scatter", mode: "markers", y: names, x: shown.map((g) => g.memory_bytes / GIB),
    marker: { symbol: "line-ns-open", size: 14, color: "#1b1f24", line: { width: 3, color: "#1b1f24" } }, hovertemplate: "%{y}: %{x:.1f} GiB<extra>card memory</extra>",
  });
  const top = Math.max(...shown.map((g) => Math.max(g.memory_bytes, g.per_gpu_bytes))) / GIB;
  // the legend above the bars: one entry a line on a phone, four a line on a wider screen
  const legendH = 20 * Math.ceil(traces.length / ($("chart-memory").clientWidth < 600 ? 1 : 4)) + 10;
  const height = legendH + MODEBAR_PX + 60 + 26 * shown.length;
  $("chart-memory").style.height = `${height}px`;
  Plotly.react($("chart-memory"), traces, {
    barmode: "stack", margin: { t: legendH + MODEBAR_PX, r: 10, b: 50, l: 10 }, legend: { orientation: "h", x: 0, y: 1, yanchor: "bottom" },
    xaxis: { title: { text: "memory per GPU (GiB)" }, range: [0, top * 1.05] },
    yaxis: { automargin: true, dtick: 1, tickfont: { size: 11 } },
  }, PLOT_CONFIG);
}

// --- the roofline and the relative chart -------------------------------------------------------------
function renderRoofline(r) {
  $("roofline-box").hidden = false;
  $("roofline-gpu").textContent = `${r.gpu} (${r.precision}${r.peak_runs_as !== r.precision ? ` as ${r.peak_runs_as}` : ""})`;
  const xs = r.points.map((p) => p.intensity_flop_per_byte);
  const lo = Math.min(r.ridge_flop_per_byte, ...xs) / 4, hi = Math.max(r.ridge_flop_per_byte, ...xs) * 4;
  const roofX = [lo, r.ridge_flop_per_byte, hi];
  const roofY = roofX.map((x) => Math.min(r.peak_flop_per_s, x * r.memory_bandwidth_bytes_per_s) / 1e12);
  const groups = {};
  for (const p of r.points) (groups[p.stage === p.phase ? p.stage : `${p.stage} · ${p.phase}`] ||= []).push(p);
  const traces = [{ name: `roof: ${(r.peak_flop_per_s / 1e12).toFixed(0)} TFLOP/s, ${(r.memory_bandwidth_bytes_per_s / 1e12).toFixed(2)} TB/s`, x: roofX, y: roofY, type: "scatter", mode: "lines", line: { color: "#1b1f24", width: 2 }, hoverinfo: "skip" }];
  const longest = Math.max(...r.points.map((q) => q.time_s));
  for (const [g, ps] of Object.entries(groups)) {
    traces.push({
      name: g, type: "scatter", mode: "markers", x: ps.map((p) => p.intensity_flop_per_byte), y: ps.map((p) => p.achieved_flop_per_s / 1e12),
      text: ps.map((p) => `${p.name} (${p.bound}-bound)<br>${fmt.dur(p.time_s)}`), marker: { size: ps.map((p) => 6 + 14 * Math.sqrt(p.time_s / longest)) },
      hovertemplate: "%{text}<br>%{x:.1f} FLOP/byte, %{y:.1f} TFLOP/s<extra></extra>",
    });
  }
  const ys = [...roofY, ...r.points.map((p) => p.achieved_flop_per_s / 1e12)];
  Plotly.react($("chart-roofline"), traces, {
    margin: { t: 10, r: 20, b: 60, l: 70 }, legend: { orientation: "h", y: -0.25 },
    xaxis: { type: "log", title: { text: "arithmetic intensity (FLOP per byte)" }, ...decades([lo, hi], plain) },
    yaxis: { type: "log", title: { text: "achieved TFLOP/s" }, ...decades(ys, plain) },
  }, PLOT_CONFIG);
}

function renderRelative(rel) {
  $("relative-box").hidden = false;
  const w = rel.workloads;
  $("relative-caption").textContent = `${w.model}: training (batch ${w.training_16bit.batch_size} × ${w.training_16bit.seq_len}), inference (${w.inference_16bit.input_len} in / ${w.inference_16bit.output_len} out, batch ${w.inference_16bit.batch_size}). ${w.note}`;
  const rows = [...rel.rows].reverse(); // the fastest at the top
  const names = rows.map((r) => r.gpu);
  const trace = (key, name) => ({ name, type: "bar", orientation: "h", y: names, x: rows.map((r) => r[key]), hovertemplate: `%{y}<br>${name}: %{x:.0f}%<extra></extra>` });
  const height = 120 + 22 * rows.length;
  $("chart-relative").style.height = `${height}px`;
  Plotly.react($("chart-relative"), [trace("train_16bit_pct", "training 16-bit"), trace("infer_16bit_pct", "inference 16-bit"), trace("infer_8bit_pct", "inference 8-bit")], {
    barmode: "group", bargap: 0.25, margin: { t: 24 + MODEBAR_PX, r: 10, b: 60, l: 10 }, legend: { orientation: "h", y: 1, yanchor: "bottom" },
    xaxis: { title: { text: `% of ${rel.reference_gpu} 16-bit speed`, font: { size: 12 } } },
    yaxis: { automargin: true, dtick: 1, tickfont: { size: 10 } },
    shapes: [{ type: "line", yref: "paper", y0: 0, y1: 1, x0: 100, x1: 100, line: { dash: "dot", color: "#535b66" } }],
  }, PLOT_CONFIG);
}
