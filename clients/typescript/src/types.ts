// The airlock.v1 messages, enums and service descriptors, as protoc-gen-es generates them
// from ../../proto into src/gen/ (never edited by hand). Browser-safe.

export * from "./gen/airlock/v1/agent_pb.js";
export * from "./gen/airlock/v1/approval_pb.js";
export * from "./gen/airlock/v1/cassette_pb.js";
export * from "./gen/airlock/v1/changes_pb.js";
export * from "./gen/airlock/v1/daemon_pb.js";
export * from "./gen/airlock/v1/policy_pb.js";
export * from "./gen/airlock/v1/rules_pb.js";
export * from "./gen/airlock/v1/run_event_pb.js";
export * from "./gen/airlock/v1/tool_pb.js";
export * from "./gen/airlock/v1/tools_pb.js";
export * from "./gen/airlock/v1/trace_pb.js";
