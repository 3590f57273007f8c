// Unit tests of src/format.js: enum names, numbers, durations and times.
import { test } from "node:test";
import assert from "node:assert/strict";
import {
  enumShortName, enumWords, capitalise, formatDuration, formatCountdown, formatInt, formatBytes,
  relativeTime, prettyJson, shortDigest, shortId, num,
} from "../src/format.js";

// The shape of a protobuf-es DescEnum, as the registry builds it from the descriptor set.
const runState = {
  sharedPrefix: "run_state_",
  value: {
    0: { name: "RUN_STATE_UNSPECIFIED", localName: "UNSPECIFIED" },
    2: { name: "RUN_STATE_WAITING_FOR_APPROVAL", localName: "WAITING_FOR_APPROVAL" },
  },
};

test("enum names lose their prefix and read as words", () => {
  assert.equal(enumShortName(runState, 2), "WAITING_FOR_APPROVAL");
  assert.equal(enumWords(enumShortName(runState, 2)), "waiting for approval");
  assert.equal(capitalise("waiting for approval"), "Waiting for approval");
  assert.equal(enumShortName(runState, 0), "UNSPECIFIED");
  assert.equal(enumShortName(runState, 9), "9");
  // Without localName, the shared prefix is stripped from the full name.
  assert.equal(enumShortName({ sharedPrefix: "stop_reason_", value: { 2: { name: "STOP_REASON_MAX_STEPS" } } }, 2), "MAX_STEPS");
});

test("the real descriptor set names enums the same way", async () => {
  const { createFileRegistry, fromBinary } = await import("@bufbuild/protobuf");
  const { FileDescriptorSetSchema, FileDescriptorProtoSchema, EnumDescriptorProtoSchema } = await import("@bufbuild/protobuf/wkt");
  const { create } = await import("@bufbuild/protobuf");
  const file = create(FileDescriptorProtoSchema, {
    name: "t.proto", package: "t", syntax: "proto3",
    enumType: [create(EnumDescriptorProtoSchema, {
      name: "StopReason",
      value: [{ name: "STOP_REASON_UNSPECIFIED", number: 0 }, { name: "STOP_REASON_BUDGET_EXHAUSTED", number: 3 }],
    })],
  });
  const set = create(FileDescriptorSetSchema, { file: [file] });
  const registry = createFileRegistry(set);
  const desc = registry.getEnum("t.StopReason");
  assert.equal(enumWords(enumShortName(desc, 3)), "budget exhausted");
  assert.ok(fromBinary);
});

test("durations, countdowns and numbers", () => {
  assert.equal(formatDuration(0.42), "0.4 ms");
  assert.equal(formatDuration(12.34), "12.3 ms");
  assert.equal(formatDuration(1250), "1.25 s");
  assert.equal(formatDuration(125_000), "2m 05s");
  assert.equal(formatCountdown(65_000 + 1000, 1000), "1m 05s left");
  assert.equal(formatCountdown(45_500, 1000), "45s left");
  assert.equal(formatCountdown(1000, 5000), "deadline passed");
  assert.equal(formatInt(12345n), "12,345");
  assert.equal(formatBytes(512), "512 B");
  assert.equal(formatBytes(1536), "1.5 KiB");
  assert.equal(num(7n), 7);
});

test("relative times for the last day, dates after", () => {
  const now = Date.UTC(2024, 4, 1, 12, 0, 0);
  assert.equal(relativeTime(now - 2000, now), "just now");
  assert.equal(relativeTime(now - 12_000, now), "12s ago");
  assert.equal(relativeTime(BigInt(now - 5 * 60_000), now), "5m ago");
  assert.equal(relativeTime(now - 3 * 3_600_000, now), "3h ago");
  assert.match(relativeTime(now - 2 * 86_400_000, now), /^2024-04-\d\d \d\d:\d\d:\d\d$/);
  assert.equal(relativeTime(0n, now), "");
});

test("JSON pretty-printing and digests", () => {
  assert.equal(prettyJson('{"a":1,"b":[2]}'), '{\n  "a": 1,\n  "b": [\n    2\n  ]\n}');
  assert.equal(prettyJson("not json"), "not json");
  assert.equal(shortDigest("0123456789abcdef0123"), "0123456789ab…");
  assert.equal(shortId("run_019af3c2b1d4aaaabbbbccccddddeeee"), "run_…ccccddddeeee");
  assert.equal(shortId("ses_0123456789abc"), "ses_0123456789abc");
  assert.equal(shortId(""), "");
});
