// gpuplan web app, the working half: gathers the form (only the chosen task's fields), keeps it in
// the URL (one history entry per plan, so Back and Forward work), calls the JSON API (the same
// library as the CLI) and hands the answers to render.js.
"use strict";

const TRAINING = new Set(["pretrain", "finetune", "lora", "qlora"]);
const GRAPHICS = new Set(["streaming", "vdi", "render", "ai-video"]);
const DEFAULT_GPU = "H100 SXM5 80GB";
// form fields: id -> how the API wants the value (kept in the URL under the same name)
const FIELDS = {
  model: "str", task: "str", precision: "str", batch_size: "int", seq_len: "int", input_len: "int",
  output_len: "int", max_tpot_ms: "float", max_ttft_ms: "float", weight_dtype: "str", lora_rank: "int",
  framework: "str", activation_checkpointing: "str", tokens: "float",
  resolution: "str", fps: "float", streams: "int", users: "int", frames: "int", spp: "int", scene: "str",
  persona: "str", codec: "str", gpu: "str", num_gpus: "int", cluster: "str", have: "str", objective: "str",
  deadline: "str", budget: "float",
};
// the tasks that read a field (the workload keys' tasks: docs/workload.md); a field not named here
// is read by every task. Only the chosen task's fields are shown, kept in the URL and sent.
const llm = (t) => !GRAPHICS.has(t);
const USED_BY = {
  model: (t) => llm(t) || t === "ai-video", precision: llm, batch_size: llm, tokens: llm,
  seq_len: (t) => TRAINING.has(t), activation_checkpointing: (t) => TRAINING.has(t), framework: (t) => TRAINING.has(t),
  lora_rank: (t) => t === "lora" || t === "qlora",
  input_len: (t) => t === "inference", output_len: (t) => t === "inference", weight_dtype: (t) => t === "inference",
  max_tpot_ms: (t) => t === "inference", max_ttft_ms: (t) => t === "inference", // latency targets: serving only
  resolution: (t) => GRAPHICS.has(t), fps: (t) => ["streaming", "vdi", "ai-video"].includes(t),
  streams: (t) => t === "streaming" || t === "ai-video", users: (t) => t === "vdi",
  frames: (t) => t === "render", spp: (t) => t === "render", scene: (t) => t === "streaming",
  persona: (t) => t === "vdi", codec: (t) => ["streaming", "vdi", "ai-video"].includes(t),
  gpu: llm, num_gpus: llm, cluster: llm, have: llm, deadline: llm, budget: llm,
};
let runCount = 0;
let extra = {}; // keys a fix set that the form has no field for (e.g. zero, kv_dtype): kept in the URL

const taskOf = () => $("task").value || "inference";
const used = (id, task) => !USED_BY[id] || USED_BY[id](task);

// --- state: form <-> URL -------------------------------------------------------------------------
function readForm() {
  const s = {}, task = taskOf();
  for (const id of Object.keys(FIELDS)) {
    const v = $(id).value.trim();
    if (v !== "" && used(id, task)) s[id] = v;
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

function urlOf(s, config) {
  const q = new URLSearchParams(s);
  if (Object.keys(extra).length) q.set("extra", JSON.stringify(extra));
  return `${location.pathname}?${q}${config ? `#config=${encodeURIComponent(config)}` : ""}`;
}

// a new plan is a new history entry; the same plan again (or one restored by Back) is not
function saveUrl(s, config, push) {
  const url = urlOf(s, config);
  if (push && url !== location.pathname + location.search + location.hash) history.pushState(null, "", url);
  else history.replaceState(null, "", url);
}

function loadUrl() {
  const q = new URLSearchParams(location.search);
  const s = Object.fromEntries([...q].filter(([k]) => k in FIELDS));
  try { extra = JSON.parse(q.get("extra") || "{}") || {}; } catch { extra = {}; }
  const m = location.hash.match(/^#config=(.*)$/s);
  return { state: s, config: m ? decodeURIComponent(m[1]) : "" };
}

function showTaskFields() {
  const task = taskOf();
  for (const id of Object.keys(USED_BY)) $(id).closest("label").hidden = !used(id, task);
  $("model-fields").hidden = !used("model", task);
  $("hardware-fields").hidden = !llm(task);
  $("extra-line").hidden = !Object.keys(extra).length;
  $("extra-keys").textContent = Object.entries(extra).map(([k, v]) => `${k}=${v}`).join(", ");
}

// the workload JSON the API takes: the workload keys (docs/workload.md), typed, the task's own only
function workloadOf(s, config) {
  const w = {};
  for (const [k, v] of Object.entries(s)) {
    const kind = FIELDS[k];
    w[k] = kind === "int" ? Number.parseInt(v, 10) : kind === "float" ? Number(v) : v;
    if ((kind === "int" || kind === "float") && !Number.isFinite(w[k])) throw new Error(`'${k}' must be a number. Got ${JSON.stringify(v)}.`);
  }
  Object.assign(w, extra);
  if (config && used("model", w.task || "inference")) {
    try { w.config = JSON.parse(config); } catch (e) { throw new Error(`The pasted config.json is not valid JSON: ${e.message}`); }
    if (!s.model) delete w.model;
  }
  if (w.cluster) { delete w.num_gpus; delete w.gpu; delete w.have; } // the cluster sets the GPU and its count
  return w;
}

// a fix from the verdict: its exact changes, into the form (or `extra`), then plan again
function applyFix(changes) {
  for (const [k, v] of Object.entries(changes)) {
    if (k in FIELDS) {
      const node = $(k);
      if (node.tagName === "SELECT" && ![...node.options].some((o) => o.value === String(v))) node.append(el("option", { value: String(v) }, String(v)));
      node.value = String(v);
      if (k === "gpu") $("cluster").value = "";
    } else extra[k] = v;
  }
  showTaskFields();
  run();
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

// --- the run ------------------------------------------------------------------------------------------
const RESULT_BOXES = ["answer-box", "estimate-box", "plan-box", "graphics-box", "fit-box", "roofline-box", "relative-box"];

function clearResults() {
  for (const id of RESULT_BOXES) $(id).hidden = true;
  $("error").hidden = true;
}

function setBusy(on) {
  $("run").disabled = on;
  $("progress").hidden = $("busy-note").hidden = !on;
  $("results").setAttribute("aria-busy", on ? "true" : "false");
  document.body.dataset.state = on ? "busy" : "done";
}

// an error replaces whatever the previous plan showed
function fail(msg) {
  clearResults();
  $("error").textContent = msg;
  $("error").hidden = false;
  $("status").textContent = "";
}

async function planLanguageModel(s, w, id) {
  const noHave = { ...w };
  delete noHave.have;
  let fitBody = { ...noHave };
  delete fitBody.gpu;
  delete fitBody.cluster;
  delete fitBody.max_tpot_ms; // fit answers memory only and refuses a latency target (the plan and estimate read it)
  delete fitBody.max_ttft_ms;
  const planJob = call("/api/plan", w);
  // on a cluster, the estimate and roofline are of the best layout the plan found, and every GPU's
  // fit is of that layout on as many GPUs as the cluster has
  let chosen = noHave, layout = null;
  if (w.cluster && TRAINING.has(w.task || "inference")) {
    const p = await planJob.catch(() => null);
    const best = p && p.layouts[0];
    if (best) {
      chosen = { ...noHave, ...best.keys, global_batch: p.global_batch };
      fitBody = { ...fitBody, ...best.keys, global_batch: p.global_batch, num_gpus: p.cluster.num_gpus };
      layout = best.layout;
    }
  }
  const jobs = [call("/api/estimate", chosen), planJob, call("/api/fit", fitBody), call("/api/roofline", chosen), relativeChart()];
  const [est, plan, fit, roof, rel] = await Promise.allSettled(jobs);
  if (id !== runCount) return false; // a newer run started
  const errors = [est, plan, fit, roof, rel].filter((r) => r.status === "rejected").map((r) => r.reason.message);
  if (errors.length) throw new Error([...new Set(errors)].join(" "));
  clearResults();
  est.value.layout = layout;
  renderAnswer(est.value, applyFix);
  renderEstimate(est.value);
  renderPlan(plan.value);
  renderFit(fit.value, est.value.gpu);
  if (est.value.memory.fits !== false) renderRoofline(roof.value); // no operator times for a job that would not run
  renderRelative(rel.value);
  $("status").textContent = `Planned ${est.value.model} (${w.task || "inference"}).`;
  return true;
}

async function run({ push = true } = {}) {
  const s = readForm();
  const config = used("model", s.task || "inference") ? $("config").value.trim() : "";
  saveUrl(s, config, push);
  const id = ++runCount;
  setBusy(true);
  $("status").textContent = "Planning…";
  try {
    const task = s.task || "inference";
    if (used("model", task) && !s.model && !config) throw new Error("Pick a model (a preset such as llama-3.1-8b or a hub id), or paste a config.json.");
    const w = workloadOf(s, config);
    if (GRAPHICS.has(task)) {
      const plan = await call("/api/plan", w);
      if (id !== runCount) return;
      clearResults();
      renderGraphics(plan);
      $("status").textContent = `Planned a ${task} job.`;
    } else if (!(await planLanguageModel(s, w, id))) return;
    if (window.matchMedia("(max-width: 900px)").matches) $("results").scrollIntoView({ block: "start" });
  } catch (e) {
    if (id !== runCount) return;
    fail(e.message);
  }
  setBusy(false);
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

// the form as the URL has it, and its plan (Back and Forward land here)
async function restore({ push }) {
  const { state, config } = loadUrl();
  writeForm(state);
  $("config").value = config;
  if (config) $("config-box").open = true;
  if (state.model || config || GRAPHICS.has(state.task)) { modelInfo(); await run({ push }); }
  else { clearResults(); $("status").textContent = "Pick a model (or a graphics task) and press Plan."; }
}

async function init() {
  const [gpus, models] = await Promise.all([call("/api/gpu-menu"), call("/api/models")]);
  $("gpu").replaceChildren(...gpus.map((g) => el("option", { value: g.name }, g.name)));
  $("model-list").replaceChildren(...models.map((m) => el("option", { value: m.name }, `${(m.total_params / 1e9).toFixed(1)}B ${m.model_type}`)));
  $("task").addEventListener("change", () => { extra = {}; showTaskFields(); }); // a fix's keys belong to its task
  $("model").addEventListener("input", modelInfo);
  $("config").addEventListener("input", modelInfo);
  $("config-file").addEventListener("change", async (ev) => {
    const file = ev.target.files[0];
    if (!file) return;
    $("config").value = await file.text();
    modelInfo();
  });
  $("config-clear").addEventListener("click", () => { $("config").value = ""; $("config-file").value = ""; modelInfo(); });
  $("extra-clear").addEventListener("click", () => { extra = {}; showTaskFields(); });
  $("workload").addEventListener("submit", (ev) => { ev.preventDefault(); run(); });
  window.addEventListener("popstate", () => restore({ push: false }));
  document.body.dataset.state = "ready";
  await restore({ push: false });
}

document.addEventListener("DOMContentLoaded", () => {
  if (typeof Plotly === "undefined") fail("The chart library did not load (/static/vendor/plotly-basic.min.js).");
  init().catch((e) => fail(`Could not start: ${e.message}`));
});
