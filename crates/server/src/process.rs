//! A server the meter starts for one arm: its command with `{model}` and `{port}` filled in, run
//! by `sh -c` in its own process group (so stopping it stops its children too), output kept in a
//! log file whose tail becomes the arm's error message when the server dies.

use super::client::Client;
use super::ServerError;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The command line for one arm: `{model}` and `{port}` replaced (paths quoted for `sh`).
pub fn fill_template(
    template: &str,
    model: Option<&Path>,
    port: u16,
) -> Result<String, ServerError> {
    if !template.contains("{port}") {
        return Err(ServerError::Template(
            "the server command must contain {port}: the meter picks a free port for each arm"
                .into(),
        ));
    }
    let mut cmd = template.replace("{port}", &port.to_string());
    if let Some(m) = model {
        if !template.contains("{model}") {
            return Err(ServerError::Template(
                "the server command must contain {model}: each arm serves its own --model-file"
                    .into(),
            ));
        }
        cmd = cmd.replace("{model}", &shell_quote(&m.display().to_string()));
    }
    Ok(cmd)
}

/// `s` single-quoted for `sh`.
fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+:=@".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// A free TCP port on 127.0.0.1 (the OS picks; the listener is closed before the server binds).
pub fn free_port() -> Result<u16, ServerError> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| ServerError::Http {
        url: "127.0.0.1:0".into(),
        detail: format!("no free port: {e}"),
    })?;
    Ok(l.local_addr().map(|a| a.port()).unwrap_or(0))
}

fn register_group(pgid: i32) {
    meter::interrupt::register_group(pgid);
}

fn unregister_group(pgid: i32) {
    meter::interrupt::unregister_group(pgid);
}

/// A running server. Dropping it stops it (SIGTERM to its group, SIGKILL after 15 s); a signal
/// that ends the meter kills it too.
pub struct ServerProcess {
    child: Option<Child>,
    /// The command line it was started with.
    pub command: String,
    /// Where its stdout and stderr go.
    pub log: PathBuf,
}

impl ServerProcess {
    /// Start `command` under `sh -c`, output to `log`.
    pub fn start(command: &str, log: &Path) -> Result<ServerProcess, ServerError> {
        if let Some(dir) = log.parent() {
            std::fs::create_dir_all(dir).map_err(|e| ServerError::Log(log.into(), e))?;
        }
        let out = File::create(log).map_err(|e| ServerError::Log(log.into(), e))?;
        let err = out
            .try_clone()
            .map_err(|e| ServerError::Log(log.into(), e))?;
        let child = Command::new("sh")
            .arg("-c")
            .arg(command)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .process_group(0)
            .spawn()
            .map_err(|e| ServerError::Spawn {
                command: command.into(),
                source: e,
            })?;
        register_group(child.id() as i32);
        tracing::info!(command, pid = child.id(), log = %log.display(), "server started");
        Ok(ServerProcess {
            child: Some(child),
            command: command.into(),
            log: log.into(),
        })
    }

    /// Whether it has exited, and how.
    pub fn exited(&mut self) -> Option<String> {
        let child = self.child.as_mut()?;
        match child.try_wait() {
            Ok(Some(status)) => Some(status.to_string()),
            Ok(None) => None,
            Err(e) => Some(format!("unknown status ({e})")),
        }
    }

    /// The last `lines` lines of its log.
    pub fn log_tail(&self, lines: usize) -> String {
        log_tail(&self.log, lines)
    }

    /// Poll until the server answers 200 on `/health` (or, where there is no `/health`, on
    /// `/v1/models`), it exits, or `timeout` passes.
    pub fn wait_ready(&mut self, client: &Client, timeout: Duration) -> Result<f64, ServerError> {
        let t0 = Instant::now();
        let probe = Duration::from_secs(2);
        loop {
            if let Some(status) = self.exited() {
                return Err(ServerError::Exited {
                    status,
                    log_tail: self.log_tail(12),
                });
            }
            let ready = match client.get("/health", probe) {
                Ok(a) if a.status == 200 => true,
                Ok(a) if a.status == 404 => client
                    .get("/v1/models", probe)
                    .is_ok_and(|m| m.status == 200),
                _ => false,
            };
            if ready {
                return Ok(t0.elapsed().as_secs_f64());
            }
            if t0.elapsed() > timeout {
                return Err(ServerError::NotReady {
                    seconds: timeout.as_secs_f64(),
                    log_tail: self.log_tail(12),
                });
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Stop the server and its children: SIGTERM to the group, SIGKILL after `grace`.
    pub fn stop(&mut self, grace: Duration) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        let group = -(child.id() as i32);
        unregister_group(child.id() as i32);
        // SAFETY: kill(2) with a negative pid signals the process group we created; no memory
        // is shared with it.
        unsafe { libc::kill(group, libc::SIGTERM) };
        let t0 = Instant::now();
        while t0.elapsed() < grace {
            if let Ok(Some(_)) = child.try_wait() {
                // The leader is gone; make sure no child of it is left holding the GPU.
                unsafe { libc::kill(group, libc::SIGKILL) };
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        tracing::warn!(command = %self.command, "server ignored SIGTERM; killing it");
        unsafe { libc::kill(group, libc::SIGKILL) };
        let _ = child.wait();
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        self.stop(Duration::from_secs(15));
    }
}

/// The last `lines` non-empty lines of the file at `path` (its last 16 KiB at most).
pub fn log_tail(path: &Path, lines: usize) -> String {
    let Ok(mut f) = File::open(path) else {
        return String::new();
    };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let _ = f.seek(SeekFrom::Start(len.saturating_sub(16 << 10)));
    let mut buf = Vec::new();
    let _ = f.read_to_end(&mut buf);
    let text = String::from_utf8_lossy(&buf);
    let kept: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    kept[kept.len().saturating_sub(lines)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_need_port_and_model() {
        let m = Path::new("/m/x y.gguf");
        let c = fill_template("srv -m {model} --port {port}", Some(m), 8081).unwrap();
        assert_eq!(c, "srv -m '/m/x y.gguf' --port 8081");
        let plain = fill_template(
            "srv -m {model} --port {port}",
            Some(Path::new("/a/b.gguf")),
            1,
        );
        assert_eq!(plain.unwrap(), "srv -m /a/b.gguf --port 1");
        assert!(fill_template("srv -m {model}", Some(m), 1)
            .unwrap_err()
            .to_string()
            .contains("{port}"));
        assert!(fill_template("srv --port {port}", Some(m), 1)
            .unwrap_err()
            .to_string()
            .contains("{model}"));
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
    }

    #[test]
    fn a_dying_server_leaves_its_words() {
        let dir = std::env::temp_dir().join(format!("qe-proc-{}", std::process::id()));
        let log = dir.join("s.log");
        let mut p = ServerProcess::start(
            "echo loading; echo 'error: model file is corrupt' >&2; exit 3",
            &log,
        )
        .unwrap();
        let client = Client::new(
            &format!("http://127.0.0.1:{}", free_port().unwrap()),
            Duration::from_secs(1),
            Duration::from_secs(1),
        )
        .unwrap();
        let e = p.wait_ready(&client, Duration::from_secs(20)).unwrap_err();
        let s = e.to_string();
        assert!(
            s.contains("exit status: 3") && s.contains("model file is corrupt"),
            "{s}"
        );
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn stopping_kills_the_whole_group() {
        let dir = std::env::temp_dir().join(format!("qe-group-{}", std::process::id()));
        let log = dir.join("s.log");
        // A shell that ignores TERM and leaves a child behind: both must be gone after stop.
        let pid_file = dir.join("pid");
        let cmd = format!(
            "trap '' TERM; sleep 300 & echo $! > {}; wait",
            pid_file.display()
        );
        let mut p = ServerProcess::start(&cmd, &log).unwrap();
        let t0 = Instant::now();
        while !pid_file.exists() && t0.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(20));
        }
        std::thread::sleep(Duration::from_millis(100));
        let pid = std::fs::read_to_string(&pid_file)
            .unwrap()
            .trim()
            .to_string();
        let t0 = Instant::now();
        p.stop(Duration::from_millis(500));
        assert!(t0.elapsed() < Duration::from_secs(5));
        assert!(p.exited().is_none(), "stop() consumed the child");
        std::thread::sleep(Duration::from_millis(200));
        // Gone, or a zombie waiting for init to reap it: either way no longer running.
        let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let running = state
            .rsplit(')')
            .next()
            .is_some_and(|r| !r.trim_start().starts_with('Z'));
        assert!(
            state.is_empty() || !running,
            "the server's child survived: {state}"
        );
        let _ = std::fs::remove_dir_all(dir);
    }
}
