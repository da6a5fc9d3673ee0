// The API reference: /openapi.json rendered in the browser. Operations are
// grouped by tag (one per service, then the platform's); each has an anchor
// (#op-METHOD-path), its parameters with their bounds, the request body's
// schema and example, every answer's status, schema and example, whether it
// needs a token, and a "Copy as curl" line built from the examples. A search
// box filters the operations as one types; the token typed in is kept in
// this tab's sessionStorage only and goes into the curl lines.
// Text from the document only ever goes in through textContent.
"use strict";

const METHODS = ["get", "post", "put", "patch", "delete", "options", "head"];
const SCHEMA_DEPTH_MAX = 8;
const TOKEN_KEY = "throng.docs.token";
/** Every rendered operation: its section, its entry in the contents, and the text searched. */
const OPERATIONS = [];
/** The page's own words in its language (the operations' texts stay the document's). */
const t = (key, params) => I18n.t(key, params);
/** The document, once loaded (rendered again in another language). */
let loadedDoc = null;

function token() {
  try { return sessionStorage.getItem(TOKEN_KEY) || ""; } catch (_) { return ""; }
}

/** One shell word, quoted for a POSIX shell. */
function shellQuote(s) {
  return "'" + String(s).replace(/'/g, "'\\''") + "'";
}

/** The first example of a media type: its own, its schema's, or none. */
function exampleOf(doc, media) {
  if (!media) return undefined;
  if (media.example !== undefined) return media.example;
  if (media.examples) {
    const first = Object.values(media.examples)[0];
    if (first && first.value !== undefined) return first.value;
  }
  const s = resolve(doc, media.schema);
  if (s && s.example !== undefined) return s.example;
  if (s && Array.isArray(s.examples) && s.examples.length) return s.examples[0];
  return undefined;
}

/** A parameter's example value, or a placeholder naming it. */
function paramExample(doc, p) {
  if (p.example !== undefined) return p.example;
  const s = resolve(doc, p.schema);
  if (s.example !== undefined) return s.example;
  if (Array.isArray(s.examples) && s.examples.length) return s.examples[0];
  if (s.enum && s.enum.length) return s.enum[0];
  if (s.default !== undefined) return s.default;
  const type = Array.isArray(s.type) ? s.type.find((t) => t !== "null") : s.type;
  if (type === "integer" || type === "number") return Math.max(s.minimum ?? 1, 1);
  if (s.format === "date") return new Date().toISOString().slice(0, 10);
  return null;
}

function isSecured(doc, op) {
  const security = op.security ?? doc.security ?? [];
  return security.some((req) => Object.keys(req).length > 0);
}

/** The curl line of an operation, from its examples, with the tab's token. */
function curlLine(doc, method, path, op, params) {
  let url = path;
  const query = [];
  const headers = [];
  for (const p of params) {
    const v = paramExample(doc, p);
    // Without an example, the placeholder stays for the reader to fill in.
    if (p.in === "path") url = url.split("{" + p.name + "}").join(v === null ? "{" + p.name + "}" : encodeURIComponent(String(v)));
    else if (p.in === "query" && p.required) query.push(encodeURIComponent(p.name) + "=" + (v === null ? "{" + p.name + "}" : encodeURIComponent(String(v))));
    else if (p.in === "header" && p.required) headers.push(p.name + ": " + (v === null ? "{" + p.name + "}" : v));
  }
  const parts = ["curl"];
  if (method !== "get") parts.push("-X", method.toUpperCase());
  parts.push(shellQuote(location.origin + url + (query.length ? "?" + query.join("&") : "")));
  if (isSecured(doc, op)) parts.push("-H", shellQuote("Authorization: Bearer " + (token() || "$TOKEN")));
  for (const h of headers) parts.push("-H", shellQuote(h));
  const body = op.requestBody && resolve(doc, op.requestBody);
  if (body && body.content) {
    const [type, media] = Object.entries(body.content)[0];
    const ex = exampleOf(doc, media);
    parts.push("-H", shellQuote("Content-Type: " + type));
    if (ex !== undefined) parts.push("--data-binary", shellQuote(typeof ex === "string" ? ex : JSON.stringify(ex)));
  }
  return parts.join(" ");
}

function exampleView(doc, media, label) {
  const ex = exampleOf(doc, media);
  if (ex === undefined) return null;
  const text = typeof ex === "string" ? ex : JSON.stringify(ex, null, 2);
  return el("div", { class: "example" }, el("div", { class: "rules" }, label), el("pre", {}, el("code", {}, text)));
}

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v;
    else e.setAttribute(k, v);
  }
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    e.append(typeof c === "string" ? document.createTextNode(c) : c);
  }
  return e;
}

/** The anchor of one operation: `op-get-api-events-all`. */
function opId(method, path) {
  return "op-" + method + "-" + path.replace(/[^A-Za-z0-9_]+/g, "-").replace(/^-+|-+$/g, "");
}

function resolve(doc, schema) {
  let seen = 0;
  while (schema && schema.$ref && seen++ < 16) {
    const parts = schema.$ref.replace(/^#\//, "").split("/");
    let target = doc;
    for (const p of parts) target = target ? target[p] : undefined;
    if (!target) return { description: "(unresolved " + schema.$ref + ")" };
    schema = Object.assign({ title: parts[parts.length - 1] }, target);
  }
  return schema || {};
}

function typeName(doc, schema) {
  const s = resolve(doc, schema);
  const alt = s.oneOf || s.anyOf;
  if (alt) return alt.map((x) => typeName(doc, x)).join(" or ");
  let t = Array.isArray(s.type) ? s.type.join(" or ") : s.type;
  if (!t && s.properties) t = "object";
  if (!t && s.enum) t = "enum";
  if (t === "array" || (Array.isArray(s.type) && s.type.includes("array"))) {
    t = t.replace("array", "array of " + (s.items ? typeName(doc, s.items) : "any"));
  }
  if (s.format) t = (t || "") + " (" + s.format + ")";
  return t || "any";
}

/** The rules of one value as short phrases: bounds, lengths, enums, pattern. */
function rules(schema, doc) {
  const s = resolve(doc, schema);
  const out = [];
  const big = (n) => Math.abs(n) >= 2 ** 53 - 1;
  if (s.minimum !== undefined && s.maximum !== undefined && !big(s.maximum)) out.push(["from ", s.minimum + " to " + s.maximum]);
  else if (s.minimum !== undefined) out.push(["at least ", String(s.minimum)]);
  else if (s.maximum !== undefined && !big(s.maximum)) out.push(["at most ", String(s.maximum)]);
  if (s.exclusiveMinimum !== undefined) out.push(["above ", String(s.exclusiveMinimum)]);
  if (s.exclusiveMaximum !== undefined) out.push(["below ", String(s.exclusiveMaximum)]);
  if (s.minLength !== undefined || s.maxLength !== undefined) {
    out.push([
      "length ",
      s.minLength !== undefined && s.maxLength !== undefined
        ? s.minLength + " to " + s.maxLength
        : s.maxLength !== undefined ? "at most " + s.maxLength : "at least " + s.minLength,
    ]);
  }
  if (s.minItems !== undefined || s.maxItems !== undefined) {
    out.push(["items ", (s.minItems ?? 0) + " to " + (s.maxItems ?? "any number")]);
  }
  if (s.enum) out.push(["one of ", s.enum.map((v) => JSON.stringify(v)).join(", ")]);
  if (s.default !== undefined) out.push(["default ", JSON.stringify(s.default)]);
  if (s.pattern) out.push(["pattern ", s.pattern]);
  if (s.items) {
    const inner = rules(s.items, doc);
    if (inner) out.push(["each ", inner.textContent]);
  }
  if (!out.length) return null;
  const span = el("span", { class: "rules" });
  out.forEach(([label, value], i) => {
    if (i) span.append("; ");
    span.append(label, el("code", {}, value));
  });
  return span;
}

/** One schema as a nested list of its fields (objects), or one line. */
function schemaView(doc, schema, depth) {
  const s = resolve(doc, schema);
  const wrap = el("div", {});
  const head = el("div", {}, el("span", { class: "type" }, typeName(doc, s)));
  const r = rules(s, doc);
  if (r) head.append(" ", r);
  if (s.description) head.append(el("div", { class: "muted" }, s.description));
  wrap.append(head);
  if (depth >= SCHEMA_DEPTH_MAX) return wrap;
  const obj = s.items && !s.properties ? resolve(doc, s.items) : s;
  if (obj.properties) {
    const required = new Set(obj.required || []);
    const list = el("ul", { class: "fields" });
    for (const [name, prop] of Object.entries(obj.properties)) {
      const li = el("li", {}, el("span", { class: "name" }, name), " ");
      if (required.has(name)) li.append(el("span", { class: "req" }, t("docs.required")), " ");
      li.append(schemaView(doc, prop, depth + 1));
      list.append(li);
    }
    wrap.append(list);
    if (obj.additionalProperties === false) wrap.append(el("div", { class: "muted rules" }, t("docs.noOtherFields")));
  }
  for (const key of ["oneOf", "anyOf", "allOf"]) {
    const alts = obj[key];
    if (!alts || !alts.some((a) => resolve(doc, a).properties)) continue;
    const list = el("ul", { class: "fields" });
    alts.forEach((a, i) => list.append(el("li", {}, el("span", { class: "name" }, (key === "allOf" ? "and " : "option ") + (i + 1)), " ", schemaView(doc, a, depth + 1))));
    wrap.append(list);
  }
  return wrap;
}

function contentView(doc, content, exampleLabel) {
  const frag = document.createDocumentFragment();
  for (const [type, media] of Object.entries(content || {})) {
    frag.append(el("div", {}, el("code", {}, type)));
    if (media.schema) frag.append(schemaView(doc, media.schema, 0));
    const ex = exampleView(doc, media, exampleLabel);
    if (ex) frag.append(ex);
  }
  return frag;
}

function authView(doc, op) {
  const security = op.security ?? doc.security ?? [];
  const needed = security.filter((req) => Object.keys(req).length > 0);
  if (!needed.length) return el("p", { class: "auth" }, t("docs.noToken"));
  const schemes = [...new Set(needed.flatMap((req) => Object.keys(req)))];
  const p = el("p", { class: "auth token" }, t("docs.needsToken") + " ");
  schemes.forEach((name, i) => {
    const sc = (doc.components && doc.components.securitySchemes || {})[name] || {};
    if (i) p.append(", ");
    if (sc.scheme === "bearer") {
      p.append(el("code", {}, "Authorization: Bearer …"), sc.bearerFormat ? " (" + sc.bearerFormat + ")" : "");
    } else {
      p.append(el("code", {}, name));
    }
  });
  p.append(t("docs.without401"));
  return p;
}

function operationView(doc, method, path, op, pathParams) {
  const id = opId(method, path);
  const sec = el("section", { class: "op", id });
  sec.append(el("h3", {},
    el("span", { class: "method " + method }, method.toUpperCase()),
    el("a", { class: "path", href: "#" + id }, path)));
  if (op.summary) sec.append(el("p", {}, op.summary));
  if (op.description && op.description !== op.summary) sec.append(el("p", { class: "description" }, op.description));
  sec.append(authView(doc, op));

  const params = [...(pathParams || []), ...(op.parameters || [])].map((p) => resolve(doc, p));
  const curlPre = el("pre", { class: "curl-line" }, el("code", {}, curlLine(doc, method, path, op, params)));
  const copied = el("span", { class: "copied", role: "status" });
  const copy = el("button", { type: "button", "aria-label": t("docs.copyLabel", { op: method.toUpperCase() + " " + path }) }, t("docs.copy"));
  copy.addEventListener("click", async () => {
    const text = curlLine(doc, method, path, op, params);
    curlPre.firstChild.textContent = text;
    try {
      await navigator.clipboard.writeText(text);
      copied.textContent = t("docs.copied");
    } catch (_) {
      // No clipboard (an insecure origin, a refusal): select the line to copy by hand.
      const range = document.createRange();
      range.selectNodeContents(curlPre);
      const sel = getSelection();
      sel.removeAllRanges();
      sel.addRange(range);
      copied.textContent = t("docs.selected");
    }
  });
  sec.append(el("div", { class: "curl" }, copy, copied, curlPre));
  sec.refreshCurl = () => { curlPre.firstChild.textContent = curlLine(doc, method, path, op, params); };
  if (params.length) {
    sec.append(el("h4", {}, t("docs.parameters")));
    const list = el("ul", { class: "fields" });
    for (const p of params) {
      const li = el("li", { class: "param" },
        el("span", { class: "name" }, p.name), " ",
        el("span", { class: "type" }, "in " + p.in), " ");
      if (p.required) li.append(el("span", { class: "req" }, t("docs.required")), " ");
      if (p.schema) li.append(schemaView(doc, p.schema, 1));
      if (p.description) li.append(el("div", { class: "muted" }, p.description));
      list.append(li);
    }
    sec.append(list);
  }

  if (op.requestBody) {
    const body = resolve(doc, op.requestBody);
    sec.append(el("h4", {}, body.required ? t("docs.requestBodyRequired") : t("docs.requestBody")));
    if (body.description) sec.append(el("p", { class: "muted" }, body.description));
    sec.append(contentView(doc, body.content, t("docs.exampleRequest")));
  }

  sec.append(el("h4", {}, t("docs.responses")));
  const list = el("ul", { class: "fields responses" });
  const codes = Object.keys(op.responses || {}).sort();
  for (const code of codes) {
    const r = resolve(doc, op.responses[code]);
    const li = el("li", { class: "response", "data-status": code },
      el("span", { class: "status s" + code[0] }, code), " ", r.description || "");
    if (r.headers) {
      for (const [h, spec] of Object.entries(r.headers)) {
        li.append(el("div", { class: "rules" }, t("docs.header") + " ", el("code", {}, h), spec.description ? ": " + spec.description : ""));
      }
    }
    if (r.content) li.append(contentView(doc, r.content, t("docs.exampleAnswer")));
    list.append(li);
  }
  sec.append(list);
  return sec;
}

function render(doc, again) {
  const about = document.getElementById("about");
  const info = doc.info || {};
  about.textContent = [info.title, info.version && t("docs.version", { version: info.version })].filter(Boolean).join(", ") +
    (info.description ? ". " + info.description : "");

  const groups = new Map();
  for (const [path, item] of Object.entries(doc.paths || {})) {
    for (const method of METHODS) {
      const op = item[method];
      if (!op) continue;
      const tag = (op.tags && op.tags[0]) || "other";
      if (!groups.has(tag)) groups.set(tag, []);
      groups.get(tag).push({ method, path, op, pathParams: item.parameters });
    }
  }
  const tags = [...groups.keys()].sort((a, b) => (a === "platform") - (b === "platform") || a.localeCompare(b));

  const toc = document.getElementById("toc");
  const ops = document.getElementById("ops");
  const tocList = el("ul", {});
  for (const tag of tags) {
    const entries = groups.get(tag).sort((a, b) => a.path.localeCompare(b.path) || METHODS.indexOf(a.method) - METHODS.indexOf(b.method));
    const sub = el("ul", {});
    const section = el("section", { id: "tag-" + tag.replace(/[^A-Za-z0-9_]+/g, "-") },
      el("h2", {}, tag));
    for (const e of entries) {
      const item = el("li", {}, el("a", { href: "#" + opId(e.method, e.path) }, e.method.toUpperCase() + " " + e.path));
      sub.append(item);
      const view = operationView(doc, e.method, e.path, e.op, e.pathParams);
      section.append(view);
      OPERATIONS.push({
        view, item, section,
        text: [e.method, e.path, tag, e.op.summary || "", e.op.description || "", e.op.operationId || ""].join(" ").toLowerCase(),
      });
    }
    tocList.append(el("li", {}, el("a", { href: "#" + section.id }, tag), " (" + entries.length + ")", sub));
    ops.append(section);
  }
  toc.append(el("h2", {}, t("docs.operations")), tocList);
  if (again) {
    filter(document.getElementById("filter").value);
    return;
  }
  setUpSearch();
  setUpToken();
  const state = document.getElementById("state");
  state.textContent = "";
  state.hidden = true;
  if (location.hash) {
    const target = document.getElementById(decodeURIComponent(location.hash.slice(1)));
    if (target) target.scrollIntoView();
  }
}

/** Shows the operations whose method, path, tag, summary or description hold every word typed. */
function filter(query) {
  const words = query.toLowerCase().split(/\s+/).filter(Boolean);
  let shown = 0;
  for (const o of OPERATIONS) {
    const match = words.every((w) => o.text.includes(w));
    o.view.hidden = !match;
    o.item.hidden = !match;
    if (match) shown++;
  }
  for (const section of new Set(OPERATIONS.map((o) => o.section))) {
    section.hidden = !OPERATIONS.some((o) => o.section === section && !o.view.hidden);
  }
  for (const li of document.querySelectorAll("#toc > ul > li")) {
    li.hidden = ![...li.querySelectorAll("li")].some((x) => !x.hidden);
  }
  document.getElementById("filter-count").textContent = words.length
    ? t("docs.match", { count: OPERATIONS.length, shown })
    : t("docs.count", { count: OPERATIONS.length });
}

function setUpSearch() {
  const input = document.getElementById("filter");
  input.disabled = false;
  input.addEventListener("input", () => filter(input.value));
  filter(input.value);
}

function setUpToken() {
  const input = document.getElementById("token");
  input.value = token();
  input.addEventListener("input", () => {
    try {
      if (input.value.trim()) sessionStorage.setItem(TOKEN_KEY, input.value.trim());
      else sessionStorage.removeItem(TOKEN_KEY);
    } catch (_) { /* storage refused: the curl lines show $TOKEN */ }
    for (const o of OPERATIONS) o.view.refreshCurl();
  });
}

async function load() {
  const state = document.getElementById("state");
  try {
    loadedDoc = await Throng.client().getJson("/openapi.json", { headers: { Accept: "application/json" } });
    render(loadedDoc);
    document.body.dataset.ready = "1";
  } catch (e) {
    state.setAttribute("role", "alert");
    state.removeAttribute("data-i18n");
    // The server's answer says what to do; anything else is this page's fault or the network's.
    state.textContent = t("docs.failed") + " " +
      (e instanceof Throng.ApiError ? e.message : t("docs.failedReload", { reason: e.message }));
  }
}

I18n.ready.then(load);
// Another language: the page's own words written again (the search, the
// token and the place on the page kept).
I18n.onChange(() => {
  if (!loadedDoc) return;
  OPERATIONS.length = 0;
  document.getElementById("toc").replaceChildren();
  document.getElementById("ops").replaceChildren();
  render(loadedDoc, true);
});
