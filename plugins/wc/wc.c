/*
 * wc - counts the lines, words and bytes of a workspace file, like `wc`.
 *
 * The first-party example of a tool in C: wasi-libc plus sdk/c/airlock_tool.h, nothing
 * else. Built by scripts/build-wasm.sh; tested natively by plugins/wc/test.sh.
 *
 * Lines are newline characters, as `wc -l` counts them (a last line without one is not
 * counted); words are runs of bytes that are not ASCII whitespace, as `wc -w` counts
 * them in the C locale.
 */
/* fileno() is POSIX, not ISO C. */
#define _POSIX_C_SOURCE 200809L

#include <sys/stat.h>

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "airlock_tool.h"

/* The longest workspace-relative path accepted. PATH_MAX-sized, which wasi-libc and
 * Linux both handle; a longer path cannot name a file on either. */
#define WC_MAX_PATH 4096

/* Arguments are `{"path": "..."}`: a few hundred bytes. A bound far above that keeps a
 * runaway input from using the guest's memory. */
#define WC_MAX_INPUT_BYTES ((size_t)1024 * 1024)

struct wc_counts {
    uint64_t lines, words, bytes;
};

static int wc_is_space(unsigned char ch) {
    return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\v' || ch == '\f' || ch == '\r';
}

static int wc_count(FILE *file, struct wc_counts *counts) {
    /* Static: wasm-ld gives a wasm32-wasi program a 64 KiB stack, which a block this
     * size on it would overflow (silently, into the data below it). */
    static unsigned char buf[64 * 1024];
    int in_word = 0;
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, file)) > 0) {
        for (size_t i = 0; i < n; i++) {
            if (buf[i] == '\n') counts->lines++;
            if (wc_is_space(buf[i])) {
                in_word = 0;
            } else if (!in_word) {
                in_word = 1;
                counts->words++;
            }
        }
        counts->bytes += n;
    }
    return ferror(file) ? -1 : 0;
}

/* An error result for a failed open or read, worded so the model knows what to fix. */
static int wc_file_error(int err, const char *shown) {
    switch (err) {
    case ENOENT:
        return airlock_emit_errorf(0, "no such file or directory: %s", shown);
    case EISDIR:
        return airlock_emit_errorf(0, "`%s` is a directory; wc counts a file", shown);
    case EACCES:
    case EPERM:
#ifdef ENOTCAPABLE
    case ENOTCAPABLE:
#endif
        return airlock_emit_errorf(
            0, "permission denied: %s (the tool's sandbox profile does not grant this access)",
            shown);
    default:
        return airlock_emit_errorf(0, "%s: %s", shown, strerror(err));
    }
}

int main(void) {
    size_t len;
    char *args = airlock_read_stdin(WC_MAX_INPUT_BYTES, &len);
    if (args == NULL) {
        return errno == EFBIG
                   ? airlock_emit_error("the arguments are larger than wc's 1 MiB limit", 0)
                   : airlock_emit_errorf(0, "could not read the arguments from stdin: %s",
                                         strerror(errno));
    }

    char *path;
    size_t path_len;
    enum airlock_json_status status = airlock_json_get_string(args, len, "path", &path, &path_len);
    free(args);
    if (status != AIRLOCK_JSON_OK) {
        return airlock_emit_errorf(0, "invalid arguments: `path`: %s",
                                   airlock_json_status_message(status));
    }

    char rel[WC_MAX_PATH];
    const char *refused = airlock_workspace_path(path, path_len, rel, sizeof rel);
    if (refused != NULL) {
        int code = airlock_emit_errorf(0, "path `%s` %s", path, refused);
        free(path);
        return code;
    }
    free(path);

    char real[sizeof AIRLOCK_WORKSPACE_ROOT + WC_MAX_PATH];
    snprintf(real, sizeof real, "%s/%s", AIRLOCK_WORKSPACE_ROOT, rel);
    FILE *file = fopen(real, "rb");
    if (file == NULL) {
        return wc_file_error(errno, rel);
    }
    /* fopen() opens a directory for reading on some systems; say so before reading. */
    struct stat st;
    if (fstat(fileno(file), &st) == 0 && S_ISDIR(st.st_mode)) {
        fclose(file);
        return wc_file_error(EISDIR, rel);
    }
    struct wc_counts counts = {0, 0, 0};
    if (wc_count(file, &counts) != 0) {
        int err = errno;
        fclose(file);
        return wc_file_error(err, rel);
    }
    fclose(file);

    airlock_ok_begin();
    fputs("{\"path\":", stdout);
    airlock_write_json_string(stdout, rel, strlen(rel));
    printf(",\"lines\":%llu,\"words\":%llu,\"bytes\":%llu}", (unsigned long long)counts.lines,
           (unsigned long long)counts.words, (unsigned long long)counts.bytes);
    return airlock_ok_end();
}
