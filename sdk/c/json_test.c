/*
 * Tests the JSON value reader and writer of airlock_tool.h (airlock_json_parse() and
 * friends, airlock_jw_*()). Run by sdk/c/test.sh, natively and with sanitizers.
 */
#define _POSIX_C_SOURCE 200809L /* open_memstream() */
#include "airlock_tool.h"

static int failures;

#define CHECK(cond)                                                                        \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            fprintf(stderr, "%s:%d: FAIL %s\n", __FILE__, __LINE__, #cond);                \
            failures++;                                                                    \
        }                                                                                  \
    } while (0)

static struct airlock_json_value parse(const char *text) {
    struct airlock_json_value v;
    CHECK(airlock_json_parse(text, strlen(text), &v) == AIRLOCK_JSON_OK);
    return v;
}

static int parses(const char *text) {
    struct airlock_json_value v;
    return airlock_json_parse(text, strlen(text), &v) == AIRLOCK_JSON_OK;
}

static enum airlock_json_status int_of(const char *text, long long *out) {
    struct airlock_json_value v;
    if (airlock_json_parse(text, strlen(text), &v) != AIRLOCK_JSON_OK) return AIRLOCK_JSON_INVALID;
    return airlock_json_as_int(v, out);
}

static void test_parse(void) {
    CHECK(parses("{}"));
    CHECK(parses(" [1, 2.5e-3, \"x\", true, false, null, {\"a\": []}] "));
    CHECK(parses("7"));
    CHECK(parses("\"only a string\""));
    CHECK(!parses(""));
    CHECK(!parses("{} {}"));
    CHECK(!parses("[1,]"));
    CHECK(!parses("{\"a\" 1}"));
    CHECK(!parses("01"));
    CHECK(!parses("[\"\\udc00\"]"));
    char deep[300];
    memset(deep, '[', 100);
    memset(deep + 100, ']', 100);
    deep[200] = '\0';
    CHECK(!parses(deep)); /* deeper than AIRLOCK_JSON_MAX_DEPTH */
    struct airlock_json_value v = parse("  {\"a\": 1}  ");
    CHECK(v.len == 8 && memcmp(v.start, "{\"a\": 1}", 8) == 0);
}

static void test_access(void) {
    const char *doc = "{\"pattern\": \"*.t\\u0078t\", \"options\": {\"max_files\": 2, \"per_file\""
                      ": false, \"ratio\": -1.5e2, \"tags\": [\"a\", \"b\\n\", 3]}, "
                      "\"p\\u0061th\": \"x\", \"dup\": 1, \"dup\": 2}";
    struct airlock_json_value args = parse(doc), options, tags, v, key;
    CHECK(airlock_json_type(args) == AIRLOCK_JSON_TYPE_OBJECT);
    CHECK(airlock_json_length(args) == 5);

    char *s;
    size_t len;
    CHECK(airlock_json_member(args, "pattern", &v) == AIRLOCK_JSON_OK);
    CHECK(airlock_json_as_string(v, &s, &len) == AIRLOCK_JSON_OK);
    CHECK(len == 5 && strcmp(s, "*.txt") == 0);
    free(s);
    char small[6], tiny[5];
    CHECK(airlock_json_copy_string(v, small, sizeof small, &len) == AIRLOCK_JSON_OK);
    CHECK(strcmp(small, "*.txt") == 0);
    CHECK(airlock_json_copy_string(v, tiny, sizeof tiny, &len) == AIRLOCK_JSON_OUT_OF_RANGE);
    CHECK(airlock_json_member(args, "path", &v) == AIRLOCK_JSON_OK); /* escaped key */
    CHECK(airlock_json_member(args, "pat", &v) == AIRLOCK_JSON_MISSING);
    CHECK(v.start == NULL && airlock_json_type(v) == AIRLOCK_JSON_TYPE_NONE);
    CHECK(airlock_json_member(args, "dup", &v) == AIRLOCK_JSON_DUPLICATE);

    CHECK(airlock_json_member(args, "options", &options) == AIRLOCK_JSON_OK);
    long long n = 0;
    bool b = true;
    double d = 0;
    CHECK(airlock_json_opt_int(options, "max_files", 100, &n) == AIRLOCK_JSON_OK && n == 2);
    CHECK(airlock_json_opt_int(options, "absent", 100, &n) == AIRLOCK_JSON_OK && n == 100);
    CHECK(airlock_json_opt_bool(options, "per_file", true, &b) == AIRLOCK_JSON_OK && !b);
    CHECK(airlock_json_opt_double(options, "ratio", 0, &d) == AIRLOCK_JSON_OK && d == -150.0);
    CHECK(airlock_json_opt_int(options, "ratio", 0, &n) == AIRLOCK_JSON_OK && n == -150);
    CHECK(airlock_json_opt_int(options, "per_file", 0, &n) == AIRLOCK_JSON_WRONG_TYPE);
    CHECK(airlock_json_opt_bool(options, "max_files", true, &b) == AIRLOCK_JSON_WRONG_TYPE);
    CHECK(airlock_json_member(options, "max_files", &v) == AIRLOCK_JSON_OK);
    CHECK(airlock_json_as_string(v, &s, &len) == AIRLOCK_JSON_NOT_STRING);
    /* A member of a missing object is missing, so its default applies. */
    struct airlock_json_value none;
    CHECK(airlock_json_member(args, "nothing", &none) == AIRLOCK_JSON_MISSING);
    CHECK(airlock_json_opt_int(none, "max_files", 100, &n) == AIRLOCK_JSON_OK && n == 100);
    CHECK(airlock_json_as_int(none, &n) == AIRLOCK_JSON_MISSING);
    /* A member of something that is not an object. */
    CHECK(airlock_json_member(args, "pattern", &v) == AIRLOCK_JSON_OK);
    CHECK(airlock_json_opt_int(v, "x", 1, &n) == AIRLOCK_JSON_WRONG_TYPE);

    /* Arrays. */
    CHECK(airlock_json_member(options, "tags", &tags) == AIRLOCK_JSON_OK);
    CHECK(airlock_json_type(tags) == AIRLOCK_JSON_TYPE_ARRAY && airlock_json_length(tags) == 3);
    struct airlock_json_iter it;
    CHECK(airlock_json_iter_begin(tags, &it));
    int i = 0;
    while (airlock_json_next(&it, &key, &v)) {
        CHECK(key.start == NULL);
        if (i == 0) CHECK(airlock_json_string_equals(v, "a", 1));
        if (i == 1) CHECK(airlock_json_string_equals(v, "b\n", 2));
        if (i == 2) CHECK(airlock_json_as_int(v, &n) == AIRLOCK_JSON_OK && n == 3);
        i++;
    }
    CHECK(i == 3);
    CHECK(!airlock_json_next(&it, NULL, &v)); /* stays at the end */
    /* Object members, in order. */
    CHECK(airlock_json_iter_begin(options, &it));
    CHECK(airlock_json_next(&it, &key, &v) && airlock_json_string_equals(key, "max_files", 9));
    CHECK(airlock_json_next(&it, &key, &v) && airlock_json_string_equals(key, "per_file", 8));
    CHECK(!airlock_json_iter_begin(v, &it) && !airlock_json_next(&it, &key, &v));
    CHECK(airlock_json_length(parse("[]")) == 0 && airlock_json_length(parse(" { } ")) == 0);

    /* A NUL inside a string, and strings that only look alike. */
    v = parse("\"a\\u0000b\"");
    CHECK(airlock_json_string_equals(v, "a\0b", 3) && !airlock_json_string_equals(v, "a", 1));
    CHECK(!airlock_json_string_equals(parse("\"ab\""), "abc", 3));
    CHECK(airlock_json_string_equals(parse("\"\\ud83d\\ude00\""), "\xf0\x9f\x98\x80", 4));
}

static void test_int(void) {
    long long n = 0;
    CHECK(int_of("0", &n) == AIRLOCK_JSON_OK && n == 0);
    CHECK(int_of("-0", &n) == AIRLOCK_JSON_OK && n == 0);
    CHECK(int_of("0.0e5", &n) == AIRLOCK_JSON_OK && n == 0);
    CHECK(int_of("42", &n) == AIRLOCK_JSON_OK && n == 42);
    CHECK(int_of("3.0", &n) == AIRLOCK_JSON_OK && n == 3);
    CHECK(int_of("1e3", &n) == AIRLOCK_JSON_OK && n == 1000);
    CHECK(int_of("1.25e2", &n) == AIRLOCK_JSON_OK && n == 125);
    CHECK(int_of("1200e-2", &n) == AIRLOCK_JSON_OK && n == 12);
    CHECK(int_of("1.5", &n) == AIRLOCK_JSON_WRONG_TYPE);
    CHECK(int_of("15e-1", &n) == AIRLOCK_JSON_WRONG_TYPE);
    CHECK(int_of("1e-99999999999999999999", &n) == AIRLOCK_JSON_WRONG_TYPE);
    CHECK(int_of("9223372036854775807", &n) == AIRLOCK_JSON_OK && n == LLONG_MAX);
    CHECK(int_of("-9223372036854775808", &n) == AIRLOCK_JSON_OK && n == LLONG_MIN);
    CHECK(int_of("9223372036854775808", &n) == AIRLOCK_JSON_OUT_OF_RANGE);
    CHECK(int_of("-9223372036854775809", &n) == AIRLOCK_JSON_OUT_OF_RANGE);
    CHECK(int_of("1e19", &n) == AIRLOCK_JSON_OUT_OF_RANGE);
    CHECK(int_of("1e99999999999999999999", &n) == AIRLOCK_JSON_OUT_OF_RANGE);
    CHECK(int_of("\"1\"", &n) == AIRLOCK_JSON_WRONG_TYPE);
    CHECK(int_of("true", &n) == AIRLOCK_JSON_WRONG_TYPE);
    double d = 0;
    CHECK(airlock_json_as_double(parse("1e400"), &d) == AIRLOCK_JSON_OK && isinf(d));
    CHECK(airlock_json_as_double(parse("null"), &d) == AIRLOCK_JSON_WRONG_TYPE);
}

/* Runs `write` on a writer over a temporary file; checks the text and finish(). */
static void expect_written(void (*write)(struct airlock_json_writer *), const char *want,
                           int want_finish) {
    char *got = NULL;
    size_t n = 0;
    FILE *file = open_memstream(&got, &n);
    struct airlock_json_writer w;
    airlock_jw_init(&w, file);
    write(&w);
    fclose(file);
    if (got == NULL || strcmp(got, want) != 0) {
        fprintf(stderr, "writer: got  %s\n        want %s\n", got, want);
        failures++;
    }
    free(got);
    CHECK(airlock_jw_finish(&w) == want_finish);
}

static void write_nested(struct airlock_json_writer *w) {
    airlock_jw_begin_object(w);
    airlock_jw_key(w, "totals");
    airlock_jw_begin_object(w);
    airlock_jw_key(w, "files");
    airlock_jw_uint(w, 2);
    airlock_jw_key(w, "neg");
    airlock_jw_int(w, LLONG_MIN);
    airlock_jw_end_object(w);
    airlock_jw_key(w, "truncated");
    airlock_jw_bool(w, false);
    airlock_jw_key_n(w, "k\"\n\0", 4);
    airlock_jw_begin_array(w);
    airlock_jw_string(w, "tab\there \xe9 \xc3\xa9 \x01");
    airlock_jw_null(w);
    airlock_jw_double(w, 0.1);
    airlock_jw_double(w, 1.0 / 3.0);
    airlock_jw_double(w, 1e300 * 1e300);
    airlock_jw_begin_array(w);
    airlock_jw_end_array(w);
    airlock_jw_begin_object(w);
    airlock_jw_end_object(w);
    airlock_jw_value(w, parse(" [1, {\"a\": true}] "));
    airlock_jw_end_array(w);
    airlock_jw_end_object(w);
}

static void write_scalar(struct airlock_json_writer *w) { airlock_jw_int(w, -5); }
static void write_two(struct airlock_json_writer *w) {
    airlock_jw_int(w, 1);
    airlock_jw_int(w, 2);
}
static void write_value_for_key(struct airlock_json_writer *w) {
    airlock_jw_begin_object(w);
    airlock_jw_int(w, 1);
    airlock_jw_end_object(w);
}
static void write_key_in_array(struct airlock_json_writer *w) {
    airlock_jw_begin_array(w);
    airlock_jw_key(w, "a");
}
static void write_mismatch(struct airlock_json_writer *w) {
    airlock_jw_begin_array(w);
    airlock_jw_end_object(w);
}
static void write_unclosed(struct airlock_json_writer *w) {
    airlock_jw_begin_object(w);
    airlock_jw_key(w, "a");
}
static void write_too_deep(struct airlock_json_writer *w) {
    for (int i = 0; i <= AIRLOCK_JSON_MAX_DEPTH; i++) airlock_jw_begin_array(w);
}

static void test_writer(void) {
    expect_written(write_nested,
                   "{\"totals\":{\"files\":2,\"neg\":-9223372036854775808},\"truncated\":false,"
                   "\"k\\\"\\n\\u0000\":[\"tab\\there \\ufffd \xc3\xa9 \\u0001\",null,0.1,"
                   "0.3333333333333333,null,[],{},[1, {\"a\": true}]]}",
                   0);
    expect_written(write_scalar, "-5", 0);
    expect_written(write_two, "1", -1);
    expect_written(write_value_for_key, "{", -1); /* nothing after a misuse */
    expect_written(write_key_in_array, "[", -1);
    expect_written(write_mismatch, "[", -1);
    expect_written(write_unclosed, "{\"a\":", -1);
    char deep[AIRLOCK_JSON_MAX_DEPTH + 1];
    memset(deep, '[', AIRLOCK_JSON_MAX_DEPTH);
    deep[AIRLOCK_JSON_MAX_DEPTH] = '\0';
    expect_written(write_too_deep, deep, -1);
}

int main(void) {
    test_parse();
    test_access();
    test_int();
    test_writer();
    printf("json_test: %s\n", failures ? "FAILED" : "ok");
    return failures != 0;
}
