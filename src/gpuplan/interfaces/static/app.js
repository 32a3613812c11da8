// gpuplan web app. Every number on the page comes from the JSON API (the same library as the CLI);
// this file only gathers the form, keeps it in the URL, formats figures and draws them with Plotly.
// Each shown figure carries its raw API value in data-raw, so tests can compare page and API.
"use strict";

const TRAINING = new Set(["pretrain", "finetune", "lora", "qlora"]);
const DEFAULT_GPU = "H100 SXM5 80GB";
// form fields: id -> how the API wants the value (kept in the URL under the same name)
const FIELDS = {
  model: "str", task: "str", precision: "str", batch_size: "int", seq_len: "int", input_len: "int",
  output_len: "int", weight_dtype: "str", lora_rank: "int", activation_checkpointing: "str", tokens: "float",
  gpu: "str", num_gpus: "int", cluster: "str", objective: "str", deadline: "str", budget: "float",
};
// keys that only mean something for some tasks
const ONLY = {
  seq_len: (t) => TRAINING.has(t), activation_checkpointing: (t) => TRAINING.has(t),
  lora_rank: (t) => t === "lora" || t === "qlora",
  input_len: (t) => t === "inference", output_len: (t) => t === "inference", weight_dtype: (t) => t === "inference",
};
const GIB = 2 ** 30;
const PLOT_CONFIG = { displaylogo: false, responsive: true };
const $ = (id) => document.getElementById(id);
let runCount = 0;

// --- formatting (display units chosen here, once; the API speaks SI) ---------------------------
const fmt = {
  bytes: (b) => (b == null ? "—" : `${(b / GIB).toFixed(2)} GiB`), // binary GiB, as the CLI and nvidia-smi
  dur(s) {
    if (s == null) return "—";
    if (s < 1) return `${(s * 1e3).toFixed(1)} ms`;
    if (s < 120) return `${s.toFixed(1)} s`;
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
  rate: (x, unit = "tok/s") => (x == null ? "—" : `${x >= 100 ? Math.round(x).toLocaleString("en-US") : x.toPrecision(3)} ${unit}`),
  pct: (x) => (x == null ? "—" : `${(100 * x).toFixed(1)}%`),
  count: (n) => (n == null ? "—" : String(n)),
  kwh: (x) => (x == null ? "—" : `${x < 1 ? x.toPrecision(2) : x.toFixed(1)} kWh`),
  yesno: (b) => (b == null ? "—" : b ? "yes" : "no"),
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

// --- state: form <-> URL -------------------------------------------------------------------------
function readForm() {
  const s = {};
  for (const id of Object.keys(FIELDS)) {
    const v = $(id).value.trim();
    if (v !== "") s[id] = v;
  }
  return s;
}

function writeForm(s) {
  for (const id of Object.keys(FIELDS)) {
    const node = $(id);
    if (node.tagName === "SELECT") {
      if (s[id] != null && ![...node.options].some((o) => o.value === s[id])) node.append(el("option", { value: s[id] }, s[id]));
      node.value = s[id] ?? node.options[0]?.value ?? "";
    } else node.value = s[id] ?? "";
  }
  if (!s.gpu && [...$("gpu").options].some((o) => o.value === DEFAULT_GPU)) $("gpu").value = DEFAULT_GPU;
  showTaskFields();
}

function saveUrl(s, config) {
  const q = new URLSearchParams(s);
  const hash = config ? `#config=${encodeURIComponent(config)}` : "";
  history.replaceState(null, "", `${location.pathname}?${q}${hash}`);
}

function loadUrl() {
  const s = Object.fromEntries([...new URLSearchParams(location.search)].filter(([k]) => k in FIELDS));
  const m = location.hash.match(/^#config=(.*)$/s);
  return { state: s, config: m ? decodeURIComponent(m[1]) : "" };
}

function showTaskFields() {
  const t = $("task").value;
  const training = TRAINING.has(t);
  for (const n of document.querySelectorAll(".train")) n.hidden = !training;
  for (const n of document.querySelectorAll(".infer")) n.hidden = training;
  for (const n of document.querySelectorAll(".lora")) n.hidden = !(t === "lora" || t === "qlora");
}

// the workload JSON the API takes: the workload keys (docs/workload.md), typed, only those the task uses
function workloadOf(s, config) {
  const w = {};
  for (const [k, v] of Object.entries(s)) {
    if (ONLY[k] && !ONLY[k](s.task || "inference")) continue;
    const kind = FIELDS[k];
    w[k] = kind === "int" ? Number.parseInt(v, 10) : kind === "float" ? Number(v) : v;
    if ((kind === "int" || kind === "float") && !Number.isFinite(w[k])) throw new Error(`'${k}' must be a number. Got ${JSON.stringify(v)}.`);
  }
  if (config) {
    try { w.config = JSON.parse(config); } catch (e) { throw new Error(`The pasted config.json is not valid JSON: ${e.message}`); }
    if (!s.model) delete w.model;
  }
  if (w.cluster) { delete w.num_gpus; delete w.gpu; } // the cluster sets the GPU and its count
  return w;
}

// --- the API --------------------------------------------------------------------------------------
async function call(path, body) {
  const init = body === undefined ? {} : { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) };
  const r = await fetch(path, init);
  let data = null;
  try { data = await r.json(); } catch { /* not JSON: reported below */ }
  if (!r.ok) throw new Error(data && data.detail ? data.detail : `${path} answered ${r.status}`);
  return data;
}

// --- rendering --------------------------------------------------------------------------------------
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
    cards.push(
      card("time.ttft_s", "time to first token", t.ttft_s, fmt.dur(t.ttft_s), band(t, "ttft_s", fmt.dur)),
      card("time.tpot_s", "time per output token", t.tpot_s, fmt.dur(t.tpot_s), band(t, "tpot_s", fmt.dur)),
      card("time.output_tokens_per_s", "output tokens/s (all)", t.output_tokens_per_s, fmt.rate(t.output_tokens_per_s), `batch ${t.batch}, max ${t.max_batch}`),
      card("time.job_s", "job time", t.job_s, fmt.dur(t.job_s), `bottleneck: ${t.bottleneck}`),
    );
  }
  if (c) cards.push(card("cost.usd", "cost", c.usd, fmt.usd(c.usd), c.usd_per_gpu_hour ? `${fmt.usd(c.usd_per_gpu_hour)}/GPU-h` : "no price"));
  if (en) cards.push(card("energy.kwh", "energy", en.kwh, fmt.kwh(en.kwh), `${Math.round(en.avg_power_w_per_gpu)} W per GPU`));
  $("estimate").replaceChildren(...cards);
  const lines = (m.lines || []).map((x) =>
    el("tr", { "data-line": x.name }, el("td", {}, x.name), num("bytes", x.bytes, fmt.bytes(x.bytes)), el("td", { class: "why" }, x.note || "")));
  lines.push(el("tr", {}, el("th", {}, "total per GPU"), num("per_gpu_bytes", m.per_gpu_bytes, fmt.bytes(m.per_gpu_bytes)), el("td", { class: "why" }, `peak during ${m.peak_phase || "the step"}`)));
  $("breakdown-table").replaceChildren(el("tbody", {}, ...lines));
  const notes = [...(m.notes || []), ...((t && t.notes) || []), ...(e.notes || [])];
  $("estimate-notes").textContent = notes.join(" · ");
  $("estimate-box").hidden = false;
}

function renderPlan(p) {
  const box = $("plan-box");
  box.hidden = false;
  $("plan-title").textContent = p.mode === "cluster" ? "Best parallel layouts" : "Recommended GPUs";
  if (p.mode === "cluster") return renderLayouts(p);
  const unit = p.throughput_unit || "tokens/s";
  const service = p.mode === "service";
  $("plan-caption").textContent = `${p.options.length} options of ${p.considered} (${p.mode}), ranked by ${p.objective}; ★ = on the cost-time Pareto front.`;
  const head = el("tr", {}, ...["#", "GPU", "×", "fits", service ? "latency" : "time", unit, service ? "cost / window" : "cost", "$/h", "bottleneck", "why"].map((h) => el("th", {}, h)));
  const rows = p.options.map((o, i) =>
    el("tr", { "data-gpu": o.gpu, "data-n": o.num_gpus, class: o.usable ? "" : "unusable" },
      el("td", {}, `${i + 1}${o.pareto ? " ★" : ""}`),
      el("td", {}, o.gpu),
      num("num_gpus", o.num_gpus, o.num_gpus),
      el("td", { "data-field": "fits", "data-raw": o.fits, class: o.fits ? "yes" : "no" }, fmt.yesno(o.fits)),
      num("time_s", o.time_s, fmt.dur(o.time_s)),
      num("throughput", o.throughput, fmt.rate(o.throughput, "")),
      num("cost_usd", o.cost_usd, fmt.usd(o.cost_usd)),
      num("usd_per_hour", o.usd_per_hour, fmt.usd(o.usd_per_hour)),
      el("td", {}, o.bottleneck),
      el("td", { class: "why" }, o.why)));
  $("plan-table").replaceChildren(el("thead", {}, head), el("tbody", {}, ...rows));
  drawPareto(p, service);
}

function renderLayouts(p) {
  const cl = p.cluster;
  $("plan-caption").textContent = `Best layouts on ${cl.spec} (${cl.num_gpus} GPUs, ${cl.interconnect}); ${p.search.evaluated.toLocaleString("en-US")} layouts searched in ${p.search.seconds.toFixed(2)} s.`;
  const head = el("tr", {}, ...["#", "layout", "step", "tokens/s", "MFU", "memory/GPU", "comm", "bubble", "time to train", "cost"].map((h) => el("th", {}, h)));
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
  $("pareto-note").textContent = "One cluster: every layout costs in proportion to its time, so the table is the whole trade-off.";
}

function drawPareto(p, service) {
  const pts = p.options.filter((o) => o.fits && o.time_s != null && o.cost_usd != null);
  const label = (o) => `${o.num_gpus}× ${o.gpu}`;
  const hover = (o) => `${label(o)}<br>${fmt.dur(o.time_s)}, ${fmt.usd(o.cost_usd)}<br>${o.why}`;
  const usable = pts.filter((o) => o.usable), other = pts.filter((o) => !o.usable);
  const front = pts.filter((o) => o.pareto).sort((a, b) => a.time_s - b.time_s);
  const traces = [
    { name: "usable", x: usable.map((o) => o.time_s), y: usable.map((o) => o.cost_usd), text: usable.map(hover), hoverinfo: "text", mode: "markers", type: "scatter", marker: { size: 8, color: "#0b62c4" } },
    { name: "misses deadline, budget, speed or licence", x: other.map((o) => o.time_s), y: other.map((o) => o.cost_usd), text: other.map(hover), hoverinfo: "text", mode: "markers", type: "scatter", marker: { size: 7, color: "#b8c0ca" } },
    { name: "Pareto front", x: front.map((o) => o.time_s), y: front.map((o) => o.cost_usd), text: front.map(label), mode: front.length <= 10 ? "lines+markers+text" : "lines+markers" /* labels while legible */, textposition: front.map((_, i) => (i % 2 ? "bottom left" : "top right")), type: "scatter", line: { shape: "hv", color: "#c2362b" }, marker: { size: 10, color: "#c2362b", symbol: "star" }, hoverinfo: "skip" },
  ];
  const layout = {
    margin: { t: 10, r: 20, b: 50, l: 70 }, legend: { orientation: "h", y: -0.2 },
    xaxis: { type: "log", title: { text: service ? "request latency (s)" : "time to finish (s)" } },
    yaxis: { type: "log", title: { text: service ? "cost of serving for the window (USD)" : "cost (USD)" } },
  };
  $("chart-pareto").hidden = !pts.length;
  $("pareto-note").textContent = pts.length ? "" : "No fitting option has both a time and a price.";
  if (pts.length) Plotly.react($("chart-pareto"), traces, layout, PLOT_CONFIG);
}

function renderFit(f) {
  $("fit-box").hidden = false;
  const head = el("tr", {}, ...["GPU", "memory", "needs per GPU", `fits on ${f.num_gpus}`, "fewest GPUs", "layout"].map((h) => el("th", {}, h)));
  const rows = f.gpus.map((g) =>
    el("tr", { "data-gpu": g.gpu },
      el("td", {}, g.gpu),
      num("memory_bytes", g.memory_bytes, fmt.bytes(g.memory_bytes)),
      num("per_gpu_bytes", g.per_gpu_bytes, fmt.bytes(g.per_gpu_bytes)),
      el("td", { "data-field": "fits", "data-raw": g.fits, class: g.fits ? "yes" : "no" }, fmt.yesno(g.fits)),
      num("min_gpus", g.min_gpus, g.min_gpus == null ? "none" : g.min_gpus),
      el("td", {}, Object.entries(g.min_gpus_layout || {}).map(([k, v]) => `${k}=${v}`).join(" "))));
  $("fit-table").replaceChildren(el("thead", {}, head), el("tbody", {}, ...rows));
  // stacked memory breakdown per GPU, the GPU's memory marked
  const names = f.gpus.map((g) => g.gpu);
  const parts = [];
  for (const g of f.gpus) for (const k of Object.keys(g.breakdown || {})) if (!parts.includes(k)) parts.push(k);
  const traces = parts.map((k) => ({
    name: k, type: "bar", x: names, y: f.gpus.map((g) => (g.breakdown[k] || 0) / GIB),
    hovertemplate: `%{x}<br>${k}: %{y:.2f} GiB<extra></extra>`,
  }));
  traces.push({
    name: "GPU memory", type: "scatter", mode: "markers", x: names, y: f.gpus.map((g) => g.memory_bytes / GIB),
    marker: { symbol: "line-ew-open", size: 18, line: { width: 3, color: "#1b1f24" } }, hovertemplate: "%{x}: %{y:.1f} GiB<extra>GPU memory</extra>",
  });
  Plotly.react($("chart-memory"), traces, {
    barmode: "stack", margin: { t: 10, r: 10, b: 150, l: 60 }, legend: { orientation: "h", y: 1.12 },
    yaxis: { title: { text: "memory per GPU (GiB)" } }, xaxis: { tickangle: -45, automargin: true },
  }, PLOT_CONFIG);
}

function renderRoofline(r) {
  $("roofline-box").hidden = false;
  $("roofline-gpu").textContent = `${r.gpu} (${r.precision}${r.peak_runs_as !== r.precision ? ` as ${r.peak_runs_as}` : ""})`;
  const xs = r.points.map((p) => p.intensity_flop_per_byte);
  const lo = Math.min(r.ridge_flop_per_byte, ...xs) / 4, hi = Math.max(r.ridge_flop_per_byte, ...xs) * 4;
  const roofX = [lo, r.ridge_flop_per_byte, hi];
  const roofY = roofX.map((x) => Math.min(r.peak_flop_per_s, x * r.memory_bandwidth_bytes_per_s) / 1e12);
  const groups = {};
  for (const p of r.points) (groups[`${p.stage}: ${p.phase}`] ||= []).push(p);
  const traces = [{ name: `roof: ${(r.peak_flop_per_s / 1e12).toFixed(0)} TFLOP/s, ${(r.memory_bandwidth_bytes_per_s / 1e12).toFixed(2)} TB/s`, x: roofX, y: roofY, type: "scatter", mode: "lines", line: { color: "#1b1f24", width: 2 }, hoverinfo: "skip" }];
  for (const [g, ps] of Object.entries(groups)) {
    traces.push({
      name: g, type: "scatter", mode: "markers", x: ps.map((p) => p.intensity_flop_per_byte), y: ps.map((p) => p.achieved_flop_per_s / 1e12),
      text: ps.map((p) => `${p.name} (${p.bound}-bound)<br>${fmt.dur(p.time_s)}`), marker: { size: ps.map((p) => 6 + 14 * Math.sqrt(p.time_s / Math.max(...r.points.map((q) => q.time_s)))) },
      hovertemplate: "%{text}<br>%{x:.1f} FLOP/byte, %{y:.1f} TFLOP/s<extra></extra>",
    });
  }
  Plotly.react($("chart-roofline"), traces, {
    margin: { t: 10, r: 20, b: 50, l: 70 }, legend: { orientation: "h", y: -0.2 },
    xaxis: { type: "log", title: { text: "arithmetic intensity (FLOP per byte)" } },
    yaxis: { type: "log", title: { text: "achieved TFLOP/s" } },
  }, PLOT_CONFIG);
}

function renderRelative(rel) {
  $("relative-box").hidden = false;
  const w = rel.workloads;
  $("relative-caption").textContent = `${w.model}: training (batch ${w.training_16bit.batch_size} × ${w.training_16bit.seq_len}), inference (${w.inference_16bit.input_len} in / ${w.inference_16bit.output_len} out, batch ${w.inference_16bit.batch_size}). ${w.note}`;
  const names = rel.rows.map((r) => r.gpu);
  const trace = (key, name) => ({ name, type: "bar", x: names, y: rel.rows.map((r) => r[key]), hovertemplate: `%{x}<br>${name}: %{y:.0f}%<extra></extra>` });
  Plotly.react($("chart-relative"), [trace("train_16bit_pct", "training 16-bit"), trace("infer_16bit_pct", "inference 16-bit"), trace("infer_8bit_pct", "inference 8-bit")], {
    barmode: "group", margin: { t: 10, r: 10, b: 150, l: 60 }, legend: { orientation: "h", y: 1.1 },
    yaxis: { title: { text: `% of ${rel.reference_gpu} (16-bit)` } }, xaxis: { tickangle: -45, automargin: true },
    shapes: [{ type: "line", xref: "paper", x0: 0, x1: 1, y0: 100, y1: 100, line: { dash: "dot", color: "#5b6470" } }],
  }, PLOT_CONFIG);
}

// --- the run ------------------------------------------------------------------------------------------
function fail(msg) {
  $("error").textContent = msg;
  $("error").hidden = false;
}

async function run() {
  const s = readForm();
  const config = $("config").value.trim();
  saveUrl(s, config);
  $("error").hidden = true;
  const id = ++runCount;
  document.body.dataset.state = "busy";
  $("status").textContent = "Planning…";
  try {
    if (!s.model && !config) throw new Error("Pick a model (a preset such as llama-3.1-8b or a hub id), or paste a config.json.");
    const w = workloadOf(s, config);
    const noGpu = { ...w };
    delete noGpu.gpu;
    const fitBody = { ...noGpu };
    delete fitBody.cluster;
    const planJob = call("/api/plan", noGpu);
    // on a cluster, the estimate and roofline are of the best layout the plan found
    let chosen = w, layout = null;
    if (w.cluster && TRAINING.has(w.task || "inference")) {
      const best = await planJob.then((p) => p.layouts[0], () => null);
      if (best) { chosen = { ...w, ...best.keys, global_batch: (await planJob).global_batch }; layout = best.layout; }
    }
    const jobs = [
      call("/api/estimate", chosen), planJob, call("/api/fit", fitBody), call("/api/roofline", chosen), relativeChart(),
    ];
    const [est, plan, fit, roof, rel] = await Promise.allSettled(jobs);
    if (est.status === "fulfilled") est.value.layout = layout;
    if (id !== runCount) return; // a newer run started
    const errors = [est, plan, fit, roof, rel].filter((r) => r.status === "rejected").map((r) => r.reason.message);
    if (est.status === "fulfilled") renderEstimate(est.value);
    if (plan.status === "fulfilled") renderPlan(plan.value);
    if (fit.status === "fulfilled") renderFit(fit.value);
    if (roof.status === "fulfilled") renderRoofline(roof.value);
    if (rel.status === "fulfilled") renderRelative(rel.value);
    if (errors.length) fail([...new Set(errors)].join(" "));
    $("status").textContent = errors.length ? "" : `Planned ${est.value.model} (${w.task || "inference"}).`;
  } catch (e) {
    fail(e.message);
    $("status").textContent = "";
  }
  document.body.dataset.state = "done";
  document.body.dataset.run = String(id);
}

let relativeCache = null;
function relativeChart() {
  relativeCache ||= call("/api/charts/relative").catch((e) => { relativeCache = null; throw e; });
  return relativeCache;
}

// model info line: parameters of the preset, hub id or pasted config
let infoTimer = null;
function modelInfo() {
  clearTimeout(infoTimer);
  infoTimer = setTimeout(async () => {
    const config = $("config").value.trim();
    const name = $("model").value.trim();
    const info = $("model-info");
    try {
      let m = null;
      if (config) m = await call("/api/model", { config: JSON.parse(config), name: name || null });
      else if (name) m = await call(`/api/models/${encodeURIComponent(name).replace(/%2F/g, "/")}`);
      if (!m) { info.textContent = ""; return; }
      const b = (x) => `${(x / 1e9).toFixed(x >= 1e10 ? 1 : 2)}B`;
      const active = m.active_params !== m.total_params ? ` (${b(m.active_params)} active)` : "";
      info.textContent = `${m.name}: ${b(m.total_params)} parameters${active}, ${m.num_layers} layers, ${m.attention_type || m.kind}`;
      info.className = "hint";
    } catch (e) {
      info.textContent = e.message;
      info.className = "hint no";
    }
  }, 250);
}

async function init() {
  const [gpus, models] = await Promise.all([call("/api/gpus"), call("/api/models")]);
  $("gpu").replaceChildren(...gpus.map((g) => el("option", { value: g.name }, g.name)));
  $("model-list").replaceChildren(...models.map((m) => el("option", { value: m.name }, `${(m.total_params / 1e9).toFixed(1)}B ${m.model_type}`)));
  const { state, config } = loadUrl();
  writeForm(state);
  $("config").value = config;
  if (config) $("config-box").open = true;
  $("task").addEventListener("change", showTaskFields);
  $("model").addEventListener("input", modelInfo);
  $("config").addEventListener("input", modelInfo);
  $("config-file").addEventListener("change", async (ev) => {
    const file = ev.target.files[0];
    if (!file) return;
    $("config").value = await file.text();
    modelInfo();
  });
  $("config-clear").addEventListener("click", () => { $("config").value = ""; $("config-file").value = ""; modelInfo(); });
  $("workload").addEventListener("submit", (ev) => { ev.preventDefault(); run(); });
  document.body.dataset.state = "ready";
  if (state.model || config) { modelInfo(); await run(); }
}

document.addEventListener("DOMContentLoaded", () => {
  if (typeof Plotly === "undefined") fail("The chart library did not load (/static/vendor/plotly-basic.min.js).");
  init().catch((e) => fail(`Could not start: ${e.message}`));
});
