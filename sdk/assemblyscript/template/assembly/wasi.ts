// The WASI preview 1 calls this tool makes, declared by hand, and small helpers over them.
// The module imports nothing but `wasi_snapshot_preview1` (airlock refuses anything else).

// @ts-ignore: decorator
@external("wasi_snapshot_preview1", "fd_read")
declare function fd_read(fd: u32, iovs: usize, iovs_len: usize, nread: usize): u16;
// @ts-ignore: decorator
@external("wasi_snapshot_preview1", "fd_write")
declare function fd_write(fd: u32, iovs: usize, iovs_len: usize, nwritten: usize): u16;
// @ts-ignore: decorator
@external("wasi_snapshot_preview1", "fd_close")
declare function fd_close(fd: u32): u16;
// @ts-ignore: decorator
@external("wasi_snapshot_preview1", "fd_prestat_get")
declare function fd_prestat_get(fd: u32, prestat: usize): u16;
// @ts-ignore: decorator
@external("wasi_snapshot_preview1", "fd_prestat_dir_name")
declare function fd_prestat_dir_name(fd: u32, path: usize, path_len: usize): u16;
// @ts-ignore: decorator
@external("wasi_snapshot_preview1", "fd_readdir")
declare function fd_readdir(fd: u32, buf: usize, buf_len: usize, cookie: u64, bufused: usize): u16;
// @ts-ignore: decorator
@external("wasi_snapshot_preview1", "path_open")
declare function path_open(dirfd: u32, dirflags: u32, path: usize, path_len: usize, oflags: u16,
                           rights_base: u64, rights_inheriting: u64, fdflags: u16, fd: usize): u16;
// @ts-ignore: decorator
@external("wasi_snapshot_preview1", "path_filestat_get")
declare function path_filestat_get(dirfd: u32, flags: u32, path: usize, path_len: usize, buf: usize): u16;

/** File types, as `fd_readdir` and `path_filestat_get` report them. */
export const FILETYPE_UNKNOWN: u8 = 0;
export const FILETYPE_DIRECTORY: u8 = 3;
export const FILETYPE_REGULAR_FILE: u8 = 4;
export const FILETYPE_SYMBOLIC_LINK: u8 = 7;

const LOOKUP_SYMLINK_FOLLOW: u32 = 1;
const OFLAGS_DIRECTORY: u16 = 2;
// Read-only rights: FD_READ | FD_SEEK | FD_TELL | FD_FILESTAT_GET | FD_READDIR | PATH_OPEN |
// PATH_FILESTAT_GET. Asking for FD_WRITE on a read-only workspace would fail.
const RIGHTS_READ: u64 = (1 << 1) | (1 << 2) | (1 << 5) | (1 << 21) | (1 << 14) | (1 << 13) | (1 << 18);

/** Scratch memory for iovecs and out-parameters (32 bytes). */
const scratch = memory.data(32);

/** The errno of the last call that failed. */
export let lastErrno: u16 = 0;

/** A readable message for a WASI errno. */
export function errnoMessage(errno: u16): string {
  switch (errno) {
    case 2: return "permission denied";
    case 8: return "bad file descriptor";
    case 25: return "illegal byte sequence (a name that is not UTF-8)";
    case 28: return "invalid argument";
    case 29: return "I/O error";
    case 31: return "is a directory";
    case 32: return "too many levels of symbolic links";
    case 37: return "file name too long";
    case 44: return "no such file or directory";
    case 48: return "out of memory";
    case 54: return "not a directory";
    case 63: return "operation not permitted";
    case 76: return "not permitted by the sandbox";
  }
  return "WASI errno " + errno.toString();
}

/** Reads up to `buf.length` bytes from `fd` into `buf`: the count (0 at the end), or -1. */
export function read(fd: u32, buf: Uint8Array): i32 {
  store<u32>(scratch, <u32>buf.dataStart);
  store<u32>(scratch, <u32>buf.length, 4);
  const errno = fd_read(fd, scratch, 1, scratch + 8);
  if (errno != 0) { lastErrno = errno; return -1; }
  return load<u32>(scratch, 8);
}

/** Reads `fd` to its end; null on failure. */
export function readAll(fd: u32): Uint8Array | null {
  let data = new Uint8Array(4096);
  let len = 0;
  while (true) {
    if (len == data.length) {
      const bigger = new Uint8Array(data.length * 2);
      bigger.set(data);
      data = bigger;
    }
    const n = read(fd, data.subarray(len));
    if (n < 0) return null;
    if (n == 0) return data.slice(0, len);
    len += n;
  }
}

/** Writes all of `data` to `fd`; false on failure. */
export function writeAll(fd: u32, data: ArrayBuffer): bool {
  let ptr = changetype<usize>(data);
  let left = <usize>data.byteLength;
  while (left > 0) {
    store<u32>(scratch, <u32>ptr);
    store<u32>(scratch, <u32>left, 4);
    const errno = fd_write(fd, scratch, 1, scratch + 8);
    if (errno != 0) { lastErrno = errno; return false; }
    const n = <usize>load<u32>(scratch, 8);
    ptr += n;
    left -= n;
  }
  return true;
}

/** Closes `fd`. */
export function close(fd: u32): void {
  fd_close(fd);
}

/** The preopened directory named `name` (e.g. "." or "/workspace"), or -1. */
export function findPreopen(name: string): i32 {
  const wanted = String.UTF8.encode(name);
  // Preopens are numbered from 3 up; fd_prestat_get fails (EBADF) after the last one.
  for (let fd: u32 = 3; fd < 1024; fd++) {
    if (fd_prestat_get(fd, scratch) != 0) break;
    if (load<u8>(scratch) != 0) continue; // not a directory
    const len = load<u32>(scratch, 4);
    if (len != <u32>wanted.byteLength) continue;
    const got = new Uint8Array(len);
    if (fd_prestat_dir_name(fd, got.dataStart, len) != 0) continue;
    if (memory.compare(got.dataStart, changetype<usize>(wanted), len) == 0) return <i32>fd;
  }
  return -1;
}

/** Opens `path` (relative to the directory `dirfd`) for reading: the new fd, or -1. */
export function openFile(dirfd: u32, path: Uint8Array): i32 {
  return open(dirfd, path, 0);
}

/** Opens the directory `path` (relative to the directory `dirfd`): the new fd, or -1. */
export function openDir(dirfd: u32, path: Uint8Array): i32 {
  return open(dirfd, path, OFLAGS_DIRECTORY);
}

function open(dirfd: u32, path: Uint8Array, oflags: u16): i32 {
  const errno = path_open(dirfd, LOOKUP_SYMLINK_FOLLOW, path.dataStart, path.length, oflags,
                          RIGHTS_READ, RIGHTS_READ, 0, scratch);
  if (errno != 0) { lastErrno = errno; return -1; }
  return <i32>load<u32>(scratch);
}

/** The file type of `path` (relative to `dirfd`), following symlinks; -1 on failure. */
export function fileType(dirfd: u32, path: Uint8Array): i32 {
  // filestat: dev u64, ino u64, filetype u8 (offset 16), ... 64 bytes in all.
  const stat = new Uint8Array(64);
  const errno = path_filestat_get(dirfd, LOOKUP_SYMLINK_FOLLOW, path.dataStart, path.length, stat.dataStart);
  if (errno != 0) { lastErrno = errno; return -1; }
  return stat[16];
}

/** One directory entry: its name (bytes, as the file system has it) and file type. */
export class DirEntry {
  constructor(public name: Uint8Array, public type: u8) {}
}

/** The entries of the open directory `fd`, without "." and ".."; null on failure. */
export function readDir(fd: u32): Array<DirEntry> | null {
  const entries = new Array<DirEntry>();
  let buf = new Uint8Array(4096);
  let cookie: u64 = 0;
  while (true) {
    const errno = fd_readdir(fd, buf.dataStart, buf.length, cookie, scratch);
    if (errno != 0) { lastErrno = errno; return null; }
    const used = <i32>load<u32>(scratch);
    // dirent: d_next u64, d_ino u64, d_namlen u32, d_type u8, padding: 24 bytes, then the name.
    let off = 0;
    while (off + 24 <= used) {
      const ptr = buf.dataStart + off;
      const namlen = <i32>load<u32>(ptr, 16);
      if (off + 24 + namlen > used) break; // cut off: read it again from its cookie
      cookie = load<u64>(ptr);
      const name = buf.slice(off + 24, off + 24 + namlen);
      const dot = namlen >= 1 && name[0] == 0x2e;
      if (!(dot && (namlen == 1 || (namlen == 2 && name[1] == 0x2e)))) {
        entries.push(new DirEntry(name, load<u8>(ptr, 20)));
      }
      off += 24 + namlen;
    }
    if (used < buf.length) return entries; // the end of the directory
    if (off == 0) buf = new Uint8Array(buf.length * 2); // one entry larger than the buffer
  }
  return entries; // not reached
}
