// airlock_tool.hpp - the airlock tool ABI (sdk/ABI.md) for tools written in C++17.
//
// Single header, nothing beyond the C++ standard library (and no exceptions: WASI has
// none, so this builds with -fno-exceptions; running out of memory aborts the tool).
// Builds for wasm32-wasi with clang++, libc++ and wasi-libc, and natively.
//
//   airlock::run(call)      the whole stdio ABI: reads the arguments (stdin, one JSON
//                           object), calls `call`, writes its one result document to
//                           stdout and returns main()'s exit status.
//   airlock::json::Value    a JSON value: parse(), type tests, get(key), items(),
//                           members(), as_int()/as_double()/as_bool()/as_string(), and
//                           builders (Value::object().set(...), Value::array().push(...))
//                           that dump() writes back as JSON text.
//   airlock::Error          what `call` returns when the call ran but could not do what
//                           was asked (status TOOL_ERROR).
//
//     airlock::Result call(const airlock::json::Value &args) {
//         const airlock::json::Value *name = args.get("name");
//         if (name == nullptr || !name->is_string()) return airlock::Error{"`name` is required"};
//         return airlock::json::Value::object().set("greeting", "hello " + name->as_string());
//     }
//     int main() { return airlock::run(call); }
//
// JSON details: the whole document is checked (RFC 8259), nesting up to kMaxDepth levels;
// a key that appears twice in an object makes it invalid; strings are UTF-8 with every
// escape decoded (\uXXXX surrogate pairs included, a lone surrogate is invalid) and may
// hold NUL. Numbers keep their text, so integers are exact at any size: as_int() is the
// value when it is whole and fits in long long, as JSON Schema's "integer" counts `3.0`
// and `1e3`. dump() escapes what JSON requires and writes bytes that are not valid UTF-8
// as U+FFFD, so the result is always valid JSON.
#ifndef AIRLOCK_TOOL_HPP
#define AIRLOCK_TOOL_HPP

#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace airlock {

// The most argument bytes a tool reads: 16 MiB, as the other SDKs.
inline constexpr std::size_t kMaxInputBytes = std::size_t{16} * 1024 * 1024;

namespace json {

// Nesting the parser follows before refusing a document (it recurses once per level).
inline constexpr int kMaxDepth = 64;

enum class Type { Null, Bool, Number, String, Array, Object };

class Value {
  public:
    Value() = default; // null
    Value(std::nullptr_t) {}
    Value(bool b) : type_(Type::Bool), bool_(b) {}
    // Any integer type (not bool, not char): written exactly.
    template <typename T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool> &&
                                               !std::is_same_v<T, char>,
                                           int> = 0>
    Value(T n) : type_(Type::Number), text_(std::to_string(n)) {}
    // A double: the fewest digits that read back as the same value; NaN and infinities,
    // which JSON has no words for, become null.
    Value(double d) {
        if (!std::isfinite(d)) return;
        type_ = Type::Number;
        char text[32];
        for (int digits = 15; digits <= 17; digits++) {
            std::snprintf(text, sizeof text, "%.*g", digits, d);
            if (std::strtod(text, nullptr) == d) break;
        }
        text_ = text;
    }
    Value(std::string s) : type_(Type::String), text_(std::move(s)) {}
    Value(std::string_view s) : type_(Type::String), text_(s) {}
    Value(const char *s) : type_(Type::String), text_(s) {}

    static Value array() { return Value(Type::Array); }
    static Value object() { return Value(Type::Object); }
    // A number from its JSON text, which must be a valid JSON number.
    static Value from_number_text(std::string text) {
        Value v(Type::Number);
        v.text_ = std::move(text);
        return v;
    }

    // Parses one JSON document (surrounding whitespace allowed). On failure returns
    // nothing and, when `error` is given, says what is wrong and where.
    static std::optional<Value> parse(std::string_view text, std::string *error = nullptr);

    Type type() const { return type_; }
    bool is_null() const { return type_ == Type::Null; }
    bool is_bool() const { return type_ == Type::Bool; }
    bool is_number() const { return type_ == Type::Number; }
    bool is_string() const { return type_ == Type::String; }
    bool is_array() const { return type_ == Type::Array; }
    bool is_object() const { return type_ == Type::Object; }

    // The member `key` of an object; nullptr when it is missing or this is no object.
    const Value *get(std::string_view key) const {
        if (type_ != Type::Object) return nullptr;
        for (std::size_t i = 0; i < keys_.size(); i++) {
            if (keys_[i] == key) return &items_[i];
        }
        return nullptr;
    }
    // The elements of an array, or the values of an object's members (empty otherwise).
    const std::vector<Value> &items() const { return items_; }
    // The keys of an object's members, in order, matching items() (empty otherwise).
    const std::vector<std::string> &keys() const { return keys_; }
    // Elements of an array, or members of an object; 0 otherwise.
    std::size_t size() const { return items_.size(); }

    std::optional<bool> as_bool() const {
        if (type_ != Type::Bool) return std::nullopt;
        return bool_;
    }
    // The string's bytes (empty when this is not a string: test is_string() first).
    const std::string &as_string() const {
        static const std::string empty;
        return type_ == Type::String ? text_ : empty;
    }
    // The number's JSON text (empty when this is not a number).
    const std::string &number_text() const {
        static const std::string empty;
        return type_ == Type::Number ? text_ : empty;
    }
    std::optional<double> as_double() const {
        if (type_ != Type::Number) return std::nullopt;
        return std::strtod(text_.c_str(), nullptr);
    }
    // The number when it is whole and fits in long long; nothing otherwise.
    std::optional<long long> as_int() const;

    // Builders. set() replaces a member with that key or appends one; push() appends an
    // element. Both turn a null value into an object or an array, and return *this so
    // calls chain. (On a value of another type they do nothing.)
    Value &set(std::string key, Value value) {
        if (type_ == Type::Null) type_ = Type::Object;
        if (type_ != Type::Object) return *this;
        for (std::size_t i = 0; i < keys_.size(); i++) {
            if (keys_[i] == key) {
                items_[i] = std::move(value);
                return *this;
            }
        }
        keys_.push_back(std::move(key));
        items_.push_back(std::move(value));
        return *this;
    }
    Value &push(Value value) {
        if (type_ == Type::Null) type_ = Type::Array;
        if (type_ == Type::Array) items_.push_back(std::move(value));
        return *this;
    }

    // The value as compact JSON text.
    std::string dump() const {
        std::string out;
        dump_to(out);
        return out;
    }
    void dump_to(std::string &out) const;

  private:
    explicit Value(Type type) : type_(type) {}
    friend class Parser;

    Type type_ = Type::Null;
    bool bool_ = false;
    std::string text_;              // a string's bytes, or a number's JSON text
    std::vector<Value> items_;      // an array's elements, or an object's member values
    std::vector<std::string> keys_; // an object's member keys
};

// Appends s as a JSON string literal, quotes included.
inline void write_string(std::string &out, std::string_view s);

namespace detail {

// Length of the valid UTF-8 sequence at s, or 0 if there is none.
inline std::size_t utf8_sequence(std::string_view s) {
    auto b = static_cast<unsigned char>(s[0]);
    std::size_t need;
    unsigned char lo = 0x80, hi = 0xBF;
    if (b < 0x80) return 1;
    if (b >= 0xC2 && b <= 0xDF) {
        need = 2;
    } else if (b >= 0xE0 && b <= 0xEF) {
        need = 3;
        if (b == 0xE0) lo = 0xA0;      // no overlong forms
        else if (b == 0xED) hi = 0x9F; // no surrogates
    } else if (b >= 0xF0 && b <= 0xF4) {
        need = 4;
        if (b == 0xF0) lo = 0x90;
        else if (b == 0xF4) hi = 0x8F; // nothing past U+10FFFF
    } else {
        return 0;
    }
    if (s.size() < need) return 0;
    auto s1 = static_cast<unsigned char>(s[1]);
    if (s1 < lo || s1 > hi) return 0;
    for (std::size_t i = 2; i < need; i++) {
        auto c = static_cast<unsigned char>(s[i]);
        if (c < 0x80 || c > 0xBF) return 0;
    }
    return need;
}

inline void append_utf8(std::string &out, unsigned cp) {
    if (cp < 0x80) {
        out += static_cast<char>(cp);
    } else if (cp < 0x800) {
        out += static_cast<char>(0xC0 | (cp >> 6));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        out += static_cast<char>(0xE0 | (cp >> 12));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
        out += static_cast<char>(0xF0 | (cp >> 18));
        out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    }
}

} // namespace detail

class Parser {
  public:
    explicit Parser(std::string_view text) : text_(text) {}

    std::optional<Value> document(std::string *error) {
        Value v;
        skip_ws();
        if (value(v, 0)) {
            skip_ws();
            if (pos_ == text_.size()) return v;
            fail("unexpected text after the JSON value");
        }
        if (error != nullptr) *error = error_ + " at byte " + std::to_string(pos_);
        return std::nullopt;
    }

  private:
    bool fail(const char *why) {
        if (error_.empty()) error_ = why;
        return false;
    }
    bool at_end() const { return pos_ >= text_.size(); }
    char peek() const { return at_end() ? '\0' : text_[pos_]; }
    void skip_ws() {
        while (!at_end() && (peek() == ' ' || peek() == '\t' || peek() == '\n' || peek() == '\r')) {
            pos_++;
        }
    }
    bool literal(std::string_view word) {
        if (text_.substr(pos_, word.size()) != word) return fail("invalid literal");
        pos_ += word.size();
        return true;
    }
    bool hex4(unsigned &out) {
        if (text_.size() - pos_ < 4) return fail("truncated \\u escape");
        out = 0;
        for (int i = 0; i < 4; i++) {
            char c = text_[pos_++];
            out <<= 4;
            if (c >= '0' && c <= '9') out |= static_cast<unsigned>(c - '0');
            else if (c >= 'a' && c <= 'f') out |= static_cast<unsigned>(c - 'a' + 10);
            else if (c >= 'A' && c <= 'F') out |= static_cast<unsigned>(c - 'A' + 10);
            else return fail("invalid \\u escape");
        }
        return true;
    }
    bool string(std::string &out) {
        if (peek() != '"') return fail("expected a string");
        pos_++;
        for (;;) {
            if (at_end()) return fail("unterminated string");
            auto c = static_cast<unsigned char>(text_[pos_++]);
            if (c == '"') return true;
            if (c < 0x20) return fail("unescaped control character in a string");
            if (c != '\\') {
                out += static_cast<char>(c);
                continue;
            }
            if (at_end()) return fail("unterminated string");
            switch (text_[pos_++]) {
            case '"': out += '"'; break;
            case '\\': out += '\\'; break;
            case '/': out += '/'; break;
            case 'b': out += '\b'; break;
            case 'f': out += '\f'; break;
            case 'n': out += '\n'; break;
            case 'r': out += '\r'; break;
            case 't': out += '\t'; break;
            case 'u': {
                unsigned cp;
                if (!hex4(cp)) return false;
                if (cp >= 0xDC00 && cp <= 0xDFFF) return fail("lone low surrogate");
                if (cp >= 0xD800 && cp <= 0xDBFF) {
                    unsigned low;
                    if (text_.substr(pos_, 2) != "\\u") return fail("lone high surrogate");
                    pos_ += 2;
                    if (!hex4(low)) return false;
                    if (low < 0xDC00 || low > 0xDFFF) return fail("lone high surrogate");
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
                }
                detail::append_utf8(out, cp);
                break;
            }
            default:
                return fail("invalid escape");
            }
        }
    }
    bool digits() {
        std::size_t start = pos_;
        while (peek() >= '0' && peek() <= '9') pos_++;
        return pos_ > start || fail("expected a digit");
    }
    bool number(Value &out) {
        std::size_t start = pos_;
        if (peek() == '-') pos_++;
        if (peek() == '0') {
            pos_++; // no leading zeros
        } else if (!digits()) {
            return false;
        }
        if (peek() == '.') {
            pos_++;
            if (!digits()) return false;
        }
        if (peek() == 'e' || peek() == 'E') {
            pos_++;
            if (peek() == '+' || peek() == '-') pos_++;
            if (!digits()) return false;
        }
        out = Value::from_number_text(std::string(text_.substr(start, pos_ - start)));
        return true;
    }
    bool value(Value &out, int depth) {
        switch (peek()) {
        case '"':
            out = Value(Type::String);
            return string(out.text_);
        case 't':
            out = Value(true);
            return literal("true");
        case 'f':
            out = Value(false);
            return literal("false");
        case 'n':
            out = Value();
            return literal("null");
        case '[':
        case '{': {
            bool object = peek() == '{';
            char close = object ? '}' : ']';
            if (depth >= kMaxDepth) return fail("nested too deeply");
            out = Value(object ? Type::Object : Type::Array);
            pos_++;
            skip_ws();
            if (peek() == close) {
                pos_++;
                return true;
            }
            for (;;) {
                skip_ws();
                if (object) {
                    std::string key;
                    if (!string(key)) return false;
                    for (const std::string &seen : out.keys_) {
                        if (seen == key) return fail("duplicate key");
                    }
                    out.keys_.push_back(std::move(key));
                    skip_ws();
                    if (peek() != ':') return fail("expected ':'");
                    pos_++;
                    skip_ws();
                }
                out.items_.emplace_back();
                if (!value(out.items_.back(), depth + 1)) return false;
                skip_ws();
                if (peek() == close) {
                    pos_++;
                    return true;
                }
                if (peek() != ',') return fail(object ? "expected ',' or '}'" : "expected ',' or ']'");
                pos_++;
            }
        }
        default:
            if (peek() == '-' || (peek() >= '0' && peek() <= '9')) return number(out);
            return fail(at_end() ? "unexpected end of input" : "unexpected character");
        }
    }

    std::string_view text_;
    std::size_t pos_ = 0;
    std::string error_;
};

inline std::optional<Value> Value::parse(std::string_view text, std::string *error) {
    return Parser(text).document(error);
}

inline std::optional<long long> Value::as_int() const {
    if (type_ != Type::Number) return std::nullopt;
    // The mantissa's digits without the point, and the power of ten they carry.
    std::string_view t = text_;
    bool negative = !t.empty() && t[0] == '-';
    if (negative) t.remove_prefix(1);
    std::string digits;
    long long exponent = 0;
    std::size_t i = 0;
    for (; i < t.size() && t[i] >= '0' && t[i] <= '9'; i++) digits += t[i];
    if (i < t.size() && t[i] == '.') {
        for (i++; i < t.size() && t[i] >= '0' && t[i] <= '9'; i++) {
            digits += t[i];
            exponent--;
        }
    }
    if (i < t.size() && (t[i] == 'e' || t[i] == 'E')) {
        i++;
        bool exp_negative = i < t.size() && t[i] == '-';
        if (i < t.size() && (t[i] == '+' || t[i] == '-')) i++;
        long long e = 0;
        for (; i < t.size(); i++) {
            if (e < 100000000000000000LL) e = e * 10 + (t[i] - '0'); // saturates
        }
        exponent += exp_negative ? -e : e;
    }
    std::size_t first = digits.find_first_not_of('0');
    if (first == std::string::npos) return 0LL; // zero, however written
    digits.erase(0, first);
    while (exponent < 0 && !digits.empty() && digits.back() == '0') {
        digits.pop_back();
        exponent++;
    }
    if (exponent < 0) return std::nullopt; // not whole
    if (exponent > 19) return std::nullopt; // too large
    digits.append(static_cast<std::size_t>(exponent), '0');
    unsigned long long limit = negative ? static_cast<unsigned long long>(LLONG_MAX) + 1 : LLONG_MAX;
    unsigned long long value = 0;
    for (char c : digits) {
        auto digit = static_cast<unsigned>(c - '0');
        if (value > (limit - digit) / 10) return std::nullopt;
        value = value * 10 + digit;
    }
    return negative ? -static_cast<long long>(value - 1) - 1 : static_cast<long long>(value);
}

inline void write_string(std::string &out, std::string_view s) {
    static const char hex[] = "0123456789abcdef";
    out += '"';
    std::size_t i = 0;
    while (i < s.size()) {
        auto c = static_cast<unsigned char>(s[i]);
        switch (c) {
        case '"': out += "\\\""; i++; continue;
        case '\\': out += "\\\\"; i++; continue;
        case '\n': out += "\\n"; i++; continue;
        case '\r': out += "\\r"; i++; continue;
        case '\t': out += "\\t"; i++; continue;
        case '\b': out += "\\b"; i++; continue;
        case '\f': out += "\\f"; i++; continue;
        default: break;
        }
        if (c < 0x20) {
            out += "\\u00";
            out += hex[c >> 4];
            out += hex[c & 0xF];
            i++;
            continue;
        }
        std::size_t n = detail::utf8_sequence(s.substr(i));
        if (n == 0) {
            out += "\\ufffd"; // not UTF-8: keep the document valid
            i++;
            continue;
        }
        out.append(s.substr(i, n));
        i += n;
    }
    out += '"';
}

inline void Value::dump_to(std::string &out) const {
    switch (type_) {
    case Type::Null: out += "null"; return;
    case Type::Bool: out += bool_ ? "true" : "false"; return;
    case Type::Number: out += text_; return;
    case Type::String: write_string(out, text_); return;
    case Type::Array:
        out += '[';
        for (std::size_t i = 0; i < items_.size(); i++) {
            if (i > 0) out += ',';
            items_[i].dump_to(out);
        }
        out += ']';
        return;
    case Type::Object:
        out += '{';
        for (std::size_t i = 0; i < items_.size(); i++) {
            if (i > 0) out += ',';
            write_string(out, keys_[i]);
            out += ':';
            items_[i].dump_to(out);
        }
        out += '}';
        return;
    }
}

} // namespace json

// A call that ran but could not do what was asked: status TOOL_ERROR, with `message`
// for a person and a model; `retryable` when the same call may succeed later.
struct Error {
    std::string message;
    bool retryable = false;
};

// What a tool's call returns: a JSON value (`ok`) or an Error.
class Result {
  public:
    Result(json::Value ok) : ok_(std::move(ok)) {}
    Result(Error error) : error_(std::move(error)) {}
    bool is_ok() const { return !error_.has_value(); }
    const json::Value &value() const { return ok_; }
    const Error &error() const { return *error_; }

  private:
    json::Value ok_;
    std::optional<Error> error_;
};

// Reads stdin to EOF, at most max_bytes. Nothing on a read error or when there is more.
inline std::optional<std::string> read_stdin(std::size_t max_bytes = kMaxInputBytes) {
    std::string data;
    char block[16384];
    std::size_t n;
    while ((n = std::fread(block, 1, sizeof block, stdin)) > 0) {
        if (data.size() + n > max_bytes) return std::nullopt;
        data.append(block, n);
    }
    if (std::ferror(stdin)) return std::nullopt;
    return data;
}

// Writes a result document to stdout: {"ok": ...} or {"error": {...}}. Returns the exit
// status for main(): 0, as the ABI asks for both, or 1 if stdout could not be written.
inline int emit(const Result &result) {
    std::string out;
    if (result.is_ok()) {
        out = "{\"ok\":";
        result.value().dump_to(out);
    } else {
        out = "{\"error\":{\"message\":";
        json::write_string(out, result.error().message);
        out += result.error().retryable ? ",\"retryable\":true}" : ",\"retryable\":false}";
    }
    out += "}\n";
    if (std::fwrite(out.data(), 1, out.size(), stdout) != out.size() || std::fflush(stdout) != 0) {
        std::fputs("airlock_tool: could not write the result to stdout\n", stderr);
        return 1;
    }
    return 0;
}

// The whole stdio ABI around `call`, a function (or lambda) taking the arguments object
// (const json::Value &) and returning a Result: return its value from main().
template <typename Call> int run(Call &&call) {
    std::optional<std::string> input = read_stdin();
    if (!input) {
        return emit(Error{"could not read the arguments from stdin (or they are larger than 16 MiB)"});
    }
    std::string why;
    std::optional<json::Value> args = json::Value::parse(*input, &why);
    if (!args) return emit(Error{"the arguments are not valid JSON: " + why});
    if (!args->is_object()) return emit(Error{"the arguments are not a JSON object"});
    return emit(call(static_cast<const json::Value &>(*args)));
}

} // namespace airlock

#endif // AIRLOCK_TOOL_HPP
