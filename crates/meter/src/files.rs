//! Small file and host helpers shared by the meter's writers: atomic writes, safe file names,
//! file digests, the UTC time stamp and the host name.

use crate::error::{Error, Result};
use sha2::Digest;
use std::io::Write;
use std::path::Path;

use report::Precision;

/// A file-name-safe form of user text: ASCII letters, digits, `.` and `-` kept, the rest `_` (no
/// path separators can survive).
pub fn safe_name(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// The most bytes a report, plan or other text input may have: far above any report the meter
/// writes (a report with a 50 Hz trace of an hour is ≈ 10 MB), far below what would exhaust memory.
pub const TEXT_INPUT_LIMIT: u64 = 64 << 20;

/// What a path is when it is not a regular file, for [`Error::NotAFile`].
fn file_kind(t: std::fs::FileType) -> Option<&'static str> {
    use std::os::unix::fs::FileTypeExt;
    if t.is_file() {
        None
    } else if t.is_dir() {
        Some("a folder")
    } else if t.is_fifo() {
        Some("a FIFO")
    } else if t.is_char_device() || t.is_block_device() {
        Some("a device")
    } else if t.is_socket() {
        Some("a socket")
    } else {
        Some("not a file")
    }
}

/// Whether `path` is a regular file (symbolic links followed): what a folder scan reads.
pub fn is_regular_file(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.file_type().is_file())
}

/// Read a regular file of at most `limit` bytes as UTF-8 text. A FIFO, a device or a folder is
/// refused before it is opened (opening a FIFO blocks until someone writes; `/dev/zero` never
/// ends), and a file growing past the limit while it is read is refused too: never more than
/// `limit + 1` bytes are held.
pub fn read_text_limited(path: &Path, limit: u64) -> Result<String> {
    let meta = std::fs::metadata(path).map_err(|e| Error::io("reading", path, e))?;
    if let Some(kind) = file_kind(meta.file_type()) {
        return Err(Error::NotAFile {
            path: path.to_path_buf(),
            kind,
        });
    }
    let too_large = || Error::TooLarge {
        path: path.to_path_buf(),
        limit,
    };
    if meta.len() > limit {
        return Err(too_large());
    }
    let f = std::fs::File::open(path).map_err(|e| Error::io("opening", path, e))?;
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    std::io::Read::read_to_end(&mut std::io::Read::take(f, limit + 1), &mut bytes)
        .map_err(|e| Error::io("reading", path, e))?;
    if bytes.len() as u64 > limit {
        return Err(too_large());
    }
    String::from_utf8(bytes).map_err(|e| Error::NotUtf8 {
        path: path.to_path_buf(),
        offset: e.utf8_error().valid_up_to(),
    })
}

/// The SHA-256 (lower-case hex) and length in bytes of a file.
pub fn sha256_file(path: &Path) -> Result<(String, u64)> {
    let mut f = std::fs::File::open(path).map_err(|e| Error::io("opening", path, e))?;
    let mut h = sha2::Sha256::new();
    let n = std::io::copy(&mut f, &mut h).map_err(|e| Error::io("reading", path, e))?;
    Ok((format!("{:x}", h.finalize()), n))
}

/// The current UTC time as ISO 8601 (`2026-11-30T14:53:48Z`).
pub fn utc_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    // Civil date from days since 1970 (Howard Hinnant's algorithm), to avoid a date crate.
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// This machine's host name (`/etc/hostname`), or `unknown`.
pub fn hostname() -> String {
    std::fs::read_to_string("/etc/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}

/// Write `contents` to `path` atomically: a temporary file in the same directory, fsync, rename.
/// A crash leaves either the old file or the new one, never half of one.
pub fn write_atomic(path: &Path, contents: &[u8]) -> Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(|e| Error::io("creating", dir, e))?;
    let name = path
        .file_name()
        .ok_or_else(|| Error::NoFileName(path.to_path_buf()))?
        .to_string_lossy();
    let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    // A signal while the file is written removes it (see `interrupt`): never half a report.
    let _guard = crate::interrupt::TempFile::register(&tmp);
    let result = (|| -> Result<()> {
        // Errors name the file the user asked for; the temporary one is gone by the time they
        // read it.
        let mut f = std::fs::File::create(&tmp).map_err(|e| Error::io("creating", path, e))?;
        f.write_all(contents)
            .and_then(|()| f.sync_all())
            .map_err(|e| Error::io("writing", path, e))?;
        std::fs::rename(&tmp, path).map_err(|e| Error::io("renaming to", path, e))?;
        Ok(())
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Where a run's report for `precision` goes: `<name>.json` for a one-arm run named `name`,
/// `<name>_<PRECISION>.json` for a several-arm one, else `<model>_<PRECISION>_b<batch><suffix>`.
/// `kind` is `""` for a measurement, `".estimate"` or `".failed"` for the other outcomes, so a
/// sweep finds every outcome of a job under its one stem.
pub fn report_path(
    out: &Path,
    name: Option<&str>,
    several: bool,
    (model, precision, batch): (&str, Precision, usize),
    suffix: &str,
    kind: &str,
) -> std::path::PathBuf {
    let stem = match name {
        Some(n) if !several => n.to_string(),
        Some(n) => format!("{n}_{}", precision.as_str()),
        None => format!(
            "{}{suffix}",
            file_stem(model.split(' ').next().unwrap_or(model), precision, batch)
        ),
    };
    out.join(format!("{stem}{kind}.json"))
}

/// Stamp where the report was made ([`crate::scheduler::stamp`]) and write it atomically.
pub fn write_report(path: &Path, rep: &mut report::Report) -> Result<()> {
    crate::scheduler::stamp(rep);
    write_atomic(path, serde_json::to_string_pretty(rep)?.as_bytes())
}

/// `<model>_<PRECISION>_b<batch>`, every part file-name safe.
pub fn file_stem(model: &str, precision: Precision, batch: usize) -> String {
    format!("{}_{}_b{batch}", safe_name(model), precision.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_now_is_iso8601() {
        let s = utc_now();
        assert_eq!(s.len(), 20, "{s}");
        assert!(s.starts_with("20") && s.ends_with('Z'));
    }

    #[test]
    fn file_stems_are_safe() {
        assert_eq!(
            file_stem("Qwen2-0.5B", Precision::Fp16, 1),
            "Qwen2-0.5B_FP16_b1"
        );
        assert_eq!(
            file_stem("../../etc/x y", Precision::Q4K, 4),
            ".._.._etc_x_y_Q4_K_b4"
        );
    }

    /// A FIFO is refused without blocking, /dev/zero without reading it, a folder and an
    /// oversized or non-UTF-8 file with their own words; a small text file reads.
    #[test]
    fn text_inputs_are_regular_bounded_utf8_files() {
        let dir = std::env::temp_dir().join(format!("qe-read-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let fifo = dir.join("pipe");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: mkfifo on a NUL-terminated path of our own temp folder.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let e = read_text_limited(&fifo, 100).unwrap_err();
        assert!(
            e.to_string().ends_with("not a regular file (a FIFO)"),
            "{e}"
        );
        let e = read_text_limited(Path::new("/dev/zero"), 100).unwrap_err();
        assert!(e.to_string().contains("(a device)"), "{e}");
        let e = read_text_limited(&dir, 100).unwrap_err();
        assert!(e.to_string().contains("(a folder)"), "{e}");
        let big = dir.join("big.json");
        std::fs::write(&big, vec![b'x'; 101]).unwrap();
        let e = read_text_limited(&big, 100).unwrap_err();
        assert!(e.to_string().ends_with("larger than 100 bytes"), "{e}");
        let bad = dir.join("bad.json");
        std::fs::write(&bad, b"ab\xffc").unwrap();
        let e = read_text_limited(&bad, 100).unwrap_err();
        assert!(e.to_string().ends_with("invalid byte at offset 2)"), "{e}");
        std::fs::write(&bad, "ok").unwrap();
        assert_eq!(read_text_limited(&bad, 100).unwrap(), "ok");
        assert!(is_regular_file(&bad) && !is_regular_file(&fifo) && !is_regular_file(&dir));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
