//! A meter interrupted (SIGTERM, as from Ctrl-C's SIGINT or a job scheduler) while a server it
//! started is running must take the server down with it: the server lives in its own process
//! group, which a terminal's Ctrl-C does not reach. The test re-runs itself as the "meter" child.

use server::process::ServerProcess;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

const CHILD: &str = "QE_SIGNAL_TEST_CHILD";

fn dir() -> PathBuf {
    std::env::temp_dir().join(format!(
        "qe-signal-{}",
        std::env::var("QE_SIGNAL_PARENT").unwrap_or_else(|_| std::process::id().to_string())
    ))
}

fn running(pid: &str) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Gone, or a zombie waiting to be reaped: not running.
    !stat.is_empty()
        && !stat
            .rsplit(')')
            .next()
            .is_some_and(|r| r.trim_start().starts_with('Z'))
}

#[test]
fn a_terminated_meter_takes_its_server_down() {
    if std::env::var_os(CHILD).is_some() {
        // The "meter": start a server that records its pid, then wait to be terminated.
        let d = dir();
        let cmd = format!("echo $$ > {}/server.pid; exec sleep 300", d.display());
        let _server = ServerProcess::start(&cmd, &d.join("server.log")).unwrap();
        std::thread::sleep(Duration::from_secs(60));
        return;
    }
    let d = dir();
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    let mut meter = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "a_terminated_meter_takes_its_server_down",
            "--nocapture",
        ])
        .env(CHILD, "1")
        .env("QE_SIGNAL_PARENT", std::process::id().to_string())
        .spawn()
        .unwrap();
    let pid_file = d.join("server.pid");
    let t0 = Instant::now();
    while !pid_file.exists() && t0.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(100));
    let server = std::fs::read_to_string(&pid_file)
        .expect("the server started")
        .trim()
        .to_string();
    assert!(running(&server));
    // SAFETY: signals our own child.
    unsafe { libc::kill(meter.id() as i32, libc::SIGTERM) };
    let status = meter.wait().unwrap();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(
        status.signal(),
        Some(libc::SIGTERM),
        "the meter dies of the signal: {status:?}"
    );
    let t0 = Instant::now();
    while running(&server) && t0.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        !running(&server),
        "the server (pid {server}) outlived the meter"
    );
    let _ = std::fs::remove_dir_all(&d);
}
