// A small JSON parser and writer: enough for a tool's arguments and results.

export const enum Kind { Null, Bool, Number, String, Array, Object }

/** A parsed JSON value. Objects keep their keys in order; `get` returns the last duplicate. */
export class JSONValue {
  kind: Kind = Kind.Null;
  bool: bool = false;
  num: f64 = 0;
  str: string = "";
  /** The items of an array, or the values of an object. */
  items: Array<JSONValue> = [];
  /** The keys of an object (`keys[i]` goes with `items[i]`). */
  keys: Array<string> = [];

  /** The member `key` of an object, or null (also when this is not an object). */
  get(key: string): JSONValue | null {
    if (this.kind != Kind.Object) return null;
    for (let i = this.keys.length - 1; i >= 0; i--) {
      if (this.keys[i] == key) return this.items[i];
    }
    return null;
  }
}

/** Parses one JSON document. After `parse()`, `error` is null or says what is wrong. */
export class JSONParser {
  pos: i32 = 0;
  error: string | null = null;
  constructor(public text: string) {}

  parse(): JSONValue {
    const value = this.value(0);
    this.space();
    if (this.error === null && this.pos < this.text.length) this.fail("unexpected text after the value");
    return value;
  }

  private fail(message: string): JSONValue {
    if (this.error === null) this.error = message + " at offset " + this.pos.toString();
    return new JSONValue();
  }

  private space(): void {
    const text = this.text;
    while (this.pos < text.length) {
      const c = text.charCodeAt(this.pos);
      if (c != 0x20 && c != 0x09 && c != 0x0a && c != 0x0d) break;
      this.pos++;
    }
  }

  private literal(word: string): bool {
    if (this.text.substr(this.pos, word.length) != word) return false;
    this.pos += word.length;
    return true;
  }

  private value(depth: i32): JSONValue {
    if (depth > 200) return this.fail("too deeply nested");
    this.space();
    if (this.pos >= this.text.length) return this.fail("unexpected end of input");
    const c = this.text.charCodeAt(this.pos);
    const v = new JSONValue();
    if (c == 0x7b) { // {
      v.kind = Kind.Object;
      this.pos++;
      this.space();
      if (this.text.charCodeAt(this.pos) == 0x7d) { this.pos++; return v; }
      while (this.error === null) {
        this.space();
        if (this.text.charCodeAt(this.pos) != 0x22) return this.fail("expected a string key");
        v.keys.push(this.string());
        this.space();
        if (this.text.charCodeAt(this.pos) != 0x3a) return this.fail("expected ':'");
        this.pos++;
        v.items.push(this.value(depth + 1));
        this.space();
        const d = this.text.charCodeAt(this.pos++);
        if (d == 0x7d) return v;
        if (d != 0x2c) { this.pos--; return this.fail("expected ',' or '}'"); }
      }
      return v;
    }
    if (c == 0x5b) { // [
      v.kind = Kind.Array;
      this.pos++;
      this.space();
      if (this.text.charCodeAt(this.pos) == 0x5d) { this.pos++; return v; }
      while (this.error === null) {
        v.items.push(this.value(depth + 1));
        this.space();
        const d = this.text.charCodeAt(this.pos++);
        if (d == 0x5d) return v;
        if (d != 0x2c) { this.pos--; return this.fail("expected ',' or ']'"); }
      }
      return v;
    }
    if (c == 0x22) { v.kind = Kind.String; v.str = this.string(); return v; }
    if (this.literal("true")) { v.kind = Kind.Bool; v.bool = true; return v; }
    if (this.literal("false")) { v.kind = Kind.Bool; return v; }
    if (this.literal("null")) return v;
    if (c == 0x2d || (c >= 0x30 && c <= 0x39)) { v.kind = Kind.Number; v.num = this.number(); return v; }
    this.fail("unexpected character");
    return v;
  }

  private digits(): i32 {
    const start = this.pos;
    while (this.pos < this.text.length) {
      const c = this.text.charCodeAt(this.pos);
      if (c < 0x30 || c > 0x39) break;
      this.pos++;
    }
    return this.pos - start;
  }

  private number(): f64 {
    const text = this.text;
    const start = this.pos;
    if (text.charCodeAt(this.pos) == 0x2d) this.pos++;
    if (text.charCodeAt(this.pos) == 0x30) this.pos++;
    else if (this.digits() == 0) { this.fail("invalid number"); return 0; }
    if (text.charCodeAt(this.pos) == 0x2e) {
      this.pos++;
      if (this.digits() == 0) { this.fail("invalid number"); return 0; }
    }
    const e = text.charCodeAt(this.pos);
    if (e == 0x65 || e == 0x45) {
      this.pos++;
      const sign = text.charCodeAt(this.pos);
      if (sign == 0x2b || sign == 0x2d) this.pos++;
      if (this.digits() == 0) { this.fail("invalid number"); return 0; }
    }
    return parseFloat(text.substring(start, this.pos));
  }

  private hex4(): i32 {
    let n = 0;
    for (let i = 0; i < 4; i++) {
      const c = this.text.charCodeAt(this.pos++);
      let d: i32;
      if (c >= 0x30 && c <= 0x39) d = c - 0x30;
      else if (c >= 0x61 && c <= 0x66) d = c - 0x57;
      else if (c >= 0x41 && c <= 0x46) d = c - 0x37;
      else { this.fail("invalid \\u escape"); return 0; }
      n = (n << 4) | d;
    }
    return n;
  }

  /** A string, the opening quote at `pos`. */
  private string(): string {
    const text = this.text;
    this.pos++;
    let out = "";
    let run = this.pos; // the start of the run of plain characters not yet copied to `out`
    while (true) {
      if (this.pos >= text.length) { this.fail("unterminated string"); return out; }
      const c = text.charCodeAt(this.pos);
      if (c == 0x22) { // "
        out += text.substring(run, this.pos);
        this.pos++;
        return out;
      }
      if (c < 0x20) { this.fail("control character in a string"); return out; }
      if (c != 0x5c) { this.pos++; continue; }
      out += text.substring(run, this.pos);
      const e = text.charCodeAt(this.pos + 1);
      this.pos += 2;
      if (e == 0x22) out += "\"";
      else if (e == 0x5c) out += "\\";
      else if (e == 0x2f) out += "/";
      else if (e == 0x62) out += "\b";
      else if (e == 0x66) out += "\f";
      else if (e == 0x6e) out += "\n";
      else if (e == 0x72) out += "\r";
      else if (e == 0x74) out += "\t";
      else if (e == 0x75) out += String.fromCharCode(this.hex4()); // pairs join as UTF-16
      else { this.pos -= 2; this.fail("invalid escape"); return out; }
      if (this.error !== null) return out;
      run = this.pos;
    }
  }
}

const HEX = "0123456789abcdef";

/** `s` as a JSON string literal. Lone surrogates are escaped, so the output stays valid UTF-8. */
export function quote(s: string): string {
  let out = "\"";
  let run = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    let esc: string | null = null;
    if (c == 0x22) esc = "\\\"";
    else if (c == 0x5c) esc = "\\\\";
    else if (c == 0x0a) esc = "\\n";
    else if (c == 0x0d) esc = "\\r";
    else if (c == 0x09) esc = "\\t";
    else if (c < 0x20) esc = "\\u00" + HEX.charAt(c >> 4) + HEX.charAt(c & 15);
    else if (c >= 0xd800 && c <= 0xdfff) {
      const next = i + 1 < s.length ? s.charCodeAt(i + 1) : 0;
      if (c <= 0xdbff && next >= 0xdc00 && next <= 0xdfff) { i++; continue; } // a valid pair
      esc = "\\u" + HEX.charAt(c >> 12) + HEX.charAt((c >> 8) & 15) + HEX.charAt((c >> 4) & 15) + HEX.charAt(c & 15);
    }
    if (esc !== null) {
      out += s.substring(run, i) + esc;
      run = i + 1;
    }
  }
  return out + s.substring(run) + "\"";
}

/** Writes JSON text; commas are placed for you. */
export class JSONWriter {
  private parts: Array<string> = [];
  private comma: bool = false;

  private put(text: string): JSONWriter {
    if (this.comma) this.parts.push(",");
    this.parts.push(text);
    this.comma = true;
    return this;
  }
  beginObject(): JSONWriter { this.put("{"); this.comma = false; return this; }
  endObject(): JSONWriter { this.parts.push("}"); this.comma = true; return this; }
  beginArray(): JSONWriter { this.put("["); this.comma = false; return this; }
  endArray(): JSONWriter { this.parts.push("]"); this.comma = true; return this; }
  /** An object key; the value follows. */
  key(name: string): JSONWriter { this.put(quote(name) + ":"); this.comma = false; return this; }
  string(s: string): JSONWriter { return this.put(quote(s)); }
  bool(b: bool): JSONWriter { return this.put(b ? "true" : "false"); }
  int(n: i64): JSONWriter { return this.put(n.toString()); }
  uint(n: u64): JSONWriter { return this.put(n.toString()); }
  number(n: f64): JSONWriter { return this.put(isFinite(n) ? n.toString() : "null"); }
  null(): JSONWriter { return this.put("null"); }
  /** Text that is already JSON. */
  raw(json: string): JSONWriter { return this.put(json); }
  toString(): string { return this.parts.join(""); }
}
