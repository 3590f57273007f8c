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
 *   - airlock_json_parse()        check a whole document once, then walk it without
 *                                 copying: airlock_json_member(), airlock_json_next()
 *                                 (arrays, objects), airlock_json_as_int()/_bool()/
 *                                 _double()/_string(), airlock_json_opt_int()/_bool()
 *                                 (optional members with a default);
 *   - airlock_workspace_path()    check and normalise a workspace-relative path;
 *   - airlock_write_json_string() write a string as a JSON string literal;
 *   - airlock_jw_*()              write any JSON value (objects, arrays, numbers...);
 *   - airlock_ok_begin()/_end()   frame the one `{"ok": ...}` result document;
 *   - airlock_emit_error()        write the one `{"error": ...}` result document.
 *
 * sdk/c/example.c is a complete minimal tool (it greets the `name` it is given),
 * plugins/wc/wc.c a real one, and the template of `airlock tools new --lang c` one that
 * reads nested and non-string arguments and writes a nested result.
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
 *   - It checks the whole document: airlock_json_get_string() one object, then only
 *     whitespace; airlock_json_parse() one value of any type. Everything in it is checked
 *     for well-formedness, up to AIRLOCK_JSON_MAX_DEPTH levels of nesting.
 *   - airlock_json_get_string() extracts string values of top-level keys only;
 *     airlock_json_parse() and its accessors reach any value at any depth. Escapes are
 *     decoded in full: \" \\ \/ \b \f \n \r \t and \uXXXX including surrogate pairs,
 *     to UTF-8. A lone surrogate is an error.
 *   - Integers are read exactly into long long (out of range is an error, never a
 *     rounded value); other numbers into double with strtod().
 *   - It does not check that raw (unescaped) bytes in strings are valid UTF-8; the
 *     daemon only sends valid UTF-8, so this matters only for input from elsewhere.
 *   - A decoded string may contain NUL (from \u0000): compare the returned length with
 *     strlen() before using it as a C string (airlock_workspace_path() refuses it).
 *   - A key that appears twice is an error (AIRLOCK_JSON_DUPLICATE) when it is the key
 *     asked for.
 *   - Nothing is built in memory: a member lookup scans its object, so it costs the size
 *     of the object. Fine for arguments; for megabytes of data, walk it once with
 *     airlock_json_next() instead of asking for many keys.
 */
#ifndef AIRLOCK_TOOL_H
#define AIRLOCK_TOOL_H

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
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
    AIRLOCK_JSON_WRONG_TYPE,   /* the value is not of the type asked for */
    AIRLOCK_JSON_OUT_OF_RANGE, /* a number too large for its C type, or a string longer
                                  than the buffer given */
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
    case AIRLOCK_JSON_WRONG_TYPE:
        return "the field has the wrong type";
    case AIRLOCK_JSON_OUT_OF_RANGE:
        return "the field's value is out of range";
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

/* Decodes the escape sequence at p[0..end) (p is on its backslash) into out (up to 4
 * UTF-8 bytes) and *out_len. Returns how many input bytes the escape takes, or 0 when it
 * is not a valid escape (a lone surrogate included). */
static inline size_t airlock_json_unescape(const char *p, const char *end, char *out,
                                           size_t *out_len) {
    if (end - p < 2) {
        return 0;
    }
    *out_len = 1;
    switch (p[1]) {
    case '"': out[0] = '"'; return 2;
    case '\\': out[0] = '\\'; return 2;
    case '/': out[0] = '/'; return 2;
    case 'b': out[0] = '\b'; return 2;
    case 'f': out[0] = '\f'; return 2;
    case 'n': out[0] = '\n'; return 2;
    case 'r': out[0] = '\r'; return 2;
    case 't': out[0] = '\t'; return 2;
    case 'u': {
        unsigned cp;
        size_t escape_len = 6;
        if (end - p < 6 || !airlock_json_hex4(p + 2, &cp)) {
            return 0;
        }
        if (cp >= 0xDC00 && cp <= 0xDFFF) {
            return 0; /* a low surrogate with no high one before it */
        }
        if (cp >= 0xD800 && cp <= 0xDBFF) {
            unsigned low;
            if (end - p < 12 || p[6] != '\\' || p[7] != 'u' || !airlock_json_hex4(p + 8, &low) ||
                low < 0xDC00 || low > 0xDFFF) {
                return 0;
            }
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
            escape_len = 12;
        }
        *out_len = airlock_utf8_encode(cp, out);
        return escape_len;
    }
    default:
        return 0;
    }
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
        char decoded[4];
        size_t decoded_len;
        size_t escape_len = airlock_json_unescape(c->p, c->end, decoded, &decoded_len);
        if (escape_len == 0) {
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
/* JSON values: nested objects, arrays, numbers, booleans                               */
/* ------------------------------------------------------------------------------------ */

/* airlock_json_get_string() reads one top-level string. For anything else, parse the
 * document once with airlock_json_parse() and walk it with the functions below. A value
 * is a view of the document's text (nothing is copied and nothing needs freeing; the
 * document must outlive its values); only airlock_json_as_string() allocates.
 *
 *     struct airlock_json_value args, options;
 *     if (airlock_json_parse(input, len, &args) != AIRLOCK_JSON_OK ||
 *         airlock_json_type(args) != AIRLOCK_JSON_TYPE_OBJECT) { ...error... }
 *     airlock_json_member(args, "options", &options);   // may be missing
 *     long long max;
 *     bool verbose;
 *     airlock_json_opt_int(options, "max", 100, &max);   // 100 when missing
 *     airlock_json_opt_bool(options, "verbose", false, &verbose);
 *
 *     struct airlock_json_iter it;
 *     struct airlock_json_value key, item;
 *     airlock_json_iter_begin(list, &it);
 *     while (airlock_json_next(&it, NULL, &item)) { ... }      // an array
 *     airlock_json_iter_begin(object, &it);
 *     while (airlock_json_next(&it, &key, &item)) { ... }      // an object's members
 *
 * A missing value (a member that is not there) has type AIRLOCK_JSON_TYPE_NONE, and every
 * accessor given one answers AIRLOCK_JSON_MISSING: options->max is MISSING when `options`
 * itself is absent, so optional nested objects need no special case. Values must come
 * from airlock_json_parse() (or from the accessors), which checked the whole document. */

enum airlock_json_type {
    AIRLOCK_JSON_TYPE_NONE = 0, /* no value: a member that is not there */
    AIRLOCK_JSON_TYPE_NULL,
    AIRLOCK_JSON_TYPE_BOOL,
    AIRLOCK_JSON_TYPE_NUMBER,
    AIRLOCK_JSON_TYPE_STRING,
    AIRLOCK_JSON_TYPE_ARRAY,
    AIRLOCK_JSON_TYPE_OBJECT,
};

/* One JSON value: its exact text, start[0..len) (e.g. `"a\n"`, `[1, 2]`, `true`).
 * start is NULL for a missing value. */
struct airlock_json_value {
    const char *start;
    size_t len;
};

/* Checks that json[0..len) is one well-formed JSON value (of any type; surrounding
 * whitespace allowed, nesting up to AIRLOCK_JSON_MAX_DEPTH) and stores it in *out.
 * Returns AIRLOCK_JSON_OK or AIRLOCK_JSON_INVALID (then *out is missing). Duplicate keys
 * are not an error here; airlock_json_member() reports the one asked for. */
static inline enum airlock_json_status airlock_json_parse(const char *json, size_t len,
                                                          struct airlock_json_value *out) {
    struct airlock_json_cursor c = {json, json + len};
    out->start = NULL;
    out->len = 0;
    airlock_json_skip_ws(&c);
    const char *start = c.p;
    if (airlock_json_skip_value(&c, 0) != AIRLOCK_JSON_OK) {
        return AIRLOCK_JSON_INVALID;
    }
    const char *end = c.p;
    airlock_json_skip_ws(&c);
    if (c.p != c.end) {
        return AIRLOCK_JSON_INVALID; /* something after the value */
    }
    out->start = start;
    out->len = (size_t)(end - start);
    return AIRLOCK_JSON_OK;
}

static inline enum airlock_json_type airlock_json_type(struct airlock_json_value v) {
    if (v.start == NULL || v.len == 0) {
        return AIRLOCK_JSON_TYPE_NONE;
    }
    switch (v.start[0]) {
    case '"': return AIRLOCK_JSON_TYPE_STRING;
    case '{': return AIRLOCK_JSON_TYPE_OBJECT;
    case '[': return AIRLOCK_JSON_TYPE_ARRAY;
    case 't':
    case 'f': return AIRLOCK_JSON_TYPE_BOOL;
    case 'n': return AIRLOCK_JSON_TYPE_NULL;
    default: return AIRLOCK_JSON_TYPE_NUMBER;
    }
}

/* A name for a type, for messages ("expected an integer, got a string"). */
static inline const char *airlock_json_type_name(enum airlock_json_type type) {
    switch (type) {
    case AIRLOCK_JSON_TYPE_NONE: return "nothing";
    case AIRLOCK_JSON_TYPE_NULL: return "null";
    case AIRLOCK_JSON_TYPE_BOOL: return "a boolean";
    case AIRLOCK_JSON_TYPE_NUMBER: return "a number";
    case AIRLOCK_JSON_TYPE_STRING: return "a string";
    case AIRLOCK_JSON_TYPE_ARRAY: return "an array";
    case AIRLOCK_JSON_TYPE_OBJECT: return "an object";
    }
    return "an unknown type";
}

/* Walks the elements of an array or the members of an object. */
struct airlock_json_iter {
    struct airlock_json_cursor c;
    bool object;
};

/* Starts walking `container`. Returns false (and the walk yields nothing) when it is not
 * an array or an object. */
static inline bool airlock_json_iter_begin(struct airlock_json_value container,
                                           struct airlock_json_iter *it) {
    enum airlock_json_type type = airlock_json_type(container);
    bool ok = type == AIRLOCK_JSON_TYPE_ARRAY || type == AIRLOCK_JSON_TYPE_OBJECT;
    it->object = type == AIRLOCK_JSON_TYPE_OBJECT;
    it->c.p = ok ? container.start + 1 : NULL; /* past the bracket */
    it->c.end = ok ? container.start + container.len : NULL;
    return ok;
}

/* Moves to the next element (or member) and stores it in *value, and for an object the
 * member's name, a string value, in *key (key may be NULL). Returns false at the end. */
static inline bool airlock_json_next(struct airlock_json_iter *it, struct airlock_json_value *key,
                                     struct airlock_json_value *value) {
    struct airlock_json_cursor *c = &it->c;
    if (c->p == NULL) {
        return false;
    }
    airlock_json_skip_ws(c);
    if (c->p < c->end && *c->p == ',') {
        c->p++;
        airlock_json_skip_ws(c);
    }
    if (c->p >= c->end || *c->p == ']' || *c->p == '}') {
        c->p = NULL;
        return false;
    }
    if (it->object) {
        size_t ignored;
        const char *name = c->p;
        if (airlock_json_scan_string(c, NULL, &ignored) != AIRLOCK_JSON_OK) {
            c->p = NULL;
            return false;
        }
        if (key != NULL) {
            key->start = name;
            key->len = (size_t)(c->p - name);
        }
        airlock_json_skip_ws(c);
        if (c->p >= c->end || *c->p != ':') {
            c->p = NULL;
            return false;
        }
        c->p++;
        airlock_json_skip_ws(c);
    } else if (key != NULL) {
        key->start = NULL;
        key->len = 0;
    }
    const char *start = c->p;
    if (airlock_json_skip_value(c, 1) != AIRLOCK_JSON_OK) {
        c->p = NULL;
        return false;
    }
    value->start = start;
    value->len = (size_t)(c->p - start);
    return true;
}

/* How many elements an array has, or members an object; 0 for any other value. */
static inline size_t airlock_json_length(struct airlock_json_value container) {
    struct airlock_json_iter it;
    struct airlock_json_value item;
    size_t n = 0;
    airlock_json_iter_begin(container, &it);
    while (airlock_json_next(&it, NULL, &item)) n++;
    return n;
}

/* Whether the string value s, decoded, is text[0..text_len). Allocates nothing. */
static inline bool airlock_json_string_equals(struct airlock_json_value s, const char *text,
                                              size_t text_len) {
    if (airlock_json_type(s) != AIRLOCK_JSON_TYPE_STRING || s.len < 2) {
        return false;
    }
    const char *p = s.start + 1;
    const char *end = s.start + s.len - 1; /* the closing quote */
    size_t i = 0;
    while (p < end) {
        if (*p != '\\') {
            if (i >= text_len || text[i] != *p) return false;
            i++;
            p++;
            continue;
        }
        char decoded[4];
        size_t decoded_len;
        size_t escape_len = airlock_json_unescape(p, end, decoded, &decoded_len);
        if (escape_len == 0 || text_len - i < decoded_len ||
            memcmp(text + i, decoded, decoded_len) != 0) {
            return false;
        }
        i += decoded_len;
        p += escape_len;
    }
    return i == text_len;
}

/* Finds the member `key` of `object` (keys are compared decoded: "p\u0061th" is "path").
 * Returns AIRLOCK_JSON_OK, AIRLOCK_JSON_MISSING (also when object is itself missing),
 * AIRLOCK_JSON_WRONG_TYPE when object is not an object, or AIRLOCK_JSON_DUPLICATE when the
 * key appears twice. *out is the member, or a missing value unless OK. */
static inline enum airlock_json_status airlock_json_member(struct airlock_json_value object,
                                                           const char *key,
                                                           struct airlock_json_value *out) {
    struct airlock_json_iter it;
    struct airlock_json_value name, value;
    size_t key_len = strlen(key);
    enum airlock_json_status status = AIRLOCK_JSON_MISSING;
    out->start = NULL;
    out->len = 0;
    if (airlock_json_type(object) == AIRLOCK_JSON_TYPE_NONE) {
        return AIRLOCK_JSON_MISSING;
    }
    if (airlock_json_type(object) != AIRLOCK_JSON_TYPE_OBJECT) {
        return AIRLOCK_JSON_WRONG_TYPE;
    }
    airlock_json_iter_begin(object, &it);
    while (airlock_json_next(&it, &name, &value)) {
        if (!airlock_json_string_equals(name, key, key_len)) continue;
        if (status == AIRLOCK_JSON_OK) {
            out->start = NULL;
            out->len = 0;
            return AIRLOCK_JSON_DUPLICATE;
        }
        *out = value;
        status = AIRLOCK_JSON_OK;
    }
    return status;
}

/* The boolean v. MISSING, WRONG_TYPE or OK. */
static inline enum airlock_json_status airlock_json_as_bool(struct airlock_json_value v,
                                                            bool *out) {
    enum airlock_json_type type = airlock_json_type(v);
    if (type == AIRLOCK_JSON_TYPE_NONE) return AIRLOCK_JSON_MISSING;
    if (type != AIRLOCK_JSON_TYPE_BOOL) return AIRLOCK_JSON_WRONG_TYPE;
    *out = v.start[0] == 't';
    return AIRLOCK_JSON_OK;
}

/* The integer v, exactly. A number written with a fraction or an exponent is accepted
 * when its value is whole (`3.0`, `1e3`), as JSON Schema's "integer" does. MISSING,
 * WRONG_TYPE (not a number, or not a whole one), OUT_OF_RANGE (not in long long) or OK. */
static inline enum airlock_json_status airlock_json_as_int(struct airlock_json_value v,
                                                           long long *out) {
    enum airlock_json_type type = airlock_json_type(v);
    if (type == AIRLOCK_JSON_TYPE_NONE) return AIRLOCK_JSON_MISSING;
    if (type != AIRLOCK_JSON_TYPE_NUMBER) return AIRLOCK_JSON_WRONG_TYPE;
    const char *p = v.start;
    const char *end = v.start + v.len;
    bool negative = p < end && *p == '-';
    if (negative) p++;
    /* The digits of the mantissa without its point, and the power of ten they carry. */
    const char *int_start = p;
    while (p < end && *p >= '0' && *p <= '9') p++;
    const char *int_end = p;
    const char *frac_start = p, *frac_end = p;
    if (p < end && *p == '.') {
        frac_start = ++p;
        while (p < end && *p >= '0' && *p <= '9') p++;
        frac_end = p;
    }
    long long exponent = 0;
    if (p < end && (*p == 'e' || *p == 'E')) {
        bool exp_negative = false;
        p++;
        if (p < end && (*p == '+' || *p == '-')) exp_negative = *p++ == '-';
        for (; p < end && *p >= '0' && *p <= '9'; p++) {
            if (exponent < 100000000000000000LL) exponent = exponent * 10 + (*p - '0'); /* saturates */
        }
        if (exp_negative) exponent = -exponent;
    }
    /* Drop the fraction's trailing zeros, then the fraction's digits must be covered by
     * the exponent. */
    while (frac_end > frac_start && frac_end[-1] == '0') frac_end--;
    exponent -= (long long)(frac_end - frac_start);
    /* Trailing zeros of the integer part pay for a negative exponent too. */
    const char *digits_end = frac_end > frac_start ? frac_end : int_end;
    bool all_zero = true;
    for (const char *q = int_start; q < int_end; q++) all_zero = all_zero && *q == '0';
    for (const char *q = frac_start; q < frac_end; q++) all_zero = all_zero && *q == '0';
    if (all_zero) {
        *out = 0;
        return AIRLOCK_JSON_OK;
    }
    if (frac_end == frac_start) {
        while (exponent < 0 && digits_end > int_start && digits_end[-1] == '0') {
            digits_end--;
            exponent++;
        }
    }
    if (exponent < 0) return AIRLOCK_JSON_WRONG_TYPE; /* not a whole number */
    unsigned long long limit = negative ? (unsigned long long)LLONG_MAX + 1 : LLONG_MAX;
    unsigned long long value = 0;
    for (const char *q = int_start; q < digits_end; q++) {
        if (*q == '.') continue;
        unsigned digit = (unsigned)(*q - '0');
        if (value > (limit - digit) / 10) return AIRLOCK_JSON_OUT_OF_RANGE;
        value = value * 10 + digit;
    }
    for (; exponent > 0; exponent--) {
        if (value > limit / 10) return AIRLOCK_JSON_OUT_OF_RANGE;
        value *= 10;
    }
    *out = negative ? -(long long)(value - 1) - 1 : (long long)value;
    return AIRLOCK_JSON_OK;
}

/* The number v as a double (the nearest one; huge exponents give +-HUGE_VAL). MISSING,
 * WRONG_TYPE, NO_MEMORY or OK. */
static inline enum airlock_json_status airlock_json_as_double(struct airlock_json_value v,
                                                              double *out) {
    enum airlock_json_type type = airlock_json_type(v);
    if (type == AIRLOCK_JSON_TYPE_NONE) return AIRLOCK_JSON_MISSING;
    if (type != AIRLOCK_JSON_TYPE_NUMBER) return AIRLOCK_JSON_WRONG_TYPE;
    /* strtod() needs a terminated copy: the number may end the document. */
    char small[64];
    char *text = v.len < sizeof small ? small : (char *)malloc(v.len + 1);
    if (text == NULL) return AIRLOCK_JSON_NO_MEMORY;
    memcpy(text, v.start, v.len);
    text[v.len] = '\0';
    *out = strtod(text, NULL);
    if (text != small) free(text);
    return AIRLOCK_JSON_OK;
}

/* The string v, decoded, NUL-terminated, in a buffer from malloc() (free() it), and its
 * length in *len (len may be NULL). It may contain NUL (from \u0000): compare *len with
 * strlen() before using it as a C string. MISSING, NOT_STRING, NO_MEMORY or OK. */
static inline enum airlock_json_status airlock_json_as_string(struct airlock_json_value v,
                                                              char **out, size_t *len) {
    enum airlock_json_type type = airlock_json_type(v);
    if (type == AIRLOCK_JSON_TYPE_NONE) return AIRLOCK_JSON_MISSING;
    if (type != AIRLOCK_JSON_TYPE_STRING) return AIRLOCK_JSON_NOT_STRING;
    struct airlock_json_cursor c = {v.start, v.start + v.len};
    size_t n;
    enum airlock_json_status status = airlock_json_string(&c, out, &n);
    if (status == AIRLOCK_JSON_OK && len != NULL) *len = n;
    return status;
}

/* The string v, decoded, into buf[0..size) with a NUL after it, and its length in *len
 * (len may be NULL). Allocates nothing. MISSING, NOT_STRING, OUT_OF_RANGE (it does not
 * fit with its NUL; buf is then untouched) or OK. */
static inline enum airlock_json_status airlock_json_copy_string(struct airlock_json_value v,
                                                                char *buf, size_t size,
                                                                size_t *len) {
    enum airlock_json_type type = airlock_json_type(v);
    if (type == AIRLOCK_JSON_TYPE_NONE) return AIRLOCK_JSON_MISSING;
    if (type != AIRLOCK_JSON_TYPE_STRING) return AIRLOCK_JSON_NOT_STRING;
    struct airlock_json_cursor c = {v.start, v.start + v.len};
    size_t n;
    if (airlock_json_scan_string(&c, NULL, &n) != AIRLOCK_JSON_OK) return AIRLOCK_JSON_INVALID;
    if (n >= size) return AIRLOCK_JSON_OUT_OF_RANGE;
    c.p = v.start;
    airlock_json_scan_string(&c, buf, &n);
    buf[n] = '\0';
    if (len != NULL) *len = n;
    return AIRLOCK_JSON_OK;
}

/* Optional members: `fallback` when the member (or `object` itself) is missing, else the
 * member's value, which must have the right type. OK, or the status of the member or of
 * its conversion (WRONG_TYPE, OUT_OF_RANGE, DUPLICATE...). */
static inline enum airlock_json_status airlock_json_opt_int(struct airlock_json_value object,
                                                            const char *key, long long fallback,
                                                            long long *out) {
    struct airlock_json_value v;
    enum airlock_json_status status = airlock_json_member(object, key, &v);
    if (status == AIRLOCK_JSON_MISSING) {
        *out = fallback;
        return AIRLOCK_JSON_OK;
    }
    return status != AIRLOCK_JSON_OK ? status : airlock_json_as_int(v, out);
}

static inline enum airlock_json_status airlock_json_opt_bool(struct airlock_json_value object,
                                                             const char *key, bool fallback,
                                                             bool *out) {
    struct airlock_json_value v;
    enum airlock_json_status status = airlock_json_member(object, key, &v);
    if (status == AIRLOCK_JSON_MISSING) {
        *out = fallback;
        return AIRLOCK_JSON_OK;
    }
    return status != AIRLOCK_JSON_OK ? status : airlock_json_as_bool(v, out);
}

static inline enum airlock_json_status airlock_json_opt_double(struct airlock_json_value object,
                                                               const char *key, double fallback,
                                                               double *out) {
    struct airlock_json_value v;
    enum airlock_json_status status = airlock_json_member(object, key, &v);
    if (status == AIRLOCK_JSON_MISSING) {
        *out = fallback;
        return AIRLOCK_JSON_OK;
    }
    return status != AIRLOCK_JSON_OK ? status : airlock_json_as_double(v, out);
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

/* ------------------------------------------------------------------------------------ */
/* Writing JSON: objects, arrays, numbers                                               */
/* ------------------------------------------------------------------------------------ */

/* A streaming JSON writer: it writes straight to a FILE (nothing is built in memory) and
 * puts the commas, colons and quotes where they belong; strings are escaped by
 * airlock_write_json_string(). A result document:
 *
 *     struct airlock_json_writer w;
 *     airlock_ok_begin();
 *     airlock_jw_init(&w, stdout);
 *     airlock_jw_begin_object(&w);
 *     airlock_jw_key(&w, "count");  airlock_jw_int(&w, 3);
 *     airlock_jw_key(&w, "names");  airlock_jw_begin_array(&w);
 *     airlock_jw_string(&w, "a\"b"); airlock_jw_bool(&w, true);
 *     airlock_jw_end_array(&w);
 *     airlock_jw_end_object(&w);
 *     if (airlock_jw_finish(&w) != 0) { ...a bug: unbalanced or misplaced calls... }
 *     return airlock_ok_end();
 *
 * writes {"ok":{"count":3,"names":["a\"b",true]}}. Once `ok` has started, a tool can no
 * longer turn it into an error: gather what may fail first, then write. Misuse (a value
 * where a key is due, an end that does not match, nesting past AIRLOCK_JSON_MAX_DEPTH,
 * a second top-level value) makes airlock_jw_finish() fail, and the writer writes
 * nothing more. */

#define AIRLOCK_JW_OBJECT 1u /* the container is an object */
#define AIRLOCK_JW_ITEMS 2u  /* the container has an item: the next one needs a comma */

struct airlock_json_writer {
    FILE *out;
    int depth;        /* open containers */
    bool after_key;   /* a key was written; its value is due */
    bool done;        /* the top-level value is complete */
    bool error;       /* the writer was misused */
    unsigned char open[AIRLOCK_JSON_MAX_DEPTH];
};

static inline void airlock_jw_init(struct airlock_json_writer *w, FILE *out) {
    memset(w, 0, sizeof *w);
    w->out = out;
}

/* Readies the writer for a value; false (and error) when a value is not allowed here. */
static inline bool airlock_jw_value_due(struct airlock_json_writer *w) {
    if (w->error || w->done) {
        w->error = true;
        return false;
    }
    if (w->depth > 0) {
        unsigned char *state = &w->open[w->depth - 1];
        if (*state & AIRLOCK_JW_OBJECT) {
            if (!w->after_key) {
                w->error = true;
                return false;
            }
        } else {
            if (*state & AIRLOCK_JW_ITEMS) fputc(',', w->out);
            *state |= AIRLOCK_JW_ITEMS;
        }
    }
    w->after_key = false;
    return true;
}

/* A scalar was written: at the top level, that is the whole document. */
static inline void airlock_jw_value_done(struct airlock_json_writer *w) {
    if (w->depth == 0) w->done = true;
}

/* The name of the next member of the current object; its value comes next. */
static inline void airlock_jw_key_n(struct airlock_json_writer *w, const char *key, size_t len) {
    if (w->error || w->depth == 0 || !(w->open[w->depth - 1] & AIRLOCK_JW_OBJECT) ||
        w->after_key) {
        w->error = true;
        return;
    }
    if (w->open[w->depth - 1] & AIRLOCK_JW_ITEMS) fputc(',', w->out);
    w->open[w->depth - 1] |= AIRLOCK_JW_ITEMS;
    airlock_write_json_string(w->out, key, len);
    fputc(':', w->out);
    w->after_key = true;
}

static inline void airlock_jw_key(struct airlock_json_writer *w, const char *key) {
    airlock_jw_key_n(w, key, strlen(key));
}

static inline void airlock_jw_begin(struct airlock_json_writer *w, bool object) {
    if (w->depth >= AIRLOCK_JSON_MAX_DEPTH) {
        w->error = true;
        return;
    }
    if (!airlock_jw_value_due(w)) return;
    w->open[w->depth++] = object ? AIRLOCK_JW_OBJECT : 0;
    fputc(object ? '{' : '[', w->out);
}

static inline void airlock_jw_end(struct airlock_json_writer *w, bool object) {
    if (w->error || w->depth == 0 || w->after_key ||
        ((w->open[w->depth - 1] & AIRLOCK_JW_OBJECT) != 0) != object) {
        w->error = true;
        return;
    }
    w->depth--;
    fputc(object ? '}' : ']', w->out);
    airlock_jw_value_done(w);
}

static inline void airlock_jw_begin_object(struct airlock_json_writer *w) { airlock_jw_begin(w, true); }
static inline void airlock_jw_end_object(struct airlock_json_writer *w) { airlock_jw_end(w, true); }
static inline void airlock_jw_begin_array(struct airlock_json_writer *w) { airlock_jw_begin(w, false); }
static inline void airlock_jw_end_array(struct airlock_json_writer *w) { airlock_jw_end(w, false); }

/* A string of len bytes (NUL and invalid UTF-8 included: see airlock_write_json_string). */
static inline void airlock_jw_string_n(struct airlock_json_writer *w, const char *s, size_t len) {
    if (!airlock_jw_value_due(w)) return;
    airlock_write_json_string(w->out, s, len);
    airlock_jw_value_done(w);
}

static inline void airlock_jw_string(struct airlock_json_writer *w, const char *s) {
    airlock_jw_string_n(w, s, strlen(s));
}

static inline void airlock_jw_int(struct airlock_json_writer *w, long long n) {
    if (!airlock_jw_value_due(w)) return;
    fprintf(w->out, "%lld", n);
    airlock_jw_value_done(w);
}

static inline void airlock_jw_uint(struct airlock_json_writer *w, unsigned long long n) {
    if (!airlock_jw_value_due(w)) return;
    fprintf(w->out, "%llu", n);
    airlock_jw_value_done(w);
}

/* A double, in the fewest digits (up to 17) that read back as the same value: 0.1, not
 * 0.10000000000000001. JSON has no NaN or infinity: those are written as null. */
static inline void airlock_jw_double(struct airlock_json_writer *w, double d) {
    if (!airlock_jw_value_due(w)) return;
    if (isfinite(d)) {
        char text[32];
        for (int digits = 15; digits <= 17; digits++) {
            snprintf(text, sizeof text, "%.*g", digits, d);
            if (strtod(text, NULL) == d) break;
        }
        fputs(text, w->out);
    } else {
        fputs("null", w->out);
    }
    airlock_jw_value_done(w);
}

static inline void airlock_jw_bool(struct airlock_json_writer *w, bool b) {
    if (!airlock_jw_value_due(w)) return;
    fputs(b ? "true" : "false", w->out);
    airlock_jw_value_done(w);
}

static inline void airlock_jw_null(struct airlock_json_writer *w) {
    if (!airlock_jw_value_due(w)) return;
    fputs("null", w->out);
    airlock_jw_value_done(w);
}

/* A value from airlock_json_parse() (or its accessors), copied as it was written. */
static inline void airlock_jw_value(struct airlock_json_writer *w, struct airlock_json_value v) {
    if (v.start == NULL) {
        w->error = true;
        return;
    }
    if (!airlock_jw_value_due(w)) return;
    fwrite(v.start, 1, v.len, w->out);
    airlock_jw_value_done(w);
}

/* 0 when exactly one complete value was written and the writer was never misused, else
 * -1. (Whether the FILE could be written is airlock_ok_end()'s business, or ferror()'s.) */
static inline int airlock_jw_finish(const struct airlock_json_writer *w) {
    return w->error || !w->done ? -1 : 0;
}

#endif /* AIRLOCK_TOOL_H */
