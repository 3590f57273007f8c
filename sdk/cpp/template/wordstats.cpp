// Counts the lines, words and bytes of the workspace files whose path matches a pattern.
//
//     {"pattern": "*.txt", "options": {"max_files": 100, "per_file": true}}
//
// A stdio tool (sdk/ABI.md): airlock::run() reads the arguments from stdin (one JSON
// object, already checked against schema.json by the daemon), calls call() and writes its
// result to stdout. The workspace is the current directory. airlock_tool.hpp, next to
// this file, is the whole SDK.
#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "airlock_tool.hpp"

namespace {

using airlock::Error;
using airlock::Result;
using airlock::json::Value;

// Bytes of the character at the start of s: a UTF-8 sequence, or one byte that is not one.
std::size_t char_len(std::string_view s) {
    std::size_t n = airlock::json::detail::utf8_sequence(s);
    return n != 0 ? n : 1;
}

// Whether the whole of path matches pattern: `*` any run of characters (`/` included),
// `?` exactly one character, anything else itself. Backtracks to the last `*` only, which
// is enough for this language.
bool matches(std::string_view pattern, std::string_view path) {
    std::size_t p = 0, s = 0;
    std::size_t star = std::string_view::npos, star_s = 0;
    while (s < path.size()) {
        if (p < pattern.size() && pattern[p] == '*') {
            star = ++p;
            star_s = s;
        } else if (p < pattern.size() && pattern[p] == '?') {
            p++;
            s += char_len(path.substr(s));
        } else if (p < pattern.size() && pattern[p] == path[s]) {
            p++;
            s++;
        } else if (star != std::string_view::npos) {
            // Let the last `*` take one more character and try again from there.
            star_s += char_len(path.substr(star_s));
            p = star;
            s = star_s;
        } else {
            return false;
        }
    }
    while (p < pattern.size() && pattern[p] == '*') p++;
    return p == pattern.size();
}

// A directory being walked; a symlink back to one of them is not followed again.
struct Ancestor {
    dev_t dev;
    ino_t ino;
    const Ancestor *parent;
};

// Adds the regular files below `dir` ("" for the workspace root) whose path matches the
// pattern. Names starting with `.` are skipped, directories included; symlinks are
// followed as long as they stay in the workspace (the sandbox refuses the others);
// other entries are skipped. Returns 0, or the errno of a directory it cannot read.
// (std::filesystem is not built into Debian's libc++ for WASI: dirent does the walk.)
int walk(const std::string &dir, const Ancestor *parent, std::string_view pattern,
         std::vector<std::string> &found) {
    const char *open_as = dir.empty() ? "." : dir.c_str();
    struct stat st;
    if (stat(open_as, &st) != 0) return errno;
    for (const Ancestor *a = parent; a != nullptr; a = a->parent) {
        if (a->dev == st.st_dev && a->ino == st.st_ino) return 0; // a loop
    }
    Ancestor self{st.st_dev, st.st_ino, parent};
    DIR *d = opendir(open_as);
    if (d == nullptr) return errno;
    int err = 0;
    while (err == 0) {
        errno = 0;
        const dirent *entry = readdir(d);
        if (entry == nullptr) {
            err = errno; // 0 at the end
            break;
        }
        if (entry->d_name[0] == '.') continue;
        std::string path = dir.empty() ? entry->d_name : dir + "/" + entry->d_name;
        unsigned char type = entry->d_type;
        if (type == DT_LNK || type == DT_UNKNOWN) {
            // Where the link leads; a broken link, or one out of the sandbox, is skipped.
            type = stat(path.c_str(), &st) != 0 ? DT_UNKNOWN
                   : S_ISDIR(st.st_mode)        ? DT_DIR
                   : S_ISREG(st.st_mode)        ? DT_REG
                                                : DT_UNKNOWN;
        }
        if (type == DT_DIR) {
            err = walk(path, &self, pattern, found);
        } else if (type == DT_REG && matches(pattern, path)) {
            found.push_back(std::move(path));
        }
    }
    closedir(d);
    return err;
}

struct Counts {
    unsigned long long lines = 0, words = 0, bytes = 0;
};

bool is_space(unsigned char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

// Counts one file, read as bytes in blocks. Returns 0 or an errno.
int count_file(const std::string &path, Counts &out) {
    static unsigned char block[64 * 1024]; // static: the stack is only 64 KiB
    std::FILE *file = std::fopen(path.c_str(), "rb");
    if (file == nullptr) return errno;
    Counts c;
    bool in_word = false;
    unsigned char last = '\n';
    std::size_t n;
    while ((n = std::fread(block, 1, sizeof block, file)) > 0) {
        for (std::size_t i = 0; i < n; i++) {
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
    int err = std::ferror(file) ? (errno != 0 ? errno : EIO) : 0;
    std::fclose(file);
    if (last != '\n') c.lines++; // a last line without its newline
    out = c;
    return err;
}

Error invalid(const std::string &field, const char *why) {
    return Error{"invalid arguments: `" + field + "` " + why};
}

Result call(const Value &args) {
    const Value *pattern = args.get("pattern");
    if (pattern == nullptr || !pattern->is_string()) return invalid("pattern", "must be a string");
    const Value *options = args.get("options");
    if (options != nullptr && !options->is_object()) return invalid("options", "must be an object");
    long long max_files = 100;
    bool per_file = true;
    if (const Value *v = options ? options->get("max_files") : nullptr) {
        std::optional<long long> n = v->as_int();
        if (!n || *n < 1) return invalid("options.max_files", "must be an integer >= 1");
        max_files = *n;
    }
    if (const Value *v = options ? options->get("per_file") : nullptr) {
        if (!v->is_bool()) return invalid("options.per_file", "must be a boolean");
        per_file = *v->as_bool();
    }

    // The workspace is the current directory, when the tool's profile grants one.
    if (DIR *root = opendir(".")) {
        closedir(root);
    } else {
        return Error{"this tool needs a workspace"};
    }
    std::vector<std::string> found;
    if (int err = walk("", nullptr, pattern->as_string(), found)) {
        return Error{std::string("could not walk the workspace: ") + std::strerror(err)};
    }
    if (found.empty()) return Error{"no file matches " + pattern->as_string()};
    std::sort(found.begin(), found.end()); // std::string compares as unsigned bytes

    std::size_t counted = std::min<unsigned long long>(found.size(), max_files);
    Counts totals;
    Value files = Value::array();
    for (std::size_t i = 0; i < counted; i++) {
        Counts c;
        if (int err = count_file(found[i], c)) {
            return Error{"could not read " + found[i] + ": " + std::strerror(err)};
        }
        totals.lines += c.lines;
        totals.words += c.words;
        totals.bytes += c.bytes;
        if (per_file) files.push(Value::object().set("path", found[i]).set("lines", c.lines)
                                     .set("words", c.words).set("bytes", c.bytes));
    }
    Value result = Value::object()
                       .set("totals", Value::object().set("files", counted).set("lines", totals.lines)
                                          .set("words", totals.words).set("bytes", totals.bytes))
                       .set("truncated", found.size() > counted);
    if (per_file) result.set("files", std::move(files));
    return result;
}

} // namespace

int main() { return airlock::run(call); }
