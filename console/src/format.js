// Formatting helpers: numbers, bigints, durations, times, JSON and enum names. Pure (no DOM,
// no registry), so the tests run them under node.

const INT = new Intl.NumberFormat("en-US");

/** A protobuf int64/uint64 (bigint in protobuf-es v2) or a number, as a JS number. */
export function num(value) {
  if (typeof value === "bigint") return Number(value);
  if (typeof value === "number") return value;
  return 0;
}

/** 12345 → "12,345". */
export function formatInt(value) {
  return INT.format(num(value));
}

/** Bytes as "512 B", "1.5 KiB", "3.2 MiB". */
export function formatBytes(value) {
  const n = num(value);
  if (n < 1024) return `${n} B`;
  const units = ["KiB", "MiB", "GiB", "TiB"];
  let v = n / 1024;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i += 1;
  }
  return `${v < 10 ? v.toFixed(1) : Math.round(v)} ${units[i]}`;
}

/** Milliseconds as "0.4 ms", "12.3 ms", "1.25 s", "2m 05s". */
export function formatDuration(ms) {
  const n = num(ms);
  if (n < 1000) return `${n.toFixed(1)} ms`;
  if (n < 60_000) return `${(n / 1000).toFixed(n < 10_000 ? 2 : 1)} s`;
  const totalS = Math.round(n / 1000);
  const h = Math.floor(totalS / 3600);
  const m = Math.floor((totalS % 3600) / 60);
  const s = totalS % 60;
  return h > 0 ? `${h}h ${pad2(m)}m` : `${m}m ${pad2(s)}s`;
}

/** Time left until a deadline: "1m 05s left", "45s left", "deadline passed". */
export function formatCountdown(deadlineMs, nowMs) {
  const left = num(deadlineMs) - nowMs;
  if (!num(deadlineMs)) return "no deadline";
  if (left <= 0) return "deadline passed";
  const totalS = Math.ceil(left / 1000);
  const h = Math.floor(totalS / 3600);
  const m = Math.floor((totalS % 3600) / 60);
  const s = totalS % 60;
  if (h > 0) return `${h}h ${pad2(m)}m left`;
  if (m > 0) return `${m}m ${pad2(s)}s left`;
  return `${s}s left`;
}

function pad2(n) {
  return String(n).padStart(2, "0");
}

/** Local "2024-05-01 14:03:07". */
export function localDateTime(ms) {
  const n = num(ms);
  if (!n) return "";
  const d = new Date(n);
  return (
    `${d.getFullYear()}-${pad2(d.getMonth() + 1)}-${pad2(d.getDate())} ` +
    `${pad2(d.getHours())}:${pad2(d.getMinutes())}:${pad2(d.getSeconds())}`
  );
}

/** Local "14:03:07.123". */
export function localClock(ms) {
  const n = num(ms);
  if (!n) return "";
  const d = new Date(n);
  return (
    `${pad2(d.getHours())}:${pad2(d.getMinutes())}:${pad2(d.getSeconds())}.` +
    String(d.getMilliseconds()).padStart(3, "0")
  );
}

/** "just now", "12s ago", "5m ago", "3h ago" for the last day; the local date and time after. */
export function relativeTime(ms, nowMs) {
  const n = num(ms);
  if (!n) return "";
  const ago = nowMs - n;
  if (ago < -60_000 || ago >= 86_400_000) return localDateTime(n);
  if (ago < 5_000) return "just now";
  if (ago < 60_000) return `${Math.floor(ago / 1000)}s ago`;
  if (ago < 3_600_000) return `${Math.floor(ago / 60_000)}m ago`;
  return `${Math.floor(ago / 3_600_000)}h ago`;
}

/** JSON text pretty-printed with two spaces; anything that is not JSON as it is. */
export function prettyJson(text) {
  if (typeof text !== "string" || text === "") return text ?? "";
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    return text;
  }
}

/** JSON text on one line; anything that is not JSON as it is. */
export function compactJson(text) {
  if (typeof text !== "string" || text === "") return text ?? "";
  try {
    return JSON.stringify(JSON.parse(text));
  } catch {
    return text;
  }
}

/** A digest shortened for a table: "3f2a9c1d0b7e…". */
export function shortDigest(digest, keep = 12) {
  if (!digest) return "";
  return digest.length > keep + 1 ? `${digest.slice(0, keep)}…` : digest;
}

/**
 * An id as a list shows it when its column is narrow: its prefix and its last `keep` digits
 * (`run_…1f0c9a2b7e44`). A daemon writes the time it made an id first and random digits
 * last, so the end is what tells two ids apart; the whole id goes in a title beside it.
 */
export function shortId(id, keep = 12) {
  const s = String(id ?? "");
  const cut = s.indexOf("_") + 1;
  return s.length - cut > keep + 1 ? `${s.slice(0, cut)}…${s.slice(-keep)}` : s;
}

/** The first line of a text, cut to `max` characters. */
export function firstLine(text, max = 200) {
  const s = String(text ?? "");
  const nl = s.indexOf("\n");
  const line = nl >= 0 ? s.slice(0, nl) : s;
  return line.length > max ? `${line.slice(0, max)}…` : line;
}

/**
 * An enum value's name without the enum's shared prefix, from its descriptor:
 * RUN_STATE_WAITING_FOR_APPROVAL → "WAITING_FOR_APPROVAL". `desc` is a protobuf-es DescEnum
 * (or anything with `value[n].name` and `sharedPrefix`). Unknown numbers come back as digits.
 */
export function enumShortName(desc, value) {
  const n = Number(value ?? 0);
  const v = desc?.value?.[n];
  if (!v) return n === 0 ? "UNSPECIFIED" : String(n);
  if (v.localName && v.localName !== v.name) return v.localName;
  const prefix = (desc.sharedPrefix ?? "").toUpperCase();
  return prefix && v.name.startsWith(prefix) ? v.name.slice(prefix.length) : v.name;
}

/** "WAITING_FOR_APPROVAL" → "waiting for approval". */
export function enumWords(shortName) {
  return String(shortName).toLowerCase().replaceAll("_", " ");
}

/** "waiting for approval" → "Waiting for approval". */
export function capitalise(text) {
  const s = String(text ?? "");
  return s ? s[0].toUpperCase() + s.slice(1) : s;
}
