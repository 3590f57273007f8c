// Tests airlock_tool.hpp's JSON value (parse, accessors, builders, dump). Run by
// sdk/cpp/test.sh, natively and with sanitizers.
#include <cstdio>
#include <string>

#include "airlock_tool.hpp"

using airlock::json::Type;
using airlock::json::Value;

namespace {

int failures = 0;

#define CHECK(cond)                                                                        \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            std::fprintf(stderr, "%s:%d: FAIL %s\n", __FILE__, __LINE__, #cond);           \
            failures++;                                                                    \
        }                                                                                  \
    } while (0)

bool parses(const std::string &text) { return Value::parse(text).has_value(); }

Value parse(const std::string &text) {
    std::string why;
    std::optional<Value> v = Value::parse(text, &why);
    if (!v) {
        std::fprintf(stderr, "could not parse %s: %s\n", text.c_str(), why.c_str());
        failures++;
        return Value();
    }
    return *v;
}

std::optional<long long> int_of(const std::string &text) { return parse(text).as_int(); }

void test_parse() {
    CHECK(parses("{}"));
    CHECK(parses(" [1, 2.5e-3, \"x\", true, false, null, {\"a\": []}] "));
    CHECK(parses("7") && parses("\"s\"") && parses("-0"));
    CHECK(!parses("") && !parses("{} {}") && !parses("[1,]") && !parses("{\"a\" 1}"));
    CHECK(!parses("01") && !parses("1.") && !parses("-") && !parses("tru") && !parses("[1 2]"));
    CHECK(!parses("[\"\\udc00\"]") && !parses("[\"\\ud800\"]") && !parses("[\"\\ud800\\u0041\"]"));
    CHECK(!parses("\"a\tb\"") && !parses("\"\\x\"") && !parses("\"abc"));
    CHECK(!parses("{\"a\": 1, \"a\": 2}")); // duplicate keys
    CHECK(!parses(std::string(100, '[') + std::string(100, ']')));
    CHECK(parses(std::string(63, '[') + std::string(63, ']')));
    std::string why;
    CHECK(!Value::parse("{\"a\": x}", &why) && why == "unexpected character at byte 6");
}

void test_access() {
    Value args = parse("{\"pattern\": \"*.t\\u0078t\", \"options\": {\"max_files\": 2, "
                       "\"per_file\": false, \"tags\": [\"a\", \"b\\n\", 3]}, "
                       "\"p\\u0061th\": \"\\ud83d\\ude00\\u0000\"}");
    CHECK(args.is_object() && args.size() == 3);
    CHECK(args.get("pattern") && args.get("pattern")->as_string() == "*.txt");
    CHECK(args.get("path") && args.get("path")->as_string() == std::string("\xf0\x9f\x98\x80\0", 5));
    CHECK(args.get("nope") == nullptr);
    const Value *options = args.get("options");
    CHECK(options && options->get("max_files")->as_int() == 2);
    CHECK(options->get("per_file")->as_bool() == false);
    CHECK(!options->get("max_files")->as_bool().has_value());
    CHECK(!options->get("per_file")->as_int().has_value());
    CHECK(options->get("per_file")->as_string().empty());
    const Value *tags = options->get("tags");
    CHECK(tags && tags->is_array() && tags->size() == 3);
    CHECK(tags->items()[1].as_string() == "b\n" && tags->items()[2].as_int() == 3);
    CHECK(tags->get("a") == nullptr && tags->keys().empty());
    CHECK(options->keys().size() == 3 && options->keys()[2] == "tags");
    CHECK(parse("null").is_null() && parse("1").type() == Type::Number);
}

void test_int() {
    CHECK(int_of("0") == 0 && int_of("-0") == 0 && int_of("0.0e5") == 0);
    CHECK(int_of("42") == 42 && int_of("3.0") == 3 && int_of("1e3") == 1000);
    CHECK(int_of("1.25e2") == 125 && int_of("1200e-2") == 12 && int_of("-7E+1") == -70);
    CHECK(!int_of("1.5") && !int_of("15e-1") && !int_of("1e-99999999999999999999"));
    CHECK(int_of("9223372036854775807") == LLONG_MAX);
    CHECK(int_of("-9223372036854775808") == LLONG_MIN);
    CHECK(!int_of("9223372036854775808") && !int_of("-9223372036854775809"));
    CHECK(!int_of("1e19") && !int_of("1e99999999999999999999") && !int_of("\"1\""));
    CHECK(parse("-1.5e2").as_double() == -150.0 && !parse("true").as_double());
}

void test_dump() {
    Value v = Value::object()
                  .set("totals", Value::object().set("files", 2).set("neg", LLONG_MIN))
                  .set("truncated", false)
                  .set(std::string("k\"\n\0", 4), Value::array()
                                                       .push("tab\there \xe9 \xc3\xa9 \x01")
                                                       .push(nullptr)
                                                       .push(0.1)
                                                       .push(1.0 / 3.0)
                                                       .push(1e300 * 1e300)
                                                       .push(Value::array())
                                                       .push(Value::object())
                                                       .push(std::string_view("sv"))
                                                       .push(std::size_t{7})
                                                       .push(-3));
    v.set("truncated", true); // replaces
    std::string want = "{\"totals\":{\"files\":2,\"neg\":-9223372036854775808},\"truncated\":true,"
                       "\"k\\\"\\n\\u0000\":[\"tab\\there \\ufffd \xc3\xa9 \\u0001\",null,0.1,"
                       "0.3333333333333333,null,[],{},\"sv\",7,-3]}";
    CHECK(v.dump() == want);
    if (v.dump() != want) std::fprintf(stderr, "got  %s\nwant %s\n", v.dump().c_str(), want.c_str());
    // Parsed numbers keep their text; a round trip is exact.
    std::string text = "[1e400,12345678901234567890,-0.0,{\"a\":\"\\u00e9\"}]";
    CHECK(parse(text).dump() == "[1e400,12345678901234567890,-0.0,{\"a\":\"\xc3\xa9\"}]");
    CHECK(Value().push(1).dump() == "[1]" && Value().set("a", 1).dump() == "{\"a\":1}");
    CHECK(Value(5).push(1).dump() == "5"); // builders do nothing on other types
}

void test_result() {
    airlock::Result ok = Value::object().set("a", 1);
    airlock::Result err = airlock::Error{"no", true};
    CHECK(ok.is_ok() && ok.value().get("a")->as_int() == 1);
    CHECK(!err.is_ok() && err.error().message == "no" && err.error().retryable);
}

} // namespace

int main() {
    test_parse();
    test_access();
    test_int();
    test_dump();
    test_result();
    std::printf("json_test: %s\n", failures ? "FAILED" : "ok");
    return failures != 0;
}
