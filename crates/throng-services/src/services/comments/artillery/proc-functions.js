// The processor the write-up's script names (config.processor), for runs
// with Node Artillery; throng load skips JavaScript hooks with a warning.
module.exports = {
  logResponse(requestParams, response, context, ee, next) {
    if (response.statusCode !== 200) {
      console.log(`status ${response.statusCode} for ${requestParams.url}`);
    }
    return next();
  },
};
