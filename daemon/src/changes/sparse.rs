//! Reading a file by extent, for hashing and copying what a tool left behind.
//!
//! A tool makes a file of a gigabyte with one `truncate`; read byte by byte it would cost the
//! daemon a gigabyte of reads and, copied naively, a gigabyte of disk per copy. Holes are
//! found with `SEEK_DATA`/`SEEK_HOLE` and passed on as lengths: hashed as the zeros they read
//! as, copied as holes (a seek and a final `ftruncate`). Every chunk checks the call's
//! deadline, so a large file stops with the call rather than after it.
//!
//! Written here rather than taken from a crate: the crates that copy sparse files
//! (`fs_extra`, `reflink-copy`) neither hash on the way nor stop at a deadline.

use std::fs::File;
use std::os::fd::AsFd;

use rustix::fs::SeekFrom;
use sha2::{Digest, Sha256};

use super::bounds::Deadline;
use super::types::ChangeError;

/// Read size when hashing and copying.
const CHUNK: usize = 64 * 1024;
/// Zeros to hash a hole with, a chunk at a time.
static ZEROS: [u8; CHUNK] = [0; CHUNK];

/// Where the bytes of a file go as they are read.
pub trait Sink {
    fn data(&mut self, offset: u64, bytes: &[u8]) -> std::io::Result<()>;
    /// `len` bytes of zeros at `offset`, not stored on disk.
    fn hole(&mut self, offset: u64, len: u64) -> std::io::Result<()>;
}

/// Passes `file`'s content to `sink`, extent by extent; returns its apparent size. A file
/// that shrinks while it is read is an error: what was hashed would not be what is copied.
pub fn read(file: &File, deadline: Deadline, sink: &mut dyn Sink) -> Result<u64, ChangeError> {
    let size = u64::try_from(rustix::fs::fstat(file).map_err(io)?.st_size).unwrap_or(0);
    let mut buf = vec![0u8; CHUNK];
    let mut pos = 0u64;
    while pos < size {
        deadline.check()?;
        let data = match rustix::fs::seek(file.as_fd(), SeekFrom::Data(pos)) {
            Ok(data) => data.min(size),
            // No data past `pos`: the rest is a hole.
            Err(rustix::io::Errno::NXIO) => size,
            // A filesystem without SEEK_DATA: all of it is data.
            Err(rustix::io::Errno::INVAL | rustix::io::Errno::OPNOTSUPP) => pos,
            Err(err) => return Err(io(err)),
        };
        if data > pos {
            sink.hole(pos, data - pos)?;
            pos = data;
            continue;
        }
        let end = match rustix::fs::seek(file.as_fd(), SeekFrom::Hole(pos)) {
            // A filesystem that answers nonsense is read to the end.
            Ok(hole) if hole > pos => hole.min(size),
            Ok(_) | Err(_) => size,
        };
        while pos < end {
            deadline.check()?;
            let want = usize::try_from((end - pos).min(CHUNK as u64)).unwrap_or(CHUNK);
            let n = rustix::io::pread(file.as_fd(), &mut buf[..want], pos).map_err(io)?;
            if n == 0 {
                return Err(ChangeError::Io(std::io::Error::other(
                    "the file shrank while it was read",
                )));
            }
            sink.data(pos, &buf[..n])?;
            pos += n as u64;
        }
    }
    Ok(size)
}

/// The sha256 of what a sink is given, zeros for holes.
#[derive(Default)]
pub struct Hasher(Sha256);

impl Hasher {
    pub fn finish(self) -> String {
        hex::encode(self.0.finalize())
    }
}

impl Sink for Hasher {
    fn data(&mut self, _offset: u64, bytes: &[u8]) -> std::io::Result<()> {
        self.0.update(bytes);
        Ok(())
    }

    fn hole(&mut self, _offset: u64, mut len: u64) -> std::io::Result<()> {
        while len > 0 {
            let n = len.min(CHUNK as u64) as usize;
            self.0.update(&ZEROS[..n]);
            len -= n as u64;
        }
        Ok(())
    }
}

/// Writes what it is given into `file` at the same offsets, hashing it on the way; holes
/// stay holes.
pub struct Copy<'a> {
    pub file: &'a File,
    pub hasher: Hasher,
}

impl Sink for Copy<'_> {
    fn data(&mut self, offset: u64, bytes: &[u8]) -> std::io::Result<()> {
        self.hasher.data(offset, bytes)?;
        let mut done = 0;
        while done < bytes.len() {
            let n = rustix::io::pwrite(self.file.as_fd(), &bytes[done..], offset + done as u64)?;
            if n == 0 {
                return Err(std::io::ErrorKind::WriteZero.into());
            }
            done += n;
        }
        Ok(())
    }

    fn hole(&mut self, offset: u64, len: u64) -> std::io::Result<()> {
        self.hasher.hole(offset, len)
    }
}

/// Copies `from` into the empty `to`, holes as holes; returns the content's sha256 and size.
pub fn copy(from: &File, to: &File, deadline: Deadline) -> Result<(String, u64), ChangeError> {
    let mut sink = Copy {
        file: to,
        hasher: Hasher::default(),
    };
    let size = read(from, deadline, &mut sink)?;
    // A hole at the end is a length, not an extent.
    to.set_len(size)?;
    Ok((sink.hasher.finish(), size))
}

/// The sha256 of `file`'s content and its size.
pub fn digest(file: &File, deadline: Deadline) -> Result<(String, u64), ChangeError> {
    let mut hasher = Hasher::default();
    let size = read(file, deadline, &mut hasher)?;
    Ok((hasher.finish(), size))
}

fn io(err: rustix::io::Errno) -> ChangeError {
    ChangeError::Io(err.into())
}

#[cfg(test)]
mod tests {
    use std::io::{Seek, Write};
    use std::os::unix::fs::MetadataExt;

    use super::*;

    #[test]
    fn a_sparse_file_is_hashed_as_its_zeros_and_copied_with_its_holes() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("sparse");
        let mut file = File::create(&path).expect("create");
        file.seek(std::io::SeekFrom::Start(8 << 20)).expect("seek");
        file.write_all(b"x").expect("write");
        file.set_len(64 << 20).expect("grow");
        let file = File::open(&path).expect("open");

        let mut whole = Sha256::new();
        let mut content = vec![0u8; 64 << 20];
        content[8 << 20] = b'x';
        whole.update(&content);
        let expected = hex::encode(whole.finalize());
        assert_eq!(
            digest(&file, Deadline::none()).expect("digest"),
            (expected.clone(), 64 << 20)
        );

        let copied = dir.path().join("copy");
        let to = File::create(&copied).expect("create");
        assert_eq!(
            copy(&file, &to, Deadline::none()).expect("copy"),
            (expected, 64 << 20)
        );
        let meta = std::fs::metadata(&copied).expect("meta");
        assert_eq!(meta.len(), 64 << 20);
        assert!(
            meta.blocks() * 512 < 1 << 20,
            "the copy keeps its holes: {} blocks",
            meta.blocks()
        );
        assert_eq!(std::fs::read(&copied).expect("read"), content);
    }

    #[test]
    fn reading_stops_at_the_deadline() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("f");
        std::fs::write(&path, b"data").expect("write");
        let file = File::open(&path).expect("open");
        let past = Deadline(Some(std::time::Instant::now()));
        assert!(matches!(digest(&file, past), Err(ChangeError::Deadline)));
    }
}
