//! The airlock stdio ABI (sdk/ABI.md) for Zig, standard library only: the arguments arrive
//! as one JSON object on stdin, the result leaves as one JSON document on stdout, logs go to
//! stderr, and the program exits 0. Keep this file as it is and write the tool in main.zig:
//!
//!     pub fn main(init: std.process.Init) void {
//!         airlock.run(init, Arguments, tool);
//!     }
//!     fn tool(call: *airlock.Call, args: Arguments) !Result { ... }
//!
//! `Arguments` and `Result` are any types std.json parses and writes; optional fields of the
//! result that are null are left out.
const builtin = @import("builtin");
const std = @import("std");
const Io = std.Io;

/// What a tool gets besides its arguments.
pub const Call = struct {
    io: Io,
    /// Frees everything at exit: allocate freely.
    arena: std.mem.Allocator,
    /// A general purpose allocator, for what is better freed early.
    gpa: std.mem.Allocator,
    preopens: *const std.process.Preopens,
    /// Set by `fail`.
    message: ?[]const u8 = null,
    retryable: bool = false,

    /// The workspace (preopened as `.` and `/workspace`), opened for reading and iterating;
    /// the error "this tool needs a workspace" when the tool's profile grants none.
    pub fn workspace(call: *Call) !Io.Dir {
        for ([_][]const u8{ ".", "/workspace" }) |name| {
            if (call.preopens.get(name)) |resource| switch (resource) {
                .dir => |dir| return dir.openDir(call.io, ".", .{ .iterate = true }),
                .file => {},
            };
        }
        return call.fail("this tool needs a workspace", .{});
    }

    /// Opens the file at `sub_path` in `dir` for reading, following symlinks (those that stay
    /// inside the preopens: the sandbox refuses the others). Zig 0.17's `Dir.openFile` does
    /// not follow them on WASI, whatever its `follow_symlinks` says. Close it with `close(io)`.
    pub fn openFile(call: *Call, dir: Io.Dir, sub_path: []const u8) !Io.File {
        if (builtin.os.tag != .wasi) return dir.openFile(call.io, sub_path, .{});
        const wasi = std.os.wasi;
        var fd: wasi.fd_t = undefined;
        const rights: wasi.rights_t = .{ .FD_READ = true, .FD_SEEK = true, .FD_TELL = true, .FD_FILESTAT_GET = true };
        return switch (wasi.path_open(dir.handle, .{ .SYMLINK_FOLLOW = true }, sub_path.ptr, sub_path.len, .{}, rights, .{}, .{}, &fd)) {
            .SUCCESS => .{ .handle = fd, .flags = .{ .nonblocking = false } },
            else => |errno| call.fail("cannot open {s}: {s}", .{ sub_path, @tagName(errno) }),
        };
    }

    /// Sets the error the call returns (status TOOL_ERROR, not retryable), its message
    /// formatted like std.fmt; return the result: `return call.fail("no {s}", .{what});`.
    pub fn fail(call: *Call, comptime format: []const u8, args: anytype) error{ToolFailed} {
        call.message = std.fmt.allocPrint(call.arena, format, args) catch "out of memory";
        call.retryable = false;
        return error.ToolFailed;
    }

    /// Like `fail`, for an error that the same call may not meet later (a busy resource...).
    pub fn failRetryable(call: *Call, comptime format: []const u8, args: anytype) error{ToolFailed} {
        _ = call.fail(format, args);
        call.retryable = true;
        return error.ToolFailed;
    }
};

/// Reads the arguments from stdin as an `Arguments`, calls `tool` with them and writes its
/// result as {"ok": result}, or its error as {"error": {...}}, to stdout. An error other
/// than one set by `Call.fail` is reported by its name.
pub fn run(init: std.process.Init, comptime Arguments: type, comptime tool: anytype) void {
    var call: Call = .{ .io = init.io, .arena = init.arena.allocator(), .gpa = init.gpa, .preopens = &init.preopens };
    var buffer: [4096]u8 = undefined;
    var stdout = Io.File.stdout().writerStreaming(init.io, &buffer);
    const out = &stdout.interface;
    const options: std.json.Stringify.Options = .{ .emit_null_optional_fields = false };

    const written = if (invoke(&call, Arguments, tool)) |result|
        std.json.Stringify.value(.{ .ok = result }, options, out)
    else |err| written: {
        const message = call.message orelse switch (err) {
            error.ToolFailed => "the tool failed",
            else => std.fmt.allocPrint(call.arena, "the tool failed: {s}", .{@errorName(err)}) catch "out of memory",
        };
        const document = .{ .@"error" = .{ .message = message, .retryable = call.retryable } };
        break :written std.json.Stringify.value(document, options, out);
    };
    written catch std.process.fatal("cannot write the result", .{});
    out.writeAll("\n") catch std.process.fatal("cannot write the result", .{});
    out.flush() catch std.process.fatal("cannot write the result", .{});
}

fn invoke(call: *Call, comptime Arguments: type, comptime tool: anytype) !@typeInfo(@typeInfo(@TypeOf(tool)).@"fn".return_type.?).error_union.payload {
    var buffer: [4096]u8 = undefined;
    var stdin = Io.File.stdin().readerStreaming(call.io, &buffer);
    const input = stdin.interface.allocRemaining(call.arena, .unlimited) catch
        return call.fail("cannot read the arguments", .{});
    const args = std.json.parseFromSliceLeaky(Arguments, call.arena, input, .{ .ignore_unknown_fields = true }) catch |err|
        return call.fail("the arguments are not valid: {s}", .{@errorName(err)});
    return tool(call, args);
}
