//! What a process does when it is told to stop (Ctrl-C's SIGINT, SIGTERM from `kill` or a
//! scheduler's `scancel`, SIGHUP). A measuring process ([`install`]) kills the servers it started
//! (they live in their own process groups, which a terminal's Ctrl-C does not reach, and would
//! hold the GPU), removes the temporary file of a report being written, and dies of the signal —
//! so the exit status says what happened, no report of the interrupted run exists, and no
//! half-written file is left. A supervising `sweep` ([`install_stop_flag`]) only notes the signal:
//! it passes it on to its job's process, sees that job die of it, and writes nothing for it.
//!
//! Everything the handler touches is a static atomic: a signal handler may only do
//! async-signal-safe work (kill, unlink, signal, raise).

use std::ffi::CString;
use std::sync::atomic::{AtomicI32, AtomicPtr, Ordering};

/// Process groups of the servers alive now.
static LIVE_GROUPS: [AtomicI32; 16] = [const { AtomicI32::new(0) }; 16];
/// Temporary files being written now (NUL-terminated paths, leaked while registered).
static TEMP_FILES: [AtomicPtr<libc::c_char>; 4] =
    [const { AtomicPtr::new(std::ptr::null_mut()) }; 4];
static HANDLER: std::sync::Once = std::sync::Once::new();

/// Install the handler for SIGINT, SIGTERM and SIGHUP (once per process). `measure` does at its
/// start; a server start does too.
pub fn install() {
    HANDLER.call_once(|| {
        for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
            // SAFETY: installs a handler that only calls async-signal-safe functions.
            unsafe { libc::signal(sig, on_signal as *const () as libc::sighandler_t) };
        }
    });
}

extern "C" fn on_signal(sig: libc::c_int) {
    for s in &LIVE_GROUPS {
        let g = s.load(Ordering::SeqCst);
        if g > 0 {
            // SAFETY: kill(2) is async-signal-safe.
            unsafe { libc::kill(-g, libc::SIGKILL) };
        }
    }
    for t in &TEMP_FILES {
        let p = t.load(Ordering::SeqCst);
        if !p.is_null() {
            // SAFETY: unlink(2) is async-signal-safe; `p` is a live NUL-terminated path (it is
            // freed only after being swapped out of the slot).
            unsafe { libc::unlink(p) };
        }
    }
    // SAFETY: signal and raise are async-signal-safe.
    unsafe {
        libc::signal(sig, libc::SIG_DFL);
        libc::raise(sig);
    }
}

/// The signal a sweep was sent (0: none); see [`install_stop_flag`].
static STOP: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_stop(sig: libc::c_int) {
    STOP.store(sig, Ordering::SeqCst);
}

/// The other policy, for a process that supervises jobs (`sweep`): SIGINT, SIGTERM and SIGHUP
/// are only noted ([`stop_requested`]), so it can pass the signal on to the job's process, wait
/// for it, write nothing for it and stop. Instead of [`install`], not beside it.
pub fn install_stop_flag() {
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: the handler only stores into an atomic, which is async-signal-safe.
        unsafe { libc::signal(sig, on_stop as *const () as libc::sighandler_t) };
    }
}

/// The signal noted since [`install_stop_flag`], or 0.
pub fn stop_requested() -> i32 {
    STOP.load(Ordering::SeqCst)
}

/// Register a server's process group: a signal kills it.
pub fn register_group(pgid: i32) {
    install();
    if !LIVE_GROUPS.iter().any(|s| {
        s.compare_exchange(0, pgid, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
    }) {
        tracing::warn!(
            pgid,
            "more than 16 live servers: this one is not stopped on a signal"
        );
    }
}

/// The server's group is gone.
pub fn unregister_group(pgid: i32) {
    for s in &LIVE_GROUPS {
        let _ = s.compare_exchange(pgid, 0, Ordering::SeqCst, Ordering::SeqCst);
    }
}

/// A temporary file that a signal removes while this guard lives (see
/// [`crate::files::write_atomic`]).
pub struct TempFile {
    slot: Option<usize>,
}

impl TempFile {
    /// Register `path` (not yet created, or being written).
    pub fn register(path: &std::path::Path) -> TempFile {
        use std::os::unix::ffi::OsStrExt;
        let Ok(c) = CString::new(path.as_os_str().as_bytes()) else {
            return TempFile { slot: None };
        };
        let raw = c.into_raw();
        let slot = TEMP_FILES.iter().position(|t| {
            t.compare_exchange(
                std::ptr::null_mut(),
                raw,
                Ordering::SeqCst,
                Ordering::SeqCst,
            )
            .is_ok()
        });
        if slot.is_none() {
            // SAFETY: `raw` came from CString::into_raw above and was not stored anywhere.
            drop(unsafe { CString::from_raw(raw) });
        }
        TempFile { slot }
    }

    /// Whether a signal would remove the file (false when every slot was taken).
    pub fn is_registered(&self) -> bool {
        self.slot.is_some()
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        if let Some(i) = self.slot {
            let p = TEMP_FILES[i].swap(std::ptr::null_mut(), Ordering::SeqCst);
            if !p.is_null() {
                // SAFETY: the pointer came from CString::into_raw in `register` and is out of
                // the slot now, so the handler can no longer read it.
                drop(unsafe { CString::from_raw(p) });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_temp_file_is_in_its_slot_while_registered() {
        let path = std::path::Path::new("/tmp/qe-interrupt-test.tmp");
        let t = TempFile::register(path);
        let slot = t.slot.expect("a free slot");
        let p = TEMP_FILES[slot].load(Ordering::SeqCst);
        // SAFETY: the slot holds our live CString until `t` is dropped.
        let held = unsafe { std::ffi::CStr::from_ptr(p) };
        assert_eq!(held.to_str().unwrap(), "/tmp/qe-interrupt-test.tmp");
        drop(t);
        assert_ne!(TEMP_FILES[slot].load(Ordering::SeqCst), p);
    }
}
