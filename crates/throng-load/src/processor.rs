//! `config.processor`: the script's JavaScript, run in an embedded engine (QuickJS through
//! `rquickjs`) with Artillery's signatures:
//!
//! - a `function` step, `beforeScenario`, `afterScenario`: `fn(context, events, next)`;
//! - a loop's `whileTrue`: `fn(context, next)`, `next(false)` ending the loop;
//! - `beforeRequest`: `fn(requestParams, context, events, next)` (it may change the URL,
//!   headers, `json`, `body`, `qs`, `form` and `cookie` before they are rendered);
//! - `afterResponse`: `fn(requestParams, response, context, events, next)` with
//!   `response.statusCode`, `response.headers` (lower-case names) and `response.body`.
//!
//! A function may call `next()` (or `next(err)`), return a promise (`async`), or neither; an
//! error thrown, passed to `next` or rejected fails the virtual user with the error's message
//! as its `errors.` code, as Artillery counts it. `context.vars` comes back to the user;
//! `events.emit('counter', name, n)`, `('histogram', name, ms)` and `('rate', name)` record
//! custom metrics. `process.env` is the environment; `process.exitCode = N` (or
//! `artillery.suggestedExitCode = N`) sets the run's exit code. `setTimeout` callbacks run
//! once the call returns, without waiting. `require` knows only `crypto` (`randomUUID`,
//! `randomInt`) and `util` (`format`); any other module makes the processor fail to load,
//! and the script then runs without it, saying so.
//!
//! Why a thread of its own: the engine is single-threaded and not `Send`, while virtual users
//! run on tokio's workers. Calls queue on a channel to that thread and are answered on a
//! oneshot; the arguments cross as JSON. Scripts without a processor never start it.

use std::{path::Path, sync::mpsc, thread};

use rquickjs::{Context, Function, Runtime};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One call into the script.
#[derive(Debug, Serialize)]
pub struct Call {
    /// `function` (also `beforeScenario`/`afterScenario`), `beforeRequest`, `afterResponse`.
    pub kind: &'static str,
    pub name: String,
    pub vars: Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub req: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub res: Option<Value>,
}

/// What a call did.
#[derive(Debug, Default, Deserialize)]
pub struct Outcome {
    /// The script has no function of that name.
    #[serde(default)]
    pub missing: bool,
    /// The error it threw, passed to `next` or rejected with.
    pub error: Option<String>,
    #[serde(default)]
    pub vars: Value,
    /// `requestParams` as the function left them.
    pub req: Option<Value>,
    /// `events.emit` calls: (type, name, value).
    #[serde(default)]
    pub emitted: Vec<(String, String, Value)>,
    /// `process.exitCode` or `artillery.suggestedExitCode`, if set.
    pub exit_code: Option<i32>,
    /// A `whileTrue` function's answer.
    pub result: Option<bool>,
}

type Job = (Call, tokio::sync::oneshot::Sender<Outcome>);

/// The engine's thread; dropping the handle ends it.
#[derive(Debug)]
pub struct Processor {
    jobs: std::sync::Mutex<mpsc::Sender<Job>>,
    /// The functions the module exports.
    pub functions: Vec<String>,
}

const PRELUDE: &str = r#"
globalThis.__exitCode = undefined;
globalThis.artillery = { log: function () { console.log.apply(null, arguments); } };
globalThis.process = { env: __env, get exitCode() { return __exitCode; }, set exitCode(v) { __exitCode = v; } };
globalThis.console = {
  log: function () { __print(Array.prototype.map.call(arguments, __fmt).join(" ")); },
};
console.info = console.log; console.warn = console.log; console.error = console.log; console.debug = console.log;
function __fmt(v) { return typeof v === "string" ? v : (function () { try { return JSON.stringify(v); } catch (e) { return String(v); } })(); }
globalThis.__timers = [];
globalThis.setTimeout = function (fn) { var args = Array.prototype.slice.call(arguments, 2); __timers.push(function () { fn.apply(null, args); }); return __timers.length; };
globalThis.setImmediate = globalThis.setTimeout;
globalThis.clearTimeout = function () {};
function __hex(n) { var s = ""; for (var i = 0; i < n; i++) s += Math.floor(Math.random() * 16).toString(16); return s; }
var __modules = {
  crypto: {
    randomUUID: function () { return __hex(8) + "-" + __hex(4) + "-4" + __hex(3) + "-" + "89ab"[Math.floor(Math.random() * 4)] + __hex(3) + "-" + __hex(12); },
    randomInt: function (a, b) { if (b === undefined) { b = a; a = 0; } return a + Math.floor(Math.random() * (b - a)); },
  },
  util: { format: function () { return Array.prototype.map.call(arguments, __fmt).join(" "); } },
};
globalThis.require = function (name) {
  var m = __modules[String(name).replace(/^node:/, "")];
  if (!m) throw new Error("require('" + name + "'): modules cannot be loaded in throng-load's JavaScript engine");
  return m;
};
"#;

const DRIVER: &str = r#"
(function () {
  function message(e) { return e && e.message !== undefined ? String(e.message) : String(e); }
  globalThis.__call = function (json) {
    var a = JSON.parse(json);
    var fn = __fns[a.name];
    if (typeof fn !== "function") { globalThis.__result = JSON.stringify({ missing: true }); return; }
    var context = { vars: a.vars, scenario: {}, funcs: {} };
    var emitted = [];
    var events = { emit: function (type, name, value) { emitted.push([String(type), String(name), value === undefined ? 1 : value]); } };
    var error = null;
    var result = null;
    function finish() {
      if (globalThis.__result !== undefined) return;
      var code = __exitCode;
      if (code === undefined && artillery.suggestedExitCode !== undefined) code = artillery.suggestedExitCode;
      globalThis.__result = JSON.stringify({ error: error, vars: context.vars, req: a.req === undefined ? null : a.req, emitted: emitted, result: result, exit_code: code === undefined ? null : Number(code) });
    }
    // Called by the engine's thread when nothing is left to run.
    globalThis.__finish = finish;
    var next = function (err) { if (err && error === null) error = message(err); finish(); };
    var ret;
    try {
      if (a.kind === "whileTrue") ret = fn(context, function (b) { result = !!b; finish(); });
      else if (a.kind === "beforeRequest") ret = fn(a.req, context, events, next);
      else if (a.kind === "afterResponse") ret = fn(a.req, a.res, context, events, next);
      else ret = fn(context, events, next);
    } catch (e) { error = message(e); finish(); }
    if (ret && typeof ret.then === "function") {
      ret.then(function () { finish(); }, function (e) { if (error === null) error = message(e); finish(); });
    }
  };
})();
"#;

/// Timer callbacks and promise jobs run after a call, at most this many rounds.
const SETTLE_ROUNDS_MAX: usize = 10_000;

impl Processor {
    /// Loads `path` (a CommonJS module, `module.exports = {...}`) on a new thread.
    pub fn start(path: &Path) -> Result<Self, String> {
        let source = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let (ready_tx, ready_rx) = mpsc::channel::<Result<Vec<String>, String>>();
        let (jobs_tx, jobs_rx) = mpsc::channel::<Job>();
        let name = path.display().to_string();
        thread::Builder::new()
            .name("throng-load-js".into())
            .spawn(move || {
                let engine = match Engine::new(&source, &name) {
                    Ok((engine, functions)) => {
                        let _ = ready_tx.send(Ok(functions));
                        engine
                    }
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                while let Ok((call, reply)) = jobs_rx.recv() {
                    let _ = reply.send(engine.call(&call));
                }
            })
            .map_err(|e| format!("cannot start the JavaScript thread: {e}"))?;
        let functions = ready_rx
            .recv()
            .map_err(|_| "the JavaScript thread stopped".to_string())??;
        Ok(Self {
            jobs: std::sync::Mutex::new(jobs_tx),
            functions,
        })
    }

    /// Runs one call on the engine's thread.
    pub async fn call(&self, call: Call) -> Outcome {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let sent = self
            .jobs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .send((call, tx));
        if sent.is_err() {
            return Outcome {
                error: Some("the JavaScript engine stopped".into()),
                ..Outcome::default()
            };
        }
        rx.await.unwrap_or_else(|_| Outcome {
            error: Some("the JavaScript engine stopped".into()),
            ..Outcome::default()
        })
    }

    pub fn has(&self, name: &str) -> bool {
        self.functions.iter().any(|f| f == name)
    }
}

struct Engine {
    runtime: Runtime,
    context: Context,
}

fn js_error(ctx: &rquickjs::Ctx<'_>, e: rquickjs::Error) -> String {
    if let rquickjs::Error::Exception = e {
        let thrown = ctx.catch();
        if let Some(ex) = thrown.as_exception() {
            return format!(
                "{}{}",
                ex.message().unwrap_or_default(),
                ex.stack().map(|s| format!("\n{s}")).unwrap_or_default()
            );
        }
        if let Ok(s) = thrown.get::<rquickjs::Coerced<String>>() {
            return s.0;
        }
    }
    e.to_string()
}

impl Engine {
    fn new(source: &str, name: &str) -> Result<(Self, Vec<String>), String> {
        let runtime = Runtime::new().map_err(|e| e.to_string())?;
        // A runaway script must not take the machine: 256 MiB and a deep enough stack.
        runtime.set_memory_limit(256 << 20);
        runtime.set_max_stack_size(1 << 20);
        let context = Context::full(&runtime).map_err(|e| e.to_string())?;
        let functions = context.with(|ctx| -> Result<Vec<String>, String> {
            let globals = ctx.globals();
            let env: std::collections::BTreeMap<String, String> = std::env::vars().collect();
            let env_json = serde_json::to_string(&env).unwrap_or_else(|_| "{}".into());
            let env_value: rquickjs::Value = ctx
                .json_parse(env_json)
                .map_err(|e| js_error(&ctx, e))?;
            globals.set("__env", env_value).map_err(|e| e.to_string())?;
            let print = Function::new(ctx.clone(), |line: String| println!("{line}"))
                .map_err(|e| e.to_string())?;
            globals.set("__print", print).map_err(|e| e.to_string())?;
            ctx.eval::<(), _>(PRELUDE).map_err(|e| js_error(&ctx, e))?;
            let module = format!(
                "globalThis.__fns = (function () {{ var module = {{ exports: {{}} }}; var exports = module.exports; (function (module, exports, require) {{\n{source}\n}})(module, exports, require); return module.exports; }})();"
            );
            ctx.eval::<(), _>(module.as_bytes().to_vec())
                .map_err(|e| format!("{name}: {}", js_error(&ctx, e)))?;
            ctx.eval::<(), _>(DRIVER).map_err(|e| js_error(&ctx, e))?;
            let names: String = ctx
                .eval("JSON.stringify(Object.keys(__fns).filter(function (k) { return typeof __fns[k] === 'function'; }))")
                .map_err(|e| js_error(&ctx, e))?;
            serde_json::from_str(&names).map_err(|e| e.to_string())
        })?;
        Ok((Self { runtime, context }, functions))
    }

    fn call(&self, call: &Call) -> Outcome {
        let json = match serde_json::to_string(call) {
            Ok(j) => j,
            Err(e) => {
                return Outcome {
                    error: Some(e.to_string()),
                    ..Outcome::default()
                }
            }
        };
        let result = self.context.with(|ctx| -> Result<String, String> {
            ctx.globals()
                .set("__result", rquickjs::Undefined)
                .map_err(|e| e.to_string())?;
            let call_fn: Function = ctx.globals().get("__call").map_err(|e| e.to_string())?;
            call_fn
                .call::<_, ()>((json,))
                .map_err(|e| js_error(&ctx, e))?;
            Ok(String::new())
        });
        if let Err(e) = result {
            return Outcome {
                error: Some(e),
                ..Outcome::default()
            };
        }
        // Promise jobs and timer callbacks, until the call has finished.
        for _ in 0..SETTLE_ROUNDS_MAX {
            while self.runtime.is_job_pending() {
                if self.runtime.execute_pending_job().is_err() {
                    break;
                }
            }
            let finished = self.context.with(|ctx| {
                ctx.globals()
                    .get::<_, Option<String>>("__result")
                    .ok()
                    .flatten()
            });
            if let Some(text) = finished {
                return serde_json::from_str(&text).unwrap_or_else(|e| Outcome {
                    error: Some(format!("the function's results: {e}")),
                    ..Outcome::default()
                });
            }
            let ran = self.context.with(|ctx| {
                ctx.eval::<bool, _>(
                    "(function () { var t = __timers; __timers = []; t.forEach(function (f) { f(); }); return t.length > 0; })()",
                )
                .unwrap_or(false)
            });
            if !ran && !self.runtime.is_job_pending() {
                break;
            }
        }
        // Neither `next` nor a promise: a synchronous function that returned, as far as it
        // can go; its changes are kept.
        let text = self.context.with(|ctx| {
            let _ = ctx.eval::<(), _>("__finish()");
            ctx.globals()
                .get::<_, Option<String>>("__result")
                .ok()
                .flatten()
        });
        text.and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or_else(|| Outcome {
                error: Some("the function's results were lost".into()),
                ..Outcome::default()
            })
    }
}
