// Processor functions with Artillery's signatures: callbacks, async, hooks, custom metrics,
// an exit code and an error.
const crypto = require("crypto");

module.exports = { setToken, signRequest, readResponse, asyncStep, failing, setExit, beforeScn, underThree };

function underThree(context, next) {
  return next(context.vars.$loopCount < 3);
}

function beforeScn(context, events, next) {
  context.vars.user = context.vars.user || "anon";
  return next();
}

function setToken(context, events, next) {
  context.vars.token = "tok-" + context.vars.user;
  context.vars.id = crypto.randomUUID();
  events.emit("counter", "custom.tokens", 1);
  return next();
}

function signRequest(requestParams, context, events, next) {
  requestParams.headers["x-sig"] = "sig-" + context.vars.token;
  requestParams.url = requestParams.url.replace("/plain/", "/signed/");
  next();
}

function readResponse(requestParams, response, context, events, next) {
  context.vars.echoed = JSON.parse(response.body).echo.x;
  events.emit("histogram", "custom.latency", 12);
  next();
}

async function asyncStep(context, events) {
  await Promise.resolve();
  context.vars.later = "yes";
}

function failing(context, events, next) {
  setTimeout(() => next(new Error("boom")), 10);
}

function setExit(requestParams, response, context, events, next) {
  if (response.statusCode === 500) process.exitCode = 17;
  next();
}
