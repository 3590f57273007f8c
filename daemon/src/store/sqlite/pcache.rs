//! The store's page cache: SQLite's own (`pcache1`) behind a thin wrapper that spares a
//! commit a walk of the whole cache.
//!
//! Why it exists: when a B-tree page splits, SQLite's `balance_nonroot` puts the new pages
//! in ascending order by swapping their numbers through a temporary one, the database's
//! locking page (page 262,145 at 4 KiB pages), which never holds data. `pcache1Rekey`
//! records that number as the largest key the cache has held, so the commit's truncation of
//! the cache to the database's size finds a key past the end and walks every hash slot and
//! every cached page to drop pages that are not there. With the store's cache warm
//! (`CACHE_KIB`; ten thousand runs' pages) each walk took about 4 ms of the store's thread
//! on the benchmark VM, and every commit queued behind it waited as long: finding 19 in
//! `BENCHMARKS.md`, profiled on SQLite 3.54.1, whose `pcache1Truncate` still does this.
//!
//! What it does: it keeps its own bound on the keys a cached page can have — every key a
//! fetch created a page at or a rekey moved one to, the temporary key apart while no page
//! sits on it — and passes a truncation on only when a page at or past the limit may be
//! there. Pages also leave the cache unseen (evicted, discarded), which leaves the bound
//! loose, never wrong. A truncation that is passed on (a transaction that grew the file
//! rolled back, a vacuum that shrank it) is SQLite's own, and still walks the whole cache:
//! `pcache1` keeps the temporary key as its largest until then. The wrapper's state is a
//! `Box` per cache, so running out of memory while a connection opens aborts, as
//! everywhere in the daemon, rather than returning `SQLITE_NOMEM`.
//!
//! Written here because no crate offers it: the methods are SQLite's
//! `sqlite3_pcache_methods2`, installed once per process before its first connection opens
//! (SQLite takes a page cache only before it initialises).

use std::ffi::{c_int, c_uint, c_void};
use std::ptr;
use std::sync::OnceLock;

use rusqlite::ffi;

/// The byte SQLite locks files at (`sqlite3PendingByte`): the page that holds it is never
/// used for data, which is what makes its number free for `balance_nonroot`'s swaps. Only
/// `SQLITE_TESTCTRL_PENDING_BYTE` moves it, which the daemon never calls; if it did, the
/// real temporary key would count in the bound: slower, never wrong.
const PENDING_BYTE: u32 = 0x4000_0000;

/// Installs the wrapper for the process. Idempotent; an error (SQLite was initialised
/// first, by a connection not opened through the store) leaves SQLite's own cache in place,
/// slower, never wrong.
pub(super) fn install() -> Result<(), String> {
    static INSTALLED: OnceLock<Result<(), String>> = OnceLock::new();
    INSTALLED
        .get_or_init(|| {
            let mut found = ffi::sqlite3_pcache_methods2 {
                iVersion: 0,
                pArg: ptr::null_mut(),
                xInit: None,
                xShutdown: None,
                xCreate: None,
                xCachesize: None,
                xPagecount: None,
                xFetch: None,
                xUnpin: None,
                xRekey: None,
                xTruncate: None,
                xDestroy: None,
                xShrink: None,
            };
            // SAFETY: `SQLITE_CONFIG_GETPCACHE2` takes one argument, a pointer to a
            // `sqlite3_pcache_methods2` that it fills; `found` outlives the call.
            let rc = unsafe { ffi::sqlite3_config(ffi::SQLITE_CONFIG_GETPCACHE2, &raw mut found) };
            if rc != ffi::SQLITE_OK {
                return Err(format!(
                    "SQLite would not name its page cache (code {rc}): it was initialised first"
                ));
            }
            let inner = Inner::from(&found)?;
            // The only `set`: this closure runs once.
            INNER
                .set(inner)
                .map_err(|_| "the page cache was installed twice".to_owned())?;
            let ours = ffi::sqlite3_pcache_methods2 {
                iVersion: 1,
                pArg: ptr::null_mut(),
                xInit: Some(init),
                xShutdown: Some(shutdown),
                xCreate: Some(create),
                xCachesize: Some(cachesize),
                xPagecount: Some(pagecount),
                xFetch: Some(fetch),
                xUnpin: Some(unpin),
                xRekey: Some(rekey),
                xTruncate: Some(truncate),
                xDestroy: Some(destroy),
                xShrink: Some(shrink),
            };
            // SAFETY: `SQLITE_CONFIG_PCACHE2` takes one argument, a pointer to the methods,
            // which SQLite copies before returning; every method is defined below and
            // forwards to `INNER`, set above.
            let rc = unsafe { ffi::sqlite3_config(ffi::SQLITE_CONFIG_PCACHE2, &raw const ours) };
            if rc != ffi::SQLITE_OK {
                return Err(format!(
                    "SQLite refused the page cache (code {rc}): it was initialised first"
                ));
            }
            Ok(())
        })
        .clone()
}

/// SQLite's own page cache, which every method forwards to.
static INNER: OnceLock<Inner> = OnceLock::new();

/// `pcache1`'s methods, each one checked present.
#[derive(Clone, Copy)]
struct Inner {
    arg: *mut c_void,
    init: unsafe extern "C" fn(*mut c_void) -> c_int,
    shutdown: unsafe extern "C" fn(*mut c_void),
    create: unsafe extern "C" fn(c_int, c_int, c_int) -> *mut ffi::sqlite3_pcache,
    cachesize: unsafe extern "C" fn(*mut ffi::sqlite3_pcache, c_int),
    pagecount: unsafe extern "C" fn(*mut ffi::sqlite3_pcache) -> c_int,
    fetch: unsafe extern "C" fn(
        *mut ffi::sqlite3_pcache,
        c_uint,
        c_int,
    ) -> *mut ffi::sqlite3_pcache_page,
    unpin: unsafe extern "C" fn(*mut ffi::sqlite3_pcache, *mut ffi::sqlite3_pcache_page, c_int),
    rekey: unsafe extern "C" fn(
        *mut ffi::sqlite3_pcache,
        *mut ffi::sqlite3_pcache_page,
        c_uint,
        c_uint,
    ),
    truncate: unsafe extern "C" fn(*mut ffi::sqlite3_pcache, c_uint),
    destroy: unsafe extern "C" fn(*mut ffi::sqlite3_pcache),
    shrink: unsafe extern "C" fn(*mut ffi::sqlite3_pcache),
}

// SAFETY: `Inner` is plain function pointers and `pcache1`'s argument, which is null (it
// keeps its state in SQLite's globals, behind SQLite's own mutexes); nothing here is tied
// to a thread.
unsafe impl Send for Inner {}
// SAFETY: as above; `Inner` is never written after it is set.
unsafe impl Sync for Inner {}

impl Inner {
    fn from(methods: &ffi::sqlite3_pcache_methods2) -> Result<Inner, String> {
        let missing = |name: &str| format!("SQLite's page cache has no {name}");
        Ok(Inner {
            arg: methods.pArg,
            init: methods.xInit.ok_or_else(|| missing("xInit"))?,
            shutdown: methods.xShutdown.ok_or_else(|| missing("xShutdown"))?,
            create: methods.xCreate.ok_or_else(|| missing("xCreate"))?,
            cachesize: methods.xCachesize.ok_or_else(|| missing("xCachesize"))?,
            pagecount: methods.xPagecount.ok_or_else(|| missing("xPagecount"))?,
            fetch: methods.xFetch.ok_or_else(|| missing("xFetch"))?,
            unpin: methods.xUnpin.ok_or_else(|| missing("xUnpin"))?,
            rekey: methods.xRekey.ok_or_else(|| missing("xRekey"))?,
            truncate: methods.xTruncate.ok_or_else(|| missing("xTruncate"))?,
            destroy: methods.xDestroy.ok_or_else(|| missing("xDestroy"))?,
            shrink: methods.xShrink.ok_or_else(|| missing("xShrink"))?,
        })
    }
}

/// The methods run only after `install` has set `INNER`.
fn inner() -> &'static Inner {
    match INNER.get() {
        Some(inner) => inner,
        // SQLite calls no method of a cache it was never given.
        None => unreachable!("the page cache's methods ran before it was installed"),
    }
}

/// One cache: `pcache1`'s, and the bound on its keys.
struct Cache {
    inner: *mut ffi::sqlite3_pcache,
    /// No page has a key above this, the temporary key apart.
    bound: c_uint,
    /// `balance_nonroot`'s temporary key at this cache's page size (0, never a key, for a
    /// page size past the pending byte).
    temporary: c_uint,
    /// Whether a page may sit at the temporary key.
    on_temporary: bool,
}

impl Cache {
    /// A page is at `key` now.
    fn holds(&mut self, key: c_uint) {
        if key == self.temporary {
            self.on_temporary = true;
        } else {
            self.bound = self.bound.max(key);
        }
    }

    /// Whether a page at or past `limit` may be cached.
    fn reaches(&self, limit: c_uint) -> bool {
        limit <= self.bound || (self.on_temporary && self.temporary >= limit)
    }

    /// Every page at or past `limit` is gone.
    fn cut(&mut self, limit: c_uint) {
        self.bound = self.bound.min(limit.saturating_sub(1));
        if self.temporary >= limit {
            self.on_temporary = false;
        }
    }
}

/// # Safety
/// `cache` is a pointer `create` returned and `destroy` has not freed; SQLite calls one
/// cache's methods one at a time.
unsafe fn cache<'a>(cache: *mut ffi::sqlite3_pcache) -> &'a mut Cache {
    // SAFETY: the caller's contract: `cache` is a live `Box<Cache>` no other call borrows.
    unsafe { &mut *cache.cast::<Cache>() }
}

#[cfg(test)]
thread_local! {
    /// What this thread's caches did, for the tests: pages moved to the temporary key,
    /// truncations passed on, truncations spared, and spared ones that would have dropped
    /// a page (the wrapper wrong).
    pub(super) static COUNTS: std::cell::Cell<[u64; 4]> = const { std::cell::Cell::new([0; 4]) };
}

#[cfg(test)]
fn count(which: usize) {
    COUNTS.with(|counts| {
        let mut now = counts.get();
        now[which] += 1;
        counts.set(now);
    });
}

unsafe extern "C" fn init(_arg: *mut c_void) -> c_int {
    let inner = inner();
    // SAFETY: forwarded as SQLite called it, with `pcache1`'s own argument.
    unsafe { (inner.init)(inner.arg) }
}

unsafe extern "C" fn shutdown(_arg: *mut c_void) {
    let inner = inner();
    // SAFETY: as `init`.
    unsafe { (inner.shutdown)(inner.arg) }
}

unsafe extern "C" fn create(
    page_size: c_int,
    extra: c_int,
    purgeable: c_int,
) -> *mut ffi::sqlite3_pcache {
    // SAFETY: forwarded as SQLite called it.
    let wrapped = unsafe { (inner().create)(page_size, extra, purgeable) };
    if wrapped.is_null() {
        return ptr::null_mut();
    }
    let temporary = u32::try_from(page_size)
        .ok()
        .and_then(|size| PENDING_BYTE.checked_div(size))
        .map_or(0, |pages| pages + 1);
    Box::into_raw(Box::new(Cache {
        inner: wrapped,
        bound: 0,
        temporary,
        on_temporary: false,
    }))
    .cast()
}

unsafe extern "C" fn cachesize(p: *mut ffi::sqlite3_pcache, pages: c_int) {
    // SAFETY: SQLite passes a cache `create` returned (`cache`'s contract), forwarded.
    unsafe { (inner().cachesize)(cache(p).inner, pages) }
}

unsafe extern "C" fn pagecount(p: *mut ffi::sqlite3_pcache) -> c_int {
    // SAFETY: as `cachesize`.
    unsafe { (inner().pagecount)(cache(p).inner) }
}

unsafe extern "C" fn fetch(
    p: *mut ffi::sqlite3_pcache,
    key: c_uint,
    create: c_int,
) -> *mut ffi::sqlite3_pcache_page {
    // SAFETY: as `cachesize`.
    let cache = unsafe { cache(p) };
    // SAFETY: forwarded as SQLite called it.
    let page = unsafe { (inner().fetch)(cache.inner, key, create) };
    if !page.is_null() {
        cache.holds(key);
    }
    page
}

unsafe extern "C" fn unpin(
    p: *mut ffi::sqlite3_pcache,
    page: *mut ffi::sqlite3_pcache_page,
    discard: c_int,
) {
    // SAFETY: as `cachesize`; a discarded page leaves the bound loose.
    unsafe { (inner().unpin)(cache(p).inner, page, discard) }
}

unsafe extern "C" fn rekey(
    p: *mut ffi::sqlite3_pcache,
    page: *mut ffi::sqlite3_pcache_page,
    old: c_uint,
    new: c_uint,
) {
    // SAFETY: as `cachesize`.
    let cache = unsafe { cache(p) };
    // SAFETY: forwarded as SQLite called it.
    unsafe { (inner().rekey)(cache.inner, page, old, new) };
    if old == cache.temporary {
        cache.on_temporary = false;
    }
    #[cfg(test)]
    if new == cache.temporary {
        count(0);
    }
    cache.holds(new);
}

unsafe extern "C" fn truncate(p: *mut ffi::sqlite3_pcache, limit: c_uint) {
    // SAFETY: as `cachesize`.
    let cache = unsafe { cache(p) };
    if !cache.reaches(limit) {
        #[cfg(test)]
        {
            count(2);
            // The tests check the claim against `pcache1` itself: a truncation spared
            // would have dropped nothing.
            // SAFETY: forwarded as SQLite called it.
            let before = unsafe { (inner().pagecount)(cache.inner) };
            // SAFETY: as above.
            unsafe { (inner().truncate)(cache.inner, limit) };
            // SAFETY: as above.
            if unsafe { (inner().pagecount)(cache.inner) } != before {
                count(3);
            }
        }
        return;
    }
    #[cfg(test)]
    count(1);
    // SAFETY: forwarded as SQLite called it.
    unsafe { (inner().truncate)(cache.inner, limit) };
    cache.cut(limit);
}

unsafe extern "C" fn destroy(p: *mut ffi::sqlite3_pcache) {
    // SAFETY: SQLite destroys a cache `create` returned, once, and calls nothing on it
    // after: the box is ours to free.
    let cache = unsafe { Box::from_raw(p.cast::<Cache>()) };
    // SAFETY: forwarded as SQLite called it.
    unsafe { (inner().destroy)(cache.inner) }
}

unsafe extern "C" fn shrink(p: *mut ffi::sqlite3_pcache) {
    // SAFETY: as `cachesize`.
    unsafe { (inner().shrink)(cache(p).inner) }
}

#[cfg(test)]
#[path = "pcache_tests.rs"]
mod tests;
