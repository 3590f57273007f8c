/*
 * airlock_tool.h - the airlock tool ABI (sdk/ABI.md) for tools written in C.
 *
 * Single header, no dependencies beyond the C standard library, builds for wasm32-wasi
 * with wasi-libc and natively. Every function is `static inline`: include the header
 * wherever it is needed, and the ones a tool does not use cost nothing and warn about
 * nothing.
 *
 * What it does for you:
 *   - airlock_read_stdin()        read the arguments document (stdin to EOF), bounded;
 *   - airlock_json_get_string()   take one string field out of the top-level object;
 *   - airlock_workspace_path()    check and normalise a workspace-relative path;
 *   - airlock_write_json_string() write a string as a JSON string literal;
 *   - airlock_ok_begin()/_end()   frame the one `{"ok": ...}` result document;
 *   - airlock_emit_error()        write the one `{"error": ...}` result document.
 *
 * sdk/c/example.c is a complete minimal tool (it greets the `name` it is given), and
 * plugins/wc/wc.c a real one.
 *
 * Both airlock_emit_error() and airlock_ok_end() return the exit status to return from
 * main(): 0, as the ABI asks for `ok` and `error` results alike, or 1 if stdout could not
 * be written.
 *
 * Build with clang and wasi-libc, e.g. on Debian (packages clang lld wasi-libc
 * libclang-rt-14-dev-wasm32):
 *
 *     clang --target=wasm32-wasi -O2 -I sdk/c -Wl,--strip-all tool.c -o tool.wasm
 *
 * Mind the stack: wasm-ld gives a wasm32-wasi program 64 KiB by default, and
 * overflowing it does not trap but corrupts memory below it. Keep large buffers static
 * or on the heap (or link with -Wl,-z,stack-size=N).
 *
 * The JSON reader is deliberately small. What it supports, and what it does not:
 *   - It checks the whole document: one object, then only whitespace. Nested objects and
 *     arrays, numbers, true/false/null are checked for well-formedness and skipped, up to
 *     AIRLOCK_JSON_MAX_DEPTH levels of nesting.
 *   - It extracts string values of top-level keys only (the flat object of a tool's
 *     arguments). Escapes are decoded in full: \" \\ \/ \b \f \n \r \t and \uXXXX
 *     including surrogate pairs, to UTF-8. A lone surrogate is an error.
 *   - It does not extract numbers, booleans, arrays or nested objects: read those
 *     yourself or use a real JSON library.
 *   - It does not check that raw (unescaped) bytes in strings are valid UTF-8; the
 *     daemon only sends valid UTF-8, so this matters only for input from elsewhere.
 *   - A decoded string may contain NUL (from \u0000): compare the returned length with
 *     strlen() before using it as a C string (airlock_workspace_path() refuses it).
 *   - A key that appears twice is an error (AIRLOCK_JSON_DUPLICATE).
 */
#ifndef AIRLOCK_TOOL_H
#define AIRLOCK_TOOL_H

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The most argument bytes a tool reads by default: 16 MiB, as the Rust SDK. Arguments
 * are a model's tool call; the bound keeps a runaway input from exhausting the guest's
 * linear memory. */
#define AIRLOCK_MAX_INPUT_BYTES ((size_t)16 * 1024 * 1024)

/* Nesting the JSON reader follows before refusing a document: the reader recurses once
 * per level, and a guest's stack is small. Tool arguments nest a few levels at most. */
#define AIRLOCK_JSON_MAX_DEPTH 64

/* Where the daemon preopens the workspace (sdk/ABI.md, "Files"). Define it before
 * including this header to run a tool natively against another directory (tests). */
#ifndef AIRLOCK_WORKSPACE_ROOT
#define AIRLOCK_WORKSPACE_ROOT "/workspace"
#endif

/* ------------------------------------------------------------------------------------ */
/* Reading the arguments                                                                */
/* ------------------------------------------------------------------------------------ */

/* Reads stdin to EOF into a NUL-terminated buffer from malloc() and stores its length
 * (without the NUL) in *len. Returns NULL, with errno set, on a read error (EIO), when
 * out of memory (ENOMEM) or when stdin holds more than max_bytes (EFBIG). */
static inline char *airlock_read_stdin(size_t max_bytes, size_t *len) {
    size_t cap = 4096, used = 0;
    char *buf = malloc(cap);
    if (buf == NULL) {
        errno = ENOMEM;
        return NULL;
    }
    for (;;) {
        if (used == cap - 1) {
            if (used > max_bytes) {
                break; /* over the limit: no need to read the rest */
            }
            /* Grow to at most one byte over the limit, which is enough to tell. */
            size_t next = cap * 2 < max_bytes + 2 ? cap * 2 : max_bytes + 2;
            char *grown = realloc(buf, next);
            if (grown == NULL) {
                free(buf);
                errno = ENOMEM;
                return NULL;
            }
            buf = grown;
            cap = next;
        }
        size_t n = fread(buf + used, 1, cap - 1 - used, stdin);
        used += n;
        if (n == 0) {
            if (ferror(stdin)) {
                free(buf);
                errno = EIO;
                return NULL;
            }
            break; /* EOF */
        }
    }
    if (used > max_bytes) {
        free(buf);
        errno = EFBIG;
        return NULL;
    }
    buf[used] = '\0';
    *len = used;
    return buf;
}

/* ------------------------------------------------------------------------------------ */
/* The JSON reader                                                                      */
/* ------------------------------------------------------------------------------------ */

enum airlock_json_status {
    AIRLOCK_JSON_OK = 0,
    AIRLOCK_JSON_MISSING,    /* the object has no such key */
    AIRLOCK_JSON_NOT_STRING, /* the key's value is not a string */
    AIRLOCK_JSON_DUPLICATE,  /* the key appears more than once */
    AIRLOCK_JSON_INVALID,    /* the document is not one well-formed JSON object */
    AIRLOCK_JSON_NO_MEMORY,
};

/* A sentence for each status, to put in an error result. */
static inline const char *airlock_json_status_message(enum airlock_json_status status) {
    switch (status) {
    case AIRLOCK_JSON_OK:
        return "ok";
    case AIRLOCK_JSON_MISSING:
        return "missing field";
    case AIRLOCK_JSON_NOT_STRING:
        return "the field is not a string";
    case AIRLOCK_JSON_DUPLICATE:
        return "the field appears more than once";
    case AIRLOCK_JSON_INVALID:
        return "the arguments are not one valid JSON object";
    case AIRLOCK_JSON_NO_MEMORY:
        return "out of memory";
    }
    return "unknown status";
}

struct airlock_json_cursor {
    const char *p;
    const char *end;
};

static inline void airlock_json_skip_ws(struct airlock_json_cursor *c) {
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r')) {
        c->p++;
    }
}

static inline int airlock_json_hex4(const char *p, unsigned *out) {
    unsigned value = 0;
    for (int i = 0; i < 4; i++) {
        char ch = p[i];
        value <<= 4;
        if (ch >= '0' && ch <= '9') {
            value |= (unsigned)(ch - '0');
        } else if (ch >= 'a' && ch <= 'f') {
            value |= (unsigned)(ch - 'a' + 10);
        } else if (ch >= 'A' && ch <= 'F') {
            value |= (unsigned)(ch - 'A' + 10);
        } else {
            return 0;
        }
    }
    *out = value;
    return 1;
}

static inline size_t airlock_utf8_encode(unsigned cp, char *out) {
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Scans the string literal at the cursor (which is on its opening quote) and moves the
 * cursor past it. Stores the decoded bytes in buf unless buf is NULL, and their count in
 * *n either way. */
static inline enum airlock_json_status
airlock_json_scan_string(struct airlock_json_cursor *c, char *buf, size_t *n) {
    *n = 0;
    if (c->p >= c->end || *c->p != '"') {
        return AIRLOCK_JSON_INVALID;
    }
    c->p++;
    while (c->p < c->end) {
        unsigned char ch = (unsigned char)*c->p;
        if (ch == '"') {
            c->p++;
            return AIRLOCK_JSON_OK;
        }
        if (ch < 0x20) {
            return AIRLOCK_JSON_INVALID; /* control characters must be escaped */
        }
        if (ch != '\\') {
            if (buf != NULL) buf[*n] = (char)ch;
            (*n)++;
            c->p++;
            continue;
        }
        if (c->end - c->p < 2) {
            return AIRLOCK_JSON_INVALID;
        }
        char decoded[4];
        size_t decoded_len = 1;
        size_t escape_len = 2;
        switch (c->p[1]) {
        case '"': decoded[0] = '"'; break;
        case '\\': decoded[0] = '\\'; break;
        case '/': decoded[0] = '/'; break;
        case 'b': decoded[0] = '\b'; break;
        case 'f': decoded[0] = '\f'; break;
        case 'n': decoded[0] = '\n'; break;
        case 'r': decoded[0] = '\r'; break;
        case 't': decoded[0] = '\t'; break;
        case 'u': {
            unsigned cp;
            if (c->end - c->p < 6 || !airlock_json_hex4(c->p + 2, &cp)) {
                return AIRLOCK_JSON_INVALID;
            }
            escape_len = 6;
            if (cp >= 0xDC00 && cp <= 0xDFFF) {
                return AIRLOCK_JSON_INVALID; /* a low surrogate with no high one before it */
            }
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                unsigned low;
                if (c->end - c->p < 12 || c->p[6] != '\\' || c->p[7] != 'u' ||
                    !airlock_json_hex4(c->p + 8, &low) || low < 0xDC00 || low > 0xDFFF) {
                    return AIRLOCK_JSON_INVALID;
                }
                cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
                escape_len = 12;
            }
            decoded_len = airlock_utf8_encode(cp, decoded);
            break;
        }
        default:
            return AIRLOCK_JSON_INVALID;
        }
        if (buf != NULL) memcpy(buf + *n, decoded, decoded_len);
        *n += decoded_len;
        c->p += escape_len;
    }
    return AIRLOCK_JSON_INVALID; /* no closing quote */
}

/* Parses the string literal at the cursor into a NUL-terminated buffer from malloc(). A
 * first pass checks it and measures the decoded length, so the buffer is exact. */
static inline enum airlock_json_status
airlock_json_string(struct airlock_json_cursor *c, char **out, size_t *out_len) {
    struct airlock_json_cursor measure = *c;
    size_t n;
    enum airlock_json_status status = airlock_json_scan_string(&measure, NULL, &n);
    if (status != AIRLOCK_JSON_OK) {
        return status;
    }
    char *buf = malloc(n + 1);
    if (buf == NULL) {
        return AIRLOCK_JSON_NO_MEMORY;
    }
    airlock_json_scan_string(c, buf, &n);
    buf[n] = '\0';
    *out = buf;
    *out_len = n;
    return AIRLOCK_JSON_OK;
}

static inline int airlock_json_is_digit(struct airlock_json_cursor *c) {
    return c->p < c->end && *c->p >= '0' && *c->p <= '9';
}

static inline enum airlock_json_status
airlock_json_number(struct airlock_json_cursor *c) {
    if (c->p < c->end && *c->p == '-') {
        c->p++;
    }
    if (!airlock_json_is_digit(c)) {
        return AIRLOCK_JSON_INVALID;
    }
    if (*c->p == '0') {
        c->p++; /* no leading zeros */
    } else {
        while (airlock_json_is_digit(c)) c->p++;
    }
    if (c->p < c->end && *c->p == '.') {
        c->p++;
        if (!airlock_json_is_digit(c)) return AIRLOCK_JSON_INVALID;
        while (airlock_json_is_digit(c)) c->p++;
    }
    if (c->p < c->end && (*c->p == 'e' || *c->p == 'E')) {
        c->p++;
        if (c->p < c->end && (*c->p == '+' || *c->p == '-')) c->p++;
        if (!airlock_json_is_digit(c)) return AIRLOCK_JSON_INVALID;
        while (airlock_json_is_digit(c)) c->p++;
    }
    return AIRLOCK_JSON_OK;
}

static inline enum airlock_json_status
airlock_json_literal(struct airlock_json_cursor *c, const char *word) {
    size_t len = strlen(word);
    if ((size_t)(c->end - c->p) < len || memcmp(c->p, word, len) != 0) {
        return AIRLOCK_JSON_INVALID;
    }
    c->p += len;
    return AIRLOCK_JSON_OK;
}

/* Checks and skips any value. `depth` counts the containers around it. */
static inline enum airlock_json_status
airlock_json_skip_value(struct airlock_json_cursor *c, int depth) {
    airlock_json_skip_ws(c);
    if (c->p >= c->end) {
        return AIRLOCK_JSON_INVALID;
    }
    switch (*c->p) {
    case '"': {
        size_t ignored;
        return airlock_json_scan_string(c, NULL, &ignored);
    }
    case 't':
        return airlock_json_literal(c, "true");
    case 'f':
        return airlock_json_literal(c, "false");
    case 'n':
        return airlock_json_literal(c, "null");
    case '{':
    case '[': {
        char close = *c->p == '{' ? '}' : ']';
        int is_object = close == '}';
        if (depth >= AIRLOCK_JSON_MAX_DEPTH) {
            return AIRLOCK_JSON_INVALID;
        }
        c->p++;
        airlock_json_skip_ws(c);
        if (c->p < c->end && *c->p == close) {
            c->p++;
            return AIRLOCK_JSON_OK;
        }
        for (;;) {
            enum airlock_json_status status;
            if (is_object) {
                size_t ignored;
                airlock_json_skip_ws(c);
                status = airlock_json_scan_string(c, NULL, &ignored);
                if (status != AIRLOCK_JSON_OK) return status;
                airlock_json_skip_ws(c);
                if (c->p >= c->end || *c->p != ':') return AIRLOCK_JSON_INVALID;
                c->p++;
            }
            status = airlock_json_skip_value(c, depth + 1);
            if (status != AIRLOCK_JSON_OK) return status;
            airlock_json_skip_ws(c);
            if (c->p >= c->end) return AIRLOCK_JSON_INVALID;
            if (*c->p == close) {
                c->p++;
                return AIRLOCK_JSON_OK;
            }
            if (*c->p != ',') return AIRLOCK_JSON_INVALID;
            c->p++;
        }
    }
    default:
        return airlock_json_number(c);
    }
}

/* What airlock_json_find_member() found for the key so far. */
struct airlock_json_found {
    enum airlock_json_status status; /* MISSING, NOT_STRING or OK */
    char *value;                     /* when OK: the decoded string, from malloc() */
    size_t len;
};

/* Walks the object at the cursor, checking every member and recording `key`'s value. */
static inline enum airlock_json_status
airlock_json_find_member(struct airlock_json_cursor *c, const char *key,
                         struct airlock_json_found *found) {
    airlock_json_skip_ws(c);
    if (c->p >= c->end || *c->p != '{') {
        return AIRLOCK_JSON_INVALID;
    }
    c->p++;
    airlock_json_skip_ws(c);
    if (c->p < c->end && *c->p == '}') {
        c->p++;
        return AIRLOCK_JSON_OK;
    }
    for (;;) {
        char *name;
        size_t name_len;
        enum airlock_json_status status;

        airlock_json_skip_ws(c);
        status = airlock_json_string(c, &name, &name_len);
        if (status != AIRLOCK_JSON_OK) return status;
        /* Keys are compared decoded, so "p\u0061th" is "path". */
        int wanted = name_len == strlen(key) && memcmp(name, key, name_len) == 0;
        free(name);
        airlock_json_skip_ws(c);
        if (c->p >= c->end || *c->p != ':') return AIRLOCK_JSON_INVALID;
        c->p++;
        airlock_json_skip_ws(c);
        if (wanted && found->status != AIRLOCK_JSON_MISSING) {
            return AIRLOCK_JSON_DUPLICATE;
        }
        if (wanted && c->p < c->end && *c->p == '"') {
            status = airlock_json_string(c, &found->value, &found->len);
            if (status != AIRLOCK_JSON_OK) return status;
            found->status = AIRLOCK_JSON_OK;
        } else {
            status = airlock_json_skip_value(c, 1);
            if (status != AIRLOCK_JSON_OK) return status;
            if (wanted) found->status = AIRLOCK_JSON_NOT_STRING;
        }
        airlock_json_skip_ws(c);
        if (c->p < c->end && *c->p == ',') {
            c->p++;
            continue;
        }
        if (c->p < c->end && *c->p == '}') {
            c->p++;
            return AIRLOCK_JSON_OK;
        }
        return AIRLOCK_JSON_INVALID;
    }
}

/* Finds the top-level key `key` of the JSON object in json[0..len) and, if its value is
 * a string, stores the decoded value (NUL-terminated, from malloc(); free() it) in *out
 * and its length in *out_len. The whole document is checked: a malformed one is
 * AIRLOCK_JSON_INVALID whatever key is asked for. */
static inline enum airlock_json_status
airlock_json_get_string(const char *json, size_t len, const char *key, char **out,
                        size_t *out_len) {
    struct airlock_json_cursor c = {json, json + len};
    struct airlock_json_found found = {AIRLOCK_JSON_MISSING, NULL, 0};
    enum airlock_json_status status = airlock_json_find_member(&c, key, &found);
    if (status == AIRLOCK_JSON_OK) {
        airlock_json_skip_ws(&c);
        if (c.p != c.end) {
            status = AIRLOCK_JSON_INVALID; /* something after the object */
        }
    }
    if (status != AIRLOCK_JSON_OK) {
        free(found.value);
        return status;
    }
    if (found.status == AIRLOCK_JSON_OK) {
        *out = found.value;
        *out_len = found.len;
    }
    return found.status;
}

/* ------------------------------------------------------------------------------------ */
/* Workspace paths                                                                      */
/* ------------------------------------------------------------------------------------ */

/* Checks a workspace path from the arguments (`a/b`, `./a/b`, `/workspace/a/b`, `.`)
 * and writes its normalised workspace-relative form (`a/b`, or `.` for the root) to
 * rel[0..rel_size). The same rules as the Rust SDK's Workspace::resolve: `..` may not
 * climb above the root and an absolute path must lie under AIRLOCK_WORKSPACE_ROOT. This
 * is lexical; the WASI sandbox is the real boundary, this gives a clear error first.
 *
 * Returns NULL on success, or why the path is refused: a static predicate to follow the
 * path in a message, as in printf("path `%s` %s", arg, why). Open the file as
 * AIRLOCK_WORKSPACE_ROOT "/" rel. */
static inline const char *airlock_workspace_path(const char *arg, size_t arg_len, char *rel,
                                          size_t rel_size) {
    const char *root = AIRLOCK_WORKSPACE_ROOT;
    size_t root_len = strlen(root);
    const char *p = arg;
    const char *end = arg + arg_len;
    size_t n = 0;

    if (arg_len == 0) {
        return "is empty; use \".\" for the workspace root";
    }
    if (memchr(arg, '\0', arg_len) != NULL) {
        return "contains a NUL byte";
    }
    if (*p == '/') {
        /* Compare whole components: `/workspacefoo` is not under `/workspace`. */
        if (arg_len < root_len || memcmp(arg, root, root_len) != 0 ||
            (arg_len > root_len && arg[root_len] != '/')) {
            return "is outside the workspace: an absolute path must start with `"
                   AIRLOCK_WORKSPACE_ROOT "`; prefer a path relative to the workspace, such as "
                   "`src/main.c`";
        }
        p += root_len;
    }
    while (p < end) {
        while (p < end && *p == '/') p++;
        const char *component = p;
        while (p < end && *p != '/') p++;
        size_t len = (size_t)(p - component);
        if (len == 0 || (len == 1 && component[0] == '.')) {
            continue;
        }
        if (len == 2 && component[0] == '.' && component[1] == '.') {
            if (n == 0) {
                return "climbs above the workspace root with `..`; only paths inside the "
                       "workspace can be reached";
            }
            while (n > 0 && rel[n - 1] != '/') n--; /* drop the last component */
            if (n > 0) n--;                         /* and its separator */
            continue;
        }
        size_t needed = n + (n > 0) + len + 1;
        if (needed > rel_size) {
            return "is too long";
        }
        if (n > 0) rel[n++] = '/';
        memcpy(rel + n, component, len);
        n += len;
    }
    if (rel_size < 2) {
        return "is too long";
    }
    if (n == 0) {
        rel[n++] = '.';
    }
    rel[n] = '\0';
    return NULL;
}

/* ------------------------------------------------------------------------------------ */
/* Writing the result                                                                   */
/* ------------------------------------------------------------------------------------ */

/* Length of the valid UTF-8 sequence at s[0..len), or 0 if there is none. */
static inline size_t airlock_utf8_sequence(const unsigned char *s, size_t len) {
    unsigned char b = s[0];
    size_t need;
    unsigned char lo = 0x80, hi = 0xBF;
    if (b < 0x80) return 1;
    if (b >= 0xC2 && b <= 0xDF) need = 2;
    else if (b >= 0xE0 && b <= 0xEF) {
        need = 3;
        if (b == 0xE0) lo = 0xA0;      /* no overlong forms */
        else if (b == 0xED) hi = 0x9F; /* no surrogates */
    } else if (b >= 0xF0 && b <= 0xF4) {
        need = 4;
        if (b == 0xF0) lo = 0x90;
        else if (b == 0xF4) hi = 0x8F; /* nothing past U+10FFFF */
    } else {
        return 0;
    }
    if (len < need || s[1] < lo || s[1] > hi) return 0;
    for (size_t i = 2; i < need; i++) {
        if (s[i] < 0x80 || s[i] > 0xBF) return 0;
    }
    return need;
}

/* Writes s[0..len) as a JSON string literal, quotes included. Bytes that are not valid
 * UTF-8 (a file name from a foreign file system, say) are written as U+FFFD so that the
 * result stays valid JSON. */
static inline void airlock_write_json_string(FILE *out, const char *s, size_t len) {
    const unsigned char *p = (const unsigned char *)s;
    const unsigned char *end = p + len;
    fputc('"', out);
    while (p < end) {
        unsigned char ch = *p;
        switch (ch) {
        case '"': fputs("\\\"", out); p++; continue;
        case '\\': fputs("\\\\", out); p++; continue;
        case '\n': fputs("\\n", out); p++; continue;
        case '\r': fputs("\\r", out); p++; continue;
        case '\t': fputs("\\t", out); p++; continue;
        case '\b': fputs("\\b", out); p++; continue;
        case '\f': fputs("\\f", out); p++; continue;
        default: break;
        }
        if (ch < 0x20) {
            fprintf(out, "\\u%04x", ch);
            p++;
            continue;
        }
        size_t seq = airlock_utf8_sequence(p, (size_t)(end - p));
        if (seq == 0) {
            fputs("\\ufffd", out);
            p++;
            continue;
        }
        fwrite(p, 1, seq, out);
        p += seq;
    }
    fputc('"', out);
}

/* Starts the `ok` result: write its value to stdout next, then call airlock_ok_end(). */
static inline void airlock_ok_begin(void) { fputs("{\"ok\":", stdout); }

static inline int airlock_finish_document(void) {
    fputs("}\n", stdout);
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "airlock_tool: could not write the result to stdout\n");
        return 1;
    }
    return 0;
}

/* Ends the `ok` result. Returns the exit status for main(). */
static inline int airlock_ok_end(void) { return airlock_finish_document(); }

/* Writes the whole `error` result: the message, and whether the same call may succeed
 * later. Returns the exit status for main(). */
static inline int airlock_emit_error(const char *message, int retryable) {
    fputs("{\"error\":{\"message\":", stdout);
    airlock_write_json_string(stdout, message, strlen(message));
    fputs(retryable ? ",\"retryable\":true}" : ",\"retryable\":false}", stdout);
    return airlock_finish_document();
}

/* airlock_emit_error() with a printf-style message (cut at 1 KiB). */
__attribute__((format(printf, 2, 3))) static inline int airlock_emit_errorf(int retryable,
                                                                            const char *format,
                                                                            ...) {
    char message[1024];
    va_list args;
    va_start(args, format);
    vsnprintf(message, sizeof message, format, args);
    va_end(args);
    return airlock_emit_error(message, retryable);
}

#endif /* AIRLOCK_TOOL_H */
