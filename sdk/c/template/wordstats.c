/*
 * Counts the lines, words and bytes of the workspace files whose path matches a pattern.
 *
 *     {"pattern": "*.txt", "options": {"max_files": 100, "per_file": true}}
 *
 * A stdio tool (sdk/ABI.md): the arguments arrive on stdin as one JSON object, already
 * checked against schema.json by the daemon; the one result document goes to stdout. The
 * workspace is the current directory. airlock_tool.h, next to this file, reads and writes
 * the JSON.
 */
#define _DEFAULT_SOURCE /* strdup() and DT_* when built natively with glibc (tests) */
#include <dirent.h>
#include <sys/stat.h>

#include "airlock_tool.h"

/* ------------------------------------------------------------------------------------ */
/* Matching paths                                                                       */
/* ------------------------------------------------------------------------------------ */

/* Bytes of the character at s[0..len): a UTF-8 sequence, or one byte that is not one. */
static size_t char_len(const char *s, size_t len) {
    size_t n = airlock_utf8_sequence((const unsigned char *)s, len);
    return n != 0 ? n : 1;
}

/* Whether the whole of path matches pattern: `*` any run of characters (`/` included),
 * `?` exactly one character, anything else itself. Backtracks to the last `*` only, which
 * is enough for this language and linear in practice. */
static bool matches(const char *pattern, const char *path) {
    const char *p = pattern, *s = path;
    const char *p_end = pattern + strlen(pattern), *s_end = path + strlen(path);
    const char *star = NULL, *star_s = NULL;
    while (s < s_end) {
        if (p < p_end && *p == '*') {
            star = ++p;
            star_s = s;
        } else if (p < p_end && *p == '?') {
            p++;
            s += char_len(s, (size_t)(s_end - s));
        } else if (p < p_end && *p == *s) {
            p++;
            s++;
        } else if (star != NULL) {
            /* Let the last `*` take one more character and try again from there. */
            star_s += char_len(star_s, (size_t)(s_end - star_s));
            p = star;
            s = star_s;
        } else {
            return false;
        }
    }
    while (p < p_end && *p == '*') p++;
    return p == p_end;
}

/* ------------------------------------------------------------------------------------ */
/* Walking the workspace                                                                */
/* ------------------------------------------------------------------------------------ */

struct path_list {
    char **items;
    size_t len, cap;
};

static bool list_push(struct path_list *list, char *path) {
    if (list->len == list->cap) {
        size_t cap = list->cap ? list->cap * 2 : 64;
        char **items = realloc(list->items, cap * sizeof *items);
        if (items == NULL) return false;
        list->items = items;
        list->cap = cap;
    }
    list->items[list->len++] = path;
    return true;
}

static void list_free(struct path_list *list) {
    for (size_t i = 0; i < list->len; i++) free(list->items[i]);
    free(list->items);
}

/* The directories being walked, root first: a symlink back to one of them is not
 * followed again, so a loop of links ends. */
struct ancestor {
    dev_t dev;
    ino_t ino;
    const struct ancestor *parent;
};

static char *join(const char *dir, const char *name) {
    size_t dir_len = strlen(dir), name_len = strlen(name);
    char *path = malloc(dir_len + 1 + name_len + 1);
    if (path == NULL) return NULL;
    memcpy(path, dir, dir_len);
    path[dir_len] = '/';
    memcpy(path + dir_len + 1, name, name_len + 1);
    return path;
}

/* Adds the regular files below `dir` (a relative path, "" for the root) whose path
 * matches the pattern. Names starting with `.` are skipped, directories included;
 * symlinks are followed as long as they stay in the workspace (the sandbox refuses the
 * others), other entries are skipped. Returns 0, or an errno for a directory that cannot
 * be read. */
static int walk(const char *dir, const struct ancestor *parent, const char *pattern,
                struct path_list *found) {
    struct stat st;
    const char *open_as = *dir ? dir : ".";
    if (stat(open_as, &st) != 0) return errno;
    for (const struct ancestor *a = parent; a != NULL; a = a->parent) {
        if (a->dev == st.st_dev && a->ino == st.st_ino) return 0; /* a loop */
    }
    struct ancestor self = {st.st_dev, st.st_ino, parent};
    DIR *d = opendir(open_as);
    if (d == NULL) return errno;
    int err = 0;
    struct dirent *entry;
    while (err == 0 && (errno = 0, entry = readdir(d)) != NULL) {
        if (entry->d_name[0] == '.') continue;
        char *path = *dir ? join(dir, entry->d_name) : strdup(entry->d_name);
        if (path == NULL) {
            err = ENOMEM;
            break;
        }
        unsigned char type = entry->d_type;
        if (type == DT_LNK || type == DT_UNKNOWN) {
            /* Where the link leads; a broken link, or one out of the sandbox, is skipped. */
            type = stat(path, &st) != 0 ? DT_UNKNOWN
                   : S_ISDIR(st.st_mode) ? DT_DIR
                   : S_ISREG(st.st_mode) ? DT_REG
                                         : DT_UNKNOWN;
        }
        if (type == DT_DIR) {
            err = walk(path, &self, pattern, found);
            free(path);
        } else if (type == DT_REG && matches(pattern, path)) {
            if (!list_push(found, path)) {
                free(path);
                err = ENOMEM;
            }
        } else {
            free(path);
        }
    }
    if (err == 0 && errno != 0) err = errno; /* readdir() failed */
    closedir(d);
    return err;
}

static int compare_paths(const void *a, const void *b) {
    /* strcmp() compares bytes as unsigned char: byte order, as the spec asks. */
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* ------------------------------------------------------------------------------------ */
/* Counting                                                                             */
/* ------------------------------------------------------------------------------------ */

struct counts {
    unsigned long long lines, words, bytes;
};

static bool is_space(unsigned char ch) {
    return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' || ch == '\v' || ch == '\f';
}

/* Counts one file, read as bytes in blocks. Returns 0 or an errno. */
static int count_file(const char *path, struct counts *out) {
    static unsigned char block[64 * 1024]; /* static: the stack is only 64 KiB */
    FILE *file = fopen(path, "rb");
    if (file == NULL) return errno;
    struct counts c = {0, 0, 0};
    bool in_word = false;
    unsigned char last = '\n';
    size_t n;
    while ((n = fread(block, 1, sizeof block, file)) > 0) {
        for (size_t i = 0; i < n; i++) {
            if (block[i] == '\n') c.lines++;
            if (is_space(block[i])) {
                in_word = false;
            } else if (!in_word) {
                in_word = true;
                c.words++;
            }
        }
        c.bytes += n;
        last = block[n - 1];
    }
    int err = ferror(file) ? (errno ? errno : EIO) : 0;
    fclose(file);
    if (last != '\n') c.lines++; /* a last line without its newline */
    *out = c;
    return err;
}

/* ------------------------------------------------------------------------------------ */
/* The call                                                                             */
/* ------------------------------------------------------------------------------------ */

/* An error result for arguments the schema should have refused. */
static int invalid(const char *field, enum airlock_json_status status) {
    return airlock_emit_errorf(0, "invalid arguments: `%s`: %s", field,
                               airlock_json_status_message(status));
}

/* Writes the result: totals, truncated, and each file's figures when per_file. */
static int write_result(const struct path_list *found, size_t counted,
                        const struct counts *each, bool per_file) {
    struct counts totals = {0, 0, 0};
    for (size_t i = 0; i < counted; i++) {
        totals.lines += each[i].lines;
        totals.words += each[i].words;
        totals.bytes += each[i].bytes;
    }
    struct airlock_json_writer w;
    airlock_ok_begin();
    airlock_jw_init(&w, stdout);
    airlock_jw_begin_object(&w);
    airlock_jw_key(&w, "totals");
    airlock_jw_begin_object(&w);
    airlock_jw_key(&w, "files");
    airlock_jw_uint(&w, counted);
    airlock_jw_key(&w, "lines");
    airlock_jw_uint(&w, totals.lines);
    airlock_jw_key(&w, "words");
    airlock_jw_uint(&w, totals.words);
    airlock_jw_key(&w, "bytes");
    airlock_jw_uint(&w, totals.bytes);
    airlock_jw_end_object(&w);
    airlock_jw_key(&w, "truncated");
    airlock_jw_bool(&w, found->len > counted);
    if (per_file) {
        airlock_jw_key(&w, "files");
        airlock_jw_begin_array(&w);
        for (size_t i = 0; i < counted; i++) {
            airlock_jw_begin_object(&w);
            airlock_jw_key(&w, "path");
            airlock_jw_string(&w, found->items[i]);
            airlock_jw_key(&w, "lines");
            airlock_jw_uint(&w, each[i].lines);
            airlock_jw_key(&w, "words");
            airlock_jw_uint(&w, each[i].words);
            airlock_jw_key(&w, "bytes");
            airlock_jw_uint(&w, each[i].bytes);
            airlock_jw_end_object(&w);
        }
        airlock_jw_end_array(&w);
    }
    airlock_jw_end_object(&w);
    if (airlock_jw_finish(&w) != 0) {
        fputs("the result document is malformed: a bug in this tool\n", stderr);
        return 1;
    }
    return airlock_ok_end();
}

/* Reads the arguments, finds and counts the files, writes the one result document.
 * Returns the exit status: 0 for `ok` and `error` results alike. */
static int run(char *input, size_t len, struct path_list *found, char **pattern,
               struct counts **each) {
    struct airlock_json_value args, options, field;
    if (airlock_json_parse(input, len, &args) != AIRLOCK_JSON_OK ||
        airlock_json_type(args) != AIRLOCK_JSON_TYPE_OBJECT) {
        return airlock_emit_error("the arguments are not one JSON object", 0);
    }

    /* pattern: a string, required. */
    size_t pattern_len = 0;
    enum airlock_json_status status = airlock_json_member(args, "pattern", &field);
    if (status == AIRLOCK_JSON_OK) status = airlock_json_as_string(field, pattern, &pattern_len);
    if (status != AIRLOCK_JSON_OK) return invalid("pattern", status);

    /* options: an object, optional, and so is each of its members. */
    long long max_files;
    bool per_file;
    status = airlock_json_member(args, "options", &options);
    if (status == AIRLOCK_JSON_OK && airlock_json_type(options) != AIRLOCK_JSON_TYPE_OBJECT) {
        status = AIRLOCK_JSON_WRONG_TYPE;
    }
    if (status != AIRLOCK_JSON_OK && status != AIRLOCK_JSON_MISSING) {
        return invalid("options", status);
    }
    status = airlock_json_opt_int(options, "max_files", 100, &max_files);
    if (status == AIRLOCK_JSON_OK && max_files < 1) status = AIRLOCK_JSON_OUT_OF_RANGE;
    if (status != AIRLOCK_JSON_OK) return invalid("options.max_files", status);
    status = airlock_json_opt_bool(options, "per_file", true, &per_file);
    if (status != AIRLOCK_JSON_OK) return invalid("options.per_file", status);

    /* The workspace is the current directory, when the tool's profile grants one. */
    DIR *root = opendir(".");
    if (root == NULL) return airlock_emit_error("this tool needs a workspace", 0);
    closedir(root);
    int err = walk("", NULL, *pattern, found);
    if (err != 0) {
        return airlock_emit_errorf(0, "could not walk the workspace: %s", strerror(err));
    }
    /* (A pattern with a NUL in it matches no path.) */
    if (found->len == 0 || strlen(*pattern) != pattern_len) {
        return airlock_emit_errorf(0, "no file matches %s", *pattern);
    }
    qsort(found->items, found->len, sizeof *found->items, compare_paths);

    /* Count everything first: once the `ok` document has started, it cannot become an
     * error any more. */
    size_t counted = found->len < (unsigned long long)max_files ? found->len : (size_t)max_files;
    *each = calloc(counted, sizeof **each);
    if (*each == NULL) return airlock_emit_error("out of memory", 0);
    for (size_t i = 0; i < counted; i++) {
        if ((err = count_file(found->items[i], &(*each)[i])) != 0) {
            return airlock_emit_errorf(0, "could not read %s: %s", found->items[i], strerror(err));
        }
    }
    return write_result(found, counted, *each, per_file);
}

int main(void) {
    size_t len;
    char *input = airlock_read_stdin(AIRLOCK_MAX_INPUT_BYTES, &len);
    if (input == NULL) {
        return airlock_emit_errorf(0, "could not read the arguments: %s", strerror(errno));
    }
    struct path_list found = {NULL, 0, 0};
    char *pattern = NULL;
    struct counts *each = NULL;
    int code = run(input, len, &found, &pattern, &each);
    free(each);
    free(pattern);
    list_free(&found);
    free(input);
    return code;
}
