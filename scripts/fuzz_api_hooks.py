"""schemathesis hooks for scripts/fuzz-api.

JSON Schema counts 1.0 as an integer; throng's bodies are parsed by serde,
which refuses a number with a fraction part where it wants an integer (422
invalid_field, naming the field). The document keeps saying "integer" (what a
client should send); the fuzzer does not send whole floats.
"""
import schemathesis


def _has_whole_float(value):
    if isinstance(value, float):
        return value.is_integer()
    if isinstance(value, dict):
        return any(_has_whole_float(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_whole_float(v) for v in value)
    return False


@schemathesis.hook
def filter_body(context, body):
    return not _has_whole_float(body)
