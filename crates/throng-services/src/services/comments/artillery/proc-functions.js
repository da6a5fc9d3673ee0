// The processor the write-up's script names (config.processor); Node
// Artillery and throng load (its embedded JavaScript engine) both run it.
module.exports = {
  logResponse(requestParams, response, context, ee, next) {
    if (response.statusCode !== 200) {
      console.log(`status ${response.statusCode} for ${requestParams.url}`);
    }
    return next();
  },
};
