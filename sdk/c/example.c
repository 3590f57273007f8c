/*
 * The smallest airlock tool in C: `{"name": "..."}` in, `{"ok": {"greeting": "..."}}`
 * out. Build it for airlock with
 *
 *     clang --target=wasm32-wasi -O2 -I sdk/c -Wl,--strip-all sdk/c/example.c -o hello.wasm
 */
#include "airlock_tool.h"

int main(void) {
    size_t len;
    char *args = airlock_read_stdin(AIRLOCK_MAX_INPUT_BYTES, &len);
    if (args == NULL) {
        return airlock_emit_errorf(0, "could not read the arguments: %s", strerror(errno));
    }
    char *name;
    size_t name_len;
    enum airlock_json_status status = airlock_json_get_string(args, len, "name", &name, &name_len);
    free(args);
    if (status != AIRLOCK_JSON_OK) {
        return airlock_emit_errorf(0, "invalid arguments: `name`: %s",
                                   airlock_json_status_message(status));
    }
    /* The name may hold anything JSON can, NUL included: handle it by length. */
    static const char hello[] = "hello ";
    size_t greeting_len = sizeof hello - 1 + name_len;
    char *greeting = malloc(greeting_len);
    if (greeting == NULL) {
        free(name);
        return airlock_emit_error("out of memory", 0);
    }
    memcpy(greeting, hello, sizeof hello - 1);
    memcpy(greeting + sizeof hello - 1, name, name_len);
    free(name);

    airlock_ok_begin();
    fputs("{\"greeting\":", stdout);
    airlock_write_json_string(stdout, greeting, greeting_len);
    fputs("}", stdout);
    free(greeting);
    return airlock_ok_end();
}
