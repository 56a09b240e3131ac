// docingest web page: pick an index, upload files and follow their jobs, list and delete
// documents, see and run sources, search. No framework and no build step. Server text only ever reaches the page
// through textContent (never innerHTML), so a document cannot inject markup.

const KEY_STORAGE = "docingest.apiKey";
const INDEX_STORAGE = "docingest.index";
const SEEDED_INDEX = "examples";
const POLL_FIRST_MS = 300;
const POLL_MAX_MS = 1500;
const POLL_PER_JOB_MS = 200;
const PARALLEL_UPLOADS = 3;
const FINAL_STATES = new Set(["completed", "failed", "cancelled"]);
const STAGE_LABELS = {
  detecting: "detecting the format",
  extracting: "extracting text",
  chunking: "cutting into chunks",
  embedding: "embedding",
  storing: "storing",
};
const $ = (selector) => document.querySelector(selector);

class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

// ---------- small DOM helpers ----------

/** Create an element with properties (className, textContent, hidden...) and children. */
function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(props)) {
    if (name === "dataset") Object.assign(node.dataset, value);
    else if (name.startsWith("aria-") || name === "role") node.setAttribute(name, value);
    else node[name] = value;
  }
  for (const child of children) {
    if (child !== null && child !== undefined) {
      node.append(child instanceof Node ? child : String(child));
    }
  }
  return node;
}

function showMessage(text, { kind = "error" } = {}) {
  const box = $("#message");
  box.textContent = text;
  box.dataset.kind = kind;
  box.hidden = !text;
}

function describeError(error) {
  if (error instanceof ApiError) return `${error.message} (${error.code})`;
  return String(error && error.message ? error.message : error);
}

function formatTime(iso) {
  if (!iso) return "—";
  const date = new Date(iso);
  return Number.isNaN(date.getTime()) ? iso : date.toLocaleString();
}

/** "1 chunk", "18 chunks". */
function plural(count, noun) {
  return `${count} ${noun}${count === 1 ? "" : "s"}`;
}

function countOrDash(value) {
  return value === null || value === undefined ? "—" : String(value);
}

// ---------- the API ----------

function apiKey() {
  return sessionStorage.getItem(KEY_STORAGE) || "";
}

function authHeaders() {
  const key = apiKey();
  return key ? { Authorization: `Bearer ${key}` } : {};
}

function errorFrom(status, body, fallback) {
  const error = body && typeof body === "object" ? body.error : null;
  if (error && error.code) return new ApiError(status, error.code, error.message || fallback);
  return new ApiError(status, `http_${status}`, fallback || `The server answered ${status}.`);
}

/** Call the API (paths relative to the page, so a reverse-proxy prefix keeps working). */
async function api(path, { method = "GET", json } = {}) {
  const headers = authHeaders();
  const init = { method, headers };
  if (json !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(json);
  }
  let response;
  try {
    response = await fetch(path, init);
  } catch (error) {
    throw new ApiError(0, "network_error", "The server did not answer; is it running?");
  }
  if (response.status === 204) return null;
  let body = null;
  try {
    body = await response.json();
  } catch (error) {
    body = null;
  }
  if (!response.ok) throw errorFrom(response.status, body, response.statusText);
  return body;
}

const indexPath = (index) => `v1/indexes/${encodeURIComponent(index)}`;

/** Report an API failure: a missing or wrong key points at the key field. */
function reportError(error, what) {
  if (error instanceof ApiError && error.status === 401) {
    showMessage(`${error.message} Enter it in the API key field above.`);
    $("#api-key").focus();
    return;
  }
  showMessage(`${what}: ${describeError(error)}`);
}

// ---------- indexes ----------

const state = { index: "", documents: [], indexes: new Map() };

function setIndexEnabled(enabled) {
  for (const panel of document.querySelectorAll(".needs-index")) {
    panel.classList.toggle("disabled", !enabled);
    for (const control of panel.querySelectorAll("input, select, button")) {
      control.disabled = !enabled;
    }
  }
}

async function loadIndexes({ select } = {}) {
  const picker = $("#index-select");
  let indexes;
  try {
    indexes = (await api("v1/indexes")).indexes;
  } catch (error) {
    picker.replaceChildren(el("option", { value: "", textContent: "—" }));
    picker.disabled = true;
    state.indexes = new Map();
    await chooseIndex("");
    reportError(error, "Could not list the indexes");
    return;
  }
  showMessage("");
  const wanted = select || state.index || sessionStorage.getItem(INDEX_STORAGE) || "";
  const names = indexes.map((info) => info.name);
  picker.replaceChildren(
    ...(names.length ? [] : [el("option", { value: "", textContent: "no index yet: create one" })]),
    ...indexes.map((info) => el("option", { value: info.name, textContent: info.name })),
  );
  picker.disabled = names.length === 0;
  // Without a choice of the user's, the seeded examples (what `make run` fills) come first.
  const fallback = names.includes(SEEDED_INDEX) ? SEEDED_INDEX : names[0] || "";
  const chosen = names.includes(wanted) ? wanted : fallback;
  picker.value = chosen;
  state.indexes = new Map(indexes.map((info) => [info.name, info]));
  await chooseIndex(chosen);
}

async function chooseIndex(name) {
  const changed = name !== state.index;
  state.index = name;
  if (name) sessionStorage.setItem(INDEX_STORAGE, name);
  setIndexEnabled(Boolean(name));
  showIndexInfo();
  if (changed) {
    $("#results").replaceChildren();
    $("#search-summary").textContent = "";
  }
  await loadDocuments();
  await loadSources();
}

function showIndexInfo() {
  const info = state.indexes.get(state.index);
  $("#index-info").textContent = info
    ? `${plural(info.documents, "document")}, ${plural(info.chunks, "chunk")} · ` +
      `${info.embedding.provider} model ${info.embedding.model} · ` +
      `chunks of ${info.chunking.chunk_size} ${info.chunking.unit}`
    : "";
}

async function refreshIndexInfo() {
  if (!state.index) return;
  try {
    const info = await api(indexPath(state.index));
    state.indexes.set(info.name, info);
    showIndexInfo();
  } catch (error) {
    // the list shows the failure; the summary line can wait for the next refresh
  }
}

async function createIndex(event) {
  event.preventDefault();
  const input = $("#new-index");
  const name = input.value.trim();
  if (!input.checkValidity()) {
    input.reportValidity();
    return;
  }
  try {
    await api(indexPath(name), { method: "PUT", json: {} });
  } catch (error) {
    reportError(error, `Could not create index '${name}'`);
    return;
  }
  input.value = "";
  await loadIndexes({ select: name });
}

// ---------- documents ----------

async function loadDocuments() {
  const table = $("#documents");
  const empty = $("#documents-empty");
  if (!state.index) {
    state.documents = [];
    table.hidden = true;
    empty.hidden = true;
    fillDocumentFilter();
    return;
  }
  const index = state.index;
  let documents;
  try {
    documents = (await api(`${indexPath(index)}/documents`)).documents;
  } catch (error) {
    reportError(error, "Could not list the documents");
    return;
  }
  if (index !== state.index) return; // another index was picked meanwhile
  documents.sort((a, b) => a.document_id.localeCompare(b.document_id));
  state.documents = documents;
  table.tBodies[0].replaceChildren(...documents.map(documentRow));
  table.hidden = documents.length === 0;
  empty.hidden = documents.length !== 0;
  fillDocumentFilter();
}

function documentRow(doc) {
  const name = el("span", { className: "doc-name", textContent: doc.filename || doc.document_id });
  const cell = el("td", { dataset: { label: "Document" } }, name);
  if (doc.filename && doc.filename !== doc.document_id) {
    cell.append(el("span", { className: "doc-id", textContent: `id: ${doc.document_id}` }));
  }
  const byline = [doc.title, doc.author && `by ${doc.author}`].filter(Boolean).join(" ");
  if (byline) cell.append(el("span", { className: "doc-title", textContent: byline }));
  const tags = Object.entries(doc.metadata || {}).map(([key, value]) =>
    el("span", {
      className: "tag",
      textContent: `${key}: ${Array.isArray(value) ? value.join(", ") : value}`,
    }),
  );
  if (tags.length) cell.append(el("span", { className: "tags" }, ...tags));
  const remove = el("button", {
    type: "button",
    className: "danger",
    textContent: "Delete",
    "aria-label": `Delete ${doc.document_id}`,
  });
  remove.addEventListener("click", () => deleteDocument(doc.document_id, remove));
  const ingested = el("time", { dateTime: doc.ingested_at || "", textContent: formatTime(doc.ingested_at) });
  return el(
    "tr",
    { dataset: { documentId: doc.document_id } },
    cell,
    el("td", { dataset: { label: "Format" }, textContent: countOrDash(doc.format) }),
    el("td", { dataset: { label: "Pages" }, className: "num", textContent: countOrDash(doc.pages) }),
    el("td", { dataset: { label: "Chunks" }, className: "num", textContent: String(doc.chunks) }),
    el("td", { dataset: { label: "Version" }, className: "num", textContent: String(doc.version) }),
    el("td", { dataset: { label: "Ingested" } }, ingested),
    el("td", { className: "actions" }, remove),
  );
}

function fillDocumentFilter() {
  const picker = $("#filter-document");
  const current = picker.value;
  picker.replaceChildren(
    el("option", { value: "", textContent: "any document" }),
    ...state.documents.map((doc) =>
      el("option", { value: doc.document_id, textContent: doc.filename || doc.document_id }),
    ),
  );
  picker.value = state.documents.some((doc) => doc.document_id === current) ? current : "";
}

async function deleteDocument(documentId, button) {
  if (!window.confirm(`Delete '${documentId}' and all its chunks from '${state.index}'?`)) return;
  button.disabled = true;
  try {
    await api(`${indexPath(state.index)}/documents/${encodeURIComponent(documentId)}`, {
      method: "DELETE",
    });
  } catch (error) {
    button.disabled = false;
    reportError(error, `Could not delete '${documentId}'`);
    return;
  }
  showMessage("");
  await loadDocuments();
  await refreshIndexInfo();
}

let documentsRefresh = null;

/** Reload the document list once after a burst of finished jobs. */
function scheduleDocumentsRefresh() {
  clearTimeout(documentsRefresh);
  documentsRefresh = setTimeout(async () => {
    await loadDocuments();
    await refreshIndexInfo();
  }, 250);
}

// ---------- uploads ----------

function splitList(text) {
  return text
    .split(",")
    .map((part) => part.trim())
    .filter(Boolean);
}

function uploadMetadata() {
  const metadata = {};
  const department = $("#meta-department").value.trim();
  const author = $("#meta-author").value.trim();
  const docType = $("#meta-doc-type").value.trim();
  const tags = splitList($("#meta-tags").value);
  if (department) metadata.department = department;
  if (author) metadata.author = author;
  if (docType) metadata.doc_type = docType;
  if (tags.length) metadata.tags = tags;
  return metadata;
}

let uploadCount = 0;

/** One row of the upload list: name, progress bar, status line, and a cancel button. */
class UploadRow {
  constructor(file, index) {
    this.file = file;
    this.index = index;
    this.jobId = null;
    uploadCount += 1;
    const statusId = `upload-status-${uploadCount}`;
    this.bar = el("progress", {
      max: 1,
      "aria-label": `Progress of ${file.name}`,
      "aria-describedby": statusId,
    });
    this.status = el("span", {
      id: statusId,
      className: "upload-status",
      textContent: "waiting to upload",
    });
    this.cancel = el("button", {
      type: "button",
      className: "secondary small",
      textContent: "Cancel",
      hidden: true,
      "aria-label": `Cancel ${file.name}`,
    });
    this.cancel.addEventListener("click", () => this.cancelJob());
    this.node = el(
      "li",
      { className: "upload", dataset: { state: "waiting", filename: file.name } },
      el(
        "div",
        { className: "upload-head" },
        el("span", { className: "upload-name", textContent: file.name }),
        el("span", { className: "upload-index", textContent: `→ ${index}` }),
        this.cancel,
      ),
      this.bar,
      this.status,
    );
  }

  set(stateName, text) {
    this.node.dataset.state = stateName;
    this.status.textContent = text;
  }

  showUpload(fraction) {
    this.bar.value = fraction;
    this.set("uploading", `uploading ${Math.round(fraction * 100)}%`);
  }

  showJob(job) {
    this.bar.value = job.progress;
    if (job.status === "queued") {
      this.set("queued", "queued, waiting for a worker");
    } else if (job.status === "processing") {
      this.set("processing", processingText(job));
    } else if (job.status === "completed") {
      this.showResult(job.result);
    } else if (job.status === "failed") {
      const error = job.error || { code: "failed", message: "The job failed." };
      this.fail(error.code, error.message);
    } else if (job.status === "cancelled") {
      this.set("cancelled", "cancelled");
    }
    this.cancel.hidden = FINAL_STATES.has(job.status);
    if (FINAL_STATES.has(job.status)) this.node.classList.add("final");
  }

  showResult(result) {
    this.bar.value = 1;
    const parts = [result.unchanged ? "unchanged" : "done"];
    if (result.pages !== null && result.pages !== undefined) parts.push(plural(result.pages, "page"));
    parts.push(plural(result.chunks, "chunk"));
    if (!result.unchanged && result.chunks_reused) parts.push(`${result.chunks_reused} reused`);
    parts.push(`version ${result.version}`);
    // A name that promised another format (a text file named .pdf) is said, never silent.
    if (result.format_note) parts.push(result.format_note);
    this.set("completed", parts.join(" · "));
    this.node.dataset.unchanged = String(Boolean(result.unchanged));
    announce(`${this.file.name}: ${result.unchanged ? "unchanged" : "done"}.`);
  }

  fail(code, message) {
    this.bar.value = this.bar.value || 0;
    this.node.dataset.errorCode = code;
    this.status.replaceChildren(
      el("span", { className: "error-code", textContent: code }),
      el("span", { className: "error-message", textContent: ` ${message}` }),
    );
    this.node.dataset.state = "failed";
    this.node.classList.add("final");
    this.cancel.hidden = true;
    announce(`${this.file.name} failed: ${message}`);
  }

  async cancelJob() {
    if (!this.jobId) return;
    this.cancel.disabled = true;
    try {
      this.showJob(await api(`v1/jobs/${encodeURIComponent(this.jobId)}`, { method: "DELETE" }));
    } catch (error) {
      this.cancel.disabled = false;
      reportError(error, `Could not cancel ${this.file.name}`);
    }
  }
}

/**
 * What a processing job is doing, with its counts: pages read (and chunks already embedded,
 * as the stages overlap), chunks embedded while embedding (`chunks_done` counts only the
 * stored ones and sat at 0 until a window was written), chunks stored while storing.
 */
function processingText(job) {
  const stage = STAGE_LABELS[job.stage] || "processing";
  const total = job.chunks_total ?? "?";
  const embedded = job.chunks_embedded || 0;
  if (job.stage === "extracting" && job.pages_total) {
    const pages = `${stage}: page ${job.pages_done} of ${job.pages_total}`;
    return embedded ? `${pages}, ${embedded} chunks embedded` : pages;
  }
  if (job.stage === "embedding") return `${stage}: ${embedded} of ${total} chunks`;
  if (job.stage === "storing") return `${stage}: ${job.chunks_done} of ${total} chunks`;
  return `${stage}…`;
}

function announce(text) {
  $("#upload-announcer").textContent = text;
}

/** POST the file as multipart with XMLHttpRequest, which reports upload progress. */
function sendFile(row, metadata, force) {
  return new Promise((resolve, reject) => {
    const request = new XMLHttpRequest();
    request.open("POST", `${indexPath(row.index)}/documents`);
    for (const [name, value] of Object.entries(authHeaders())) request.setRequestHeader(name, value);
    request.responseType = "json";
    request.upload.addEventListener("progress", (event) => {
      if (event.lengthComputable) row.showUpload(event.loaded / event.total);
    });
    request.addEventListener("load", () => {
      if (request.status === 202) resolve(request.response);
      else reject(errorFrom(request.status, request.response, request.statusText));
    });
    request.addEventListener("error", () =>
      reject(
        new ApiError(0, "upload_failed", "The upload was cut off (too large, or the server went away)."),
      ),
    );
    const form = new FormData();
    form.append("file", row.file, row.file.name);
    // Browsers write '"' in a multipart file name as %22; the plain field keeps the real name.
    form.append("document_id", row.file.name);
    if (Object.keys(metadata).length) form.append("metadata", JSON.stringify(metadata));
    if (force) form.append("force", "true");
    request.send(form);
  });
}

async function pollJob(row) {
  let delay = POLL_FIRST_MS;
  let failures = 0;
  for (;;) {
    await new Promise((resolve) => setTimeout(resolve, delay));
    let job;
    try {
      job = await api(`v1/jobs/${encodeURIComponent(row.jobId)}`);
      failures = 0;
    } catch (error) {
      if (error instanceof ApiError && error.status >= 400 && error.status < 500) {
        row.fail(error.code, error.message);
        return;
      }
      failures += 1;
      row.status.textContent = `lost touch with the server, retrying (${failures})…`;
      delay = Math.min(delay * 2, 10000);
      continue;
    }
    row.showJob(job);
    if (FINAL_STATES.has(job.status)) return;
    // Many jobs at once poll less often each, so the server sees a few requests a second.
    delay = Math.min(delay * 1.5, Math.max(POLL_MAX_MS, activeJobs * POLL_PER_JOB_MS));
  }
}

/** Send one file; once the server has accepted it, follow its job without waiting. */
async function runUpload(row, metadata, force) {
  row.showUpload(0);
  let accepted;
  try {
    accepted = await sendFile(row, metadata, force);
  } catch (error) {
    row.fail(error.code || "upload_failed", error.message);
    if (error.status === 401) reportError(error, "Upload refused");
    return;
  }
  row.jobId = accepted.job_id;
  row.node.dataset.jobId = accepted.job_id;
  row.bar.value = 0;
  row.cancel.hidden = false;
  row.set("queued", "queued");
  followJob(row);
  if (!state.indexes.has(row.index)) await loadIndexes({ select: state.index });
}

let activeJobs = 0;

async function followJob(row) {
  activeJobs += 1;
  try {
    await pollJob(row);
  } finally {
    activeJobs -= 1;
  }
  if (row.index === state.index) scheduleDocumentsRefresh();
}

/** Upload files a few at a time (their jobs then run on the server), one row each. */
function uploadFiles(fileList) {
  const files = Array.from(fileList);
  if (!files.length || !state.index) return;
  const metadata = uploadMetadata();
  const force = $("#meta-force").checked;
  const rows = files.map((file) => new UploadRow(file, state.index));
  $("#uploads").prepend(...rows.map((row) => row.node));
  const queue = rows.slice();
  const worker = async () => {
    while (queue.length) await runUpload(queue.shift(), metadata, force);
  };
  for (let i = 0; i < Math.min(PARALLEL_UPLOADS, rows.length); i += 1) worker();
}

function setUpDropZone() {
  const zone = $("#drop-zone");
  const input = $("#file-input");
  input.addEventListener("change", () => {
    uploadFiles(input.files);
    input.value = "";
  });
  for (const name of ["dragenter", "dragover"]) {
    zone.addEventListener(name, (event) => {
      event.preventDefault();
      if (state.index) zone.classList.add("dragging");
    });
  }
  for (const name of ["dragleave", "dragend"]) {
    zone.addEventListener(name, () => zone.classList.remove("dragging"));
  }
  zone.addEventListener("drop", (event) => {
    event.preventDefault();
    zone.classList.remove("dragging");
    if (event.dataTransfer) uploadFiles(event.dataTransfer.files);
  });
  // A file dropped beside the zone must not make the browser leave the page to open it.
  window.addEventListener("dragover", (event) => event.preventDefault());
  window.addEventListener("drop", (event) => event.preventDefault());
}

// ---------- search ----------

function searchBody() {
  const body = {
    query: $("#search-query").value,
    mode: $("#search-mode").value,
    top_k: Number($("#search-top-k").value),
  };
  const cap = $("#search-cap").value;
  if (cap) body.max_chunks_per_document = Number(cap);
  const filter = {};
  const documentId = $("#filter-document").value;
  const department = $("#filter-department").value.trim();
  const author = $("#filter-author").value.trim();
  const docType = $("#filter-doc-type").value.trim();
  const tags = splitList($("#filter-tags").value);
  if (documentId) filter.document_id = documentId;
  if (department) filter.department = department;
  if (author) filter.author = author;
  if (docType) filter.doc_type = docType;
  if (tags.length) filter.tags = tags;
  if (Object.keys(filter).length) body.filter = filter;
  return body;
}

async function runSearch(event) {
  event.preventDefault();
  const form = $("#search-form");
  if (!form.reportValidity() || !state.index) return;
  const body = searchBody();
  const summary = $("#search-summary");
  const list = $("#results");
  summary.textContent = "Searching…";
  let response;
  try {
    response = await api(`${indexPath(state.index)}/search`, { method: "POST", json: body });
  } catch (error) {
    summary.textContent = "";
    reportError(error, "Search failed");
    return;
  }
  showMessage("");
  list.replaceChildren(...response.results.map((result) => resultItem(result)));
  const count = response.results.length;
  summary.textContent = count
    ? `${count} passage${count === 1 ? "" : "s"} in ${Math.round(response.took_ms)} ms (${body.mode}).`
    : "No passage matched.";
}

function pagesText(result) {
  if (result.page_start === null || result.page_start === undefined) return null;
  if (result.page_end === null || result.page_end === result.page_start) {
    return `page ${result.page_start}`;
  }
  return `pages ${result.page_start}–${result.page_end}`;
}

function scoreText(result) {
  const parts = [];
  if (result.scores && result.scores.vector !== null && result.scores.vector !== undefined) {
    parts.push(`vector ${result.scores.vector.toFixed(3)}`);
  }
  if (result.scores && result.scores.keyword !== null && result.scores.keyword !== undefined) {
    parts.push(`keyword ${result.scores.keyword.toFixed(3)}`);
  }
  return parts.join(", ");
}

function resultItem(result) {
  const where = [pagesText(result), result.format].filter(Boolean).join(" · ");
  const head = el(
    "div",
    { className: "result-head" },
    el("span", { className: "visually-hidden", textContent: "Score" }),
    el("span", {
      className: "score",
      textContent: result.score.toFixed(4),
      title: scoreText(result) || "score",
    }),
    el("span", { className: "result-doc", textContent: result.filename || result.document_id }),
    where ? el("span", { className: "result-where", textContent: where }) : null,
  );
  const item = el(
    "li",
    { className: "result", dataset: { documentId: result.document_id, chunk: String(result.chunk_index) } },
    head,
  );
  if (result.headings && result.headings.length) {
    item.append(el("p", { className: "headings", textContent: result.headings.join(" › ") }));
  }
  item.append(...passage(result));
  const detail = scoreText(result);
  if (detail) item.append(el("p", { className: "hint scores", textContent: detail }));
  return item;
}

// ---------- excerpt and highlights ----------
// The server reads the query's terms with its keyword analyzer and returns where they stand
// in each result (`highlights`) and the sentences that answer it (`excerpt`): the page marks
// exactly what search matched (stems, identifiers, CJK) and guesses at nothing.

/** The excerpt, its highlights marked, and the whole passage behind a disclosure. Offsets
 * count code points (as Python does), not JavaScript's UTF-16 units: an emoji before a term
 * would shift every later mark, so the text is sliced as an array of code points. */
function passage(result) {
  const text = Array.from(result.text);
  const spans = result.highlights || [];
  const excerpt = result.excerpt || { start: 0, end: text.length };
  const shown = el("p", { className: "passage" }, marked(text, spans, excerpt.start, excerpt.end));
  shown.classList.toggle("cut-start", excerpt.start > 0);
  shown.classList.toggle("cut-end", excerpt.end < text.length);
  if (excerpt.start === 0 && excerpt.end === text.length) return [shown];
  const whole = el(
    "details",
    { className: "whole" },
    el("summary", { textContent: "Whole passage" }),
    el("p", { className: "chunk-text" }, marked(text, spans, 0, text.length)),
  );
  return [shown, whole];
}

/** `text` (code points) from `start` to `end` as text nodes, each highlight in a <mark>. */
function marked(text, spans, start, end) {
  const slice = (from, to) => text.slice(from, to).join("");
  const fragment = document.createDocumentFragment();
  let last = start;
  for (const [lo, hi] of spans) {
    const from = Math.max(lo, start);
    const to = Math.min(hi, end);
    if (to <= from || from < last) continue;
    if (from > last) fragment.append(document.createTextNode(slice(last, from)));
    fragment.append(el("mark", { textContent: slice(from, to) }));
    last = to;
  }
  if (last < end) fragment.append(document.createTextNode(slice(last, end)));
  return fragment;
}

// ---------- API key ----------

function setUpKeyForm() {
  const input = $("#api-key");
  input.value = apiKey();
  $("#key-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const key = input.value.trim();
    if (key) sessionStorage.setItem(KEY_STORAGE, key);
    else sessionStorage.removeItem(KEY_STORAGE);
    await loadIndexes();
  });
  $("#key-forget").addEventListener("click", async () => {
    sessionStorage.removeItem(KEY_STORAGE);
    input.value = "";
    await loadIndexes();
  });
}

// ---------- sources ----------

async function loadSources() {
  const table = $("#sources");
  const empty = $("#sources-empty");
  if (!state.index) {
    table.hidden = true;
    empty.hidden = true;
    return;
  }
  const index = state.index;
  let sources;
  try {
    sources = (await api(`${indexPath(index)}/sources`)).sources;
  } catch (error) {
    reportError(error, "Could not list the sources");
    return;
  }
  if (index !== state.index) return;
  table.tBodies[0].replaceChildren(...sources.map(sourceRow));
  table.hidden = sources.length === 0;
  empty.hidden = sources.length !== 0;
}

function runText(run) {
  if (!run) return "never run";
  const c = run.counts;
  const outcome = run.error ? `${run.status} (${run.error.code})` : run.status;
  return (
    `${outcome}: ${c.listed} listed, ${c.new} new, ${c.changed} changed, ` +
    `${c.unchanged} unchanged, ${c.deleted} deleted, ${c.failed} failed`
  );
}

function sourceRow(source) {
  const sync = el("button", {
    type: "button",
    className: "secondary",
    textContent: "Sync now",
    "aria-label": `Sync ${source.name} now`,
  });
  sync.addEventListener("click", () => syncSource(source.name, sync));
  return el(
    "tr",
    { dataset: { source: source.name } },
    el("td", { dataset: { label: "Source" }, textContent: `${source.name} (${source.type})` }),
    el("td", {
      dataset: { label: "Schedule" },
      textContent: source.schedule ? `every ${source.schedule.every}` : "on request",
    }),
    el("td", { dataset: { label: "Last run" }, className: "run", textContent: runText(source.last_run) }),
    el("td", { dataset: { label: "Next run" }, textContent: formatTime(source.next_run_at) || "-" }),
    el("td", { className: "actions" }, sync),
  );
}

async function syncSource(name, button) {
  button.disabled = true;
  try {
    await api(`${indexPath(state.index)}/sources/${encodeURIComponent(name)}/sync`, {
      method: "POST",
    });
    showMessage(`A run of '${name}' is queued.`, { kind: "info" });
  } catch (error) {
    reportError(error, `Could not sync '${name}'`);
  } finally {
    button.disabled = false;
  }
  await loadSources();
}

// ---------- start ----------

function start() {
  setUpKeyForm();
  setUpDropZone();
  setIndexEnabled(false);
  $("#index-select").addEventListener("change", (event) => chooseIndex(event.target.value));
  $("#create-index-form").addEventListener("submit", createIndex);
  $("#documents-refresh").addEventListener("click", async () => {
    await loadDocuments();
    await refreshIndexInfo();
  });
  $("#sources-refresh").addEventListener("click", loadSources);
  $("#search-form").addEventListener("submit", runSearch);
  $("#uploads-clear").addEventListener("click", () => {
    for (const row of document.querySelectorAll("#uploads .upload.final")) row.remove();
  });
  document.documentElement.dataset.ready = "true";
  loadIndexes();
}

start();
