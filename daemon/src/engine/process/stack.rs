//! The stack a sandbox's first process runs on: it shares the daemon's memory (`CLONE_VM`)
//! until it executes the tool, so its stack is a mapping of the daemon's, owned by whoever
//! waits for that process (the launcher, or a spare).

use std::ffi::c_void;
use std::io;

use rustix::mm::{MapFlags, MprotectFlags, ProtFlags};

/// The first process's stack. It runs a few hundred bytes of frames; the rest is margin.
const STACK_BYTES: usize = 256 * 1024;

/// The first process's stack: an anonymous mapping with a guard page below it.
pub struct Stack {
    base: *mut c_void,
    len: usize,
}

// SAFETY: the mapping is only used by its owner's thread and, while it waits, its clone.
unsafe impl Send for Stack {}
// SAFETY: a shared reference can only read the mapping's address (`top`); the mapping is
// unmapped by the owner's drop alone.
unsafe impl Sync for Stack {}

impl Stack {
    pub fn new() -> io::Result<Stack> {
        let page = rustix::param::page_size();
        let len = STACK_BYTES + page;
        // SAFETY: a fresh anonymous private mapping; nothing else refers to it.
        let base = unsafe {
            rustix::mm::mmap_anonymous(
                std::ptr::null_mut(),
                len,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::PRIVATE | MapFlags::STACK,
            )
        }?;
        let stack = Stack { base, len };
        // SAFETY: the lowest page of the mapping just made, which nothing uses yet; on
        // failure, dropping `stack` unmaps it.
        unsafe { rustix::mm::mprotect(base, page, MprotectFlags::empty()) }?;
        Ok(stack)
    }

    /// The initial stack pointer (the stack grows down), 16-byte aligned.
    pub fn top(&self) -> *mut c_void {
        ((self.base as usize + self.len) & !15) as *mut c_void
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`; its owner drops it only once the process that ran
        // on it has executed its program or been killed.
        let _ = unsafe { rustix::mm::munmap(self.base, self.len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stack_top_is_aligned_inside_the_mapping() {
        let stack = Stack::new().expect("map a stack");
        let top = stack.top() as usize;
        assert_eq!(top % 16, 0);
        assert!(top <= stack.base as usize + stack.len);
        assert!(top > stack.base as usize + STACK_BYTES / 2);
    }
}
