// The API reference: /openapi.json rendered in the browser. Operations are
// grouped by tag (one per service, then the platform's); each has an anchor
// (#op-METHOD-path), its parameters with their bounds, the request body's
// schema, every answer's status and schema, and whether it needs a token.
// Text from the document only ever goes in through textContent.
"use strict";

const METHODS = ["get", "post", "put", "patch", "delete", "options", "head"];
const SCHEMA_DEPTH_MAX = 8;

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
      if (required.has(name)) li.append(el("span", { class: "req" }, "required"), " ");
      li.append(schemaView(doc, prop, depth + 1));
      list.append(li);
    }
    wrap.append(list);
    if (obj.additionalProperties === false) wrap.append(el("div", { class: "muted rules" }, "No other fields."));
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

function contentView(doc, content) {
  const frag = document.createDocumentFragment();
  for (const [type, media] of Object.entries(content || {})) {
    frag.append(el("div", {}, el("code", {}, type)));
    if (media.schema) frag.append(schemaView(doc, media.schema, 0));
  }
  return frag;
}

function authView(doc, op) {
  const security = op.security ?? doc.security ?? [];
  const needed = security.filter((req) => Object.keys(req).length > 0);
  if (!needed.length) return el("p", { class: "auth" }, "No token needed.");
  const schemes = [...new Set(needed.flatMap((req) => Object.keys(req)))];
  const p = el("p", { class: "auth token" }, "Needs a token: ");
  schemes.forEach((name, i) => {
    const sc = (doc.components && doc.components.securitySchemes || {})[name] || {};
    if (i) p.append(", ");
    if (sc.scheme === "bearer") {
      p.append(el("code", {}, "Authorization: Bearer …"), sc.bearerFormat ? " (" + sc.bearerFormat + ")" : "");
    } else {
      p.append(el("code", {}, name));
    }
  });
  p.append(". Without it: 401.");
  return p;
}

function operationView(doc, method, path, op, pathParams) {
  const id = opId(method, path);
  const sec = el("section", { class: "op", id });
  sec.append(el("h3", {},
    el("span", { class: "method " + method }, method.toUpperCase()),
    el("a", { class: "path", href: "#" + id }, path)));
  if (op.summary) sec.append(el("p", {}, op.summary));
  if (op.description && op.description !== op.summary) sec.append(el("p", { class: "muted" }, op.description));
  sec.append(authView(doc, op));

  const params = [...(pathParams || []), ...(op.parameters || [])].map((p) => resolve(doc, p));
  if (params.length) {
    sec.append(el("h4", {}, "Parameters"));
    const list = el("ul", { class: "fields" });
    for (const p of params) {
      const li = el("li", { class: "param" },
        el("span", { class: "name" }, p.name), " ",
        el("span", { class: "type" }, "in " + p.in), " ");
      if (p.required) li.append(el("span", { class: "req" }, "required"), " ");
      if (p.schema) li.append(schemaView(doc, p.schema, 1));
      if (p.description) li.append(el("div", { class: "muted" }, p.description));
      list.append(li);
    }
    sec.append(list);
  }

  if (op.requestBody) {
    const body = resolve(doc, op.requestBody);
    sec.append(el("h4", {}, "Request body" + (body.required ? " (required)" : "")));
    if (body.description) sec.append(el("p", { class: "muted" }, body.description));
    sec.append(contentView(doc, body.content));
  }

  sec.append(el("h4", {}, "Responses"));
  const list = el("ul", { class: "fields responses" });
  const codes = Object.keys(op.responses || {}).sort();
  for (const code of codes) {
    const r = resolve(doc, op.responses[code]);
    const li = el("li", { class: "response", "data-status": code },
      el("span", { class: "status s" + code[0] }, code), " ", r.description || "");
    if (r.headers) {
      for (const [h, spec] of Object.entries(r.headers)) {
        li.append(el("div", { class: "rules" }, "Header ", el("code", {}, h), spec.description ? ": " + spec.description : ""));
      }
    }
    if (r.content) li.append(contentView(doc, r.content));
    list.append(li);
  }
  sec.append(list);
  return sec;
}

function render(doc) {
  const about = document.getElementById("about");
  const info = doc.info || {};
  about.textContent = [info.title, info.version && "version " + info.version].filter(Boolean).join(", ") +
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
      sub.append(el("li", {}, el("a", { href: "#" + opId(e.method, e.path) }, e.method.toUpperCase() + " " + e.path)));
      section.append(operationView(doc, e.method, e.path, e.op, e.pathParams));
    }
    tocList.append(el("li", {}, el("a", { href: "#" + section.id }, tag), " (" + entries.length + ")", sub));
    ops.append(section);
  }
  toc.append(el("h2", {}, "Operations"), tocList);
  const state = document.getElementById("state");
  state.textContent = "";
  state.hidden = true;
  if (location.hash) {
    const target = document.getElementById(decodeURIComponent(location.hash.slice(1)));
    if (target) target.scrollIntoView();
  }
}

async function load() {
  const state = document.getElementById("state");
  try {
    render(await Throng.client().getJson("/openapi.json", { headers: { Accept: "application/json" } }));
    document.body.dataset.ready = "1";
  } catch (e) {
    state.setAttribute("role", "alert");
    // The server's answer says what to do; anything else is this page's fault or the network's.
    state.textContent = "The API document could not be loaded. " +
      (e instanceof Throng.ApiError ? e.message : "(" + e.message + ") Reload the page to try again.");
  }
}

load();
