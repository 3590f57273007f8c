//! wordstats counts lines, words and bytes of the workspace files whose path matches a
//! pattern: the example tool of the airlock SDK, as its SPEC.md specifies. A WASI preview 1
//! command: the workspace is the current directory, the arguments come on stdin (airlock.zig).
const std = @import("std");
const airlock = @import("airlock.zig");

/// The call's arguments, as schema.json describes them (the daemon has validated them
/// already); absent ones take the defaults written here.
const Arguments = struct {
    pattern: []const u8,
    options: struct {
        max_files: u64 = 100,
        per_file: bool = true,
    } = .{},
};

/// One file's figures.
const FileCounts = struct {
    path: []const u8,
    lines: u64 = 0,
    words: u64 = 0,
    bytes: u64 = 0,
};

/// The tool's result: `files` (null: left out) only when per_file.
const Result = struct {
    totals: struct { files: u64 = 0, lines: u64 = 0, words: u64 = 0, bytes: u64 = 0 } = .{},
    truncated: bool,
    files: ?[]const FileCounts,
};

pub fn main(init: std.process.Init) void {
    airlock.run(init, Arguments, tool);
}

/// Runs one call. (Not named after the tool: its name may be a Zig keyword.)
fn tool(call: *airlock.Call, args: Arguments) !Result {
    var root = try call.workspace();
    defer root.close(call.io);

    var found: std.ArrayList([]const u8) = .empty;
    try walk(call, root, "", args.pattern, &found);
    if (found.items.len == 0) return call.fail("no file matches {s}", .{args.pattern});
    std.mem.sort([]const u8, found.items, {}, byteOrder);

    const counted = found.items[0..@min(found.items.len, args.options.max_files)];
    const files = try call.arena.alloc(FileCounts, counted.len);
    var result: Result = .{ .truncated = found.items.len > counted.len, .files = null };
    const buffer = try call.arena.alloc(u8, 64 * 1024);
    for (counted, files) |path, *file| {
        file.* = try count(call, root, path, buffer);
        result.totals.files += 1;
        result.totals.lines += file.lines;
        result.totals.words += file.words;
        result.totals.bytes += file.bytes;
    }
    if (args.options.per_file) result.files = files;
    return result;
}

/// Appends to `found` the path of every regular file below `dir` (at `prefix`, "" for the
/// workspace) that matches `pattern`: relative, '/'-separated. Entries whose name starts with
/// '.' are skipped; a symlink counts when it leads to a regular file inside the workspace
/// (symlinked folders are not followed); anything else is skipped.
fn walk(call: *airlock.Call, dir: std.Io.Dir, prefix: []const u8, pattern: []const u8, found: *std.ArrayList([]const u8)) !void {
    const io = call.io;
    var entries = dir.iterate();
    while (try entries.next(io)) |entry| {
        if (entry.name.len == 0 or entry.name[0] == '.') continue;
        const path = try std.mem.concat(call.arena, u8, &.{ prefix, entry.name });
        switch (entry.kind) {
            .directory => {
                var sub = try dir.openDir(io, entry.name, .{ .iterate = true });
                defer sub.close(io);
                try walk(call, sub, try std.mem.concat(call.arena, u8, &.{ path, "/" }), pattern, found);
            },
            .file => if (matches(pattern, path)) try found.append(call.arena, path),
            .sym_link => {
                const stat = dir.statFile(io, entry.name, .{}) catch continue;
                if (stat.kind == .file and matches(pattern, path)) try found.append(call.arena, path);
            },
            else => {},
        }
    }
}

fn byteOrder(_: void, a: []const u8, b: []const u8) bool {
    return std.mem.lessThan(u8, a, b);
}

/// Whether the whole path matches pattern: '*' matches any run of characters ('/'
/// included), '?' exactly one (a UTF-8 sequence), any other byte itself.
fn matches(pattern: []const u8, path: []const u8) bool {
    var p: usize = 0;
    var s: usize = 0;
    var star: ?usize = null; // the last '*' seen
    var resume_at: usize = 0; // where in path its match would grow
    while (s < path.len) {
        if (p < pattern.len and pattern[p] == '*') {
            star = p;
            resume_at = s;
            p += 1;
        } else if (p < pattern.len and pattern[p] == '?') {
            p += 1;
            s += charLength(path, s);
        } else if (p < pattern.len and pattern[p] == path[s]) {
            p += 1;
            s += 1;
        } else if (star) |at| {
            resume_at += charLength(path, resume_at);
            p = at + 1;
            s = resume_at;
        } else return false;
    }
    while (p < pattern.len and pattern[p] == '*') p += 1;
    return p == pattern.len;
}

/// The length of the UTF-8 sequence at path[at] (1 for a byte that starts none).
fn charLength(path: []const u8, at: usize) usize {
    const length = std.unicode.utf8ByteSequenceLength(path[at]) catch 1;
    return @min(length, path.len - at);
}

/// The figures of one file, read as bytes (never decoded) and streamed through `buffer`, so
/// that a large file does not need as much memory (the sandbox limits it).
fn count(call: *airlock.Call, dir: std.Io.Dir, path: []const u8, buffer: []u8) !FileCounts {
    const file = try call.openFile(dir, path);
    defer file.close(call.io);
    var reader = file.readerStreaming(call.io, &.{});
    var counts: FileCounts = .{ .path = path };
    var in_word = false;
    var last: u8 = '\n';
    while (true) {
        const length = reader.interface.readSliceShort(buffer) catch return reader.err.?;
        for (buffer[0..length]) |byte| switch (byte) {
            '\n' => {
                counts.lines += 1;
                in_word = false;
            },
            ' ', '\t', '\r', 0x0b, 0x0c => in_word = false,
            else => if (!in_word) {
                in_word = true;
                counts.words += 1;
            },
        };
        if (length > 0) last = buffer[length - 1];
        counts.bytes += length;
        if (length < buffer.len) break; // the end of the file
    }
    if (last != '\n') counts.lines += 1; // a last line without its newline
    return counts;
}
