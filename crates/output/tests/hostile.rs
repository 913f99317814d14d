//! The output rules under the attacks and accidents they are for: planted
//! links, failed runs, concurrent writers, devices and FIFOs.

use std::io::Write;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};

use ccvm_output::{OutputDir, OutputError, OutputFile};

fn leftovers(dir: &std::path::Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".partial"))
        .collect()
}

#[test]
fn a_planted_link_is_refused_and_its_victim_untouched() {
    let tmp = tempfile::tempdir().unwrap();
    let victim = tmp.path().join("victim");
    std::fs::write(&victim, "precious").unwrap();
    let link = tmp.path().join("sweep.csv");
    std::os::unix::fs::symlink(&victim, &link).unwrap();
    let err = OutputFile::create(&link).unwrap_err();
    assert!(matches!(err, OutputError::Link(_)), "{err}");
    assert!(err.to_string().contains("symbolic link"), "{err}");
    assert!(ccvm_output::write(&link, b"x").is_err());
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
}

#[test]
fn a_link_planted_after_the_check_is_replaced_not_followed() {
    let tmp = tempfile::tempdir().unwrap();
    let victim = tmp.path().join("victim");
    std::fs::write(&victim, "precious").unwrap();
    let target = tmp.path().join("out.json");
    let mut out = OutputFile::create(&target).unwrap();
    std::os::unix::fs::symlink(&victim, &target).unwrap();
    out.write_all(b"{}").unwrap();
    out.commit().unwrap();
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
    assert!(!std::fs::symlink_metadata(&target).unwrap().file_type().is_symlink());
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "{}");
}

#[test]
fn a_failed_run_leaves_the_previous_output_and_no_partial_file() {
    let tmp = tempfile::tempdir().unwrap();
    let target = tmp.path().join("trace.cct");
    std::fs::write(&target, "old trace").unwrap();
    {
        let mut out = OutputFile::create(&target).unwrap();
        out.write_all(b"half a new tr").unwrap();
        assert!(out.staging_path() != target);
        // dropped: the run failed
    }
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "old trace");
    assert!(leftovers(tmp.path()).is_empty());
}

#[test]
fn concurrent_writers_each_land_whole() {
    let tmp = tempfile::tempdir().unwrap();
    let target = tmp.path().join("data.ccz");
    let a = vec![b'a'; 1 << 20];
    let b = vec![b'b'; 1 << 19];
    let mut wa = OutputFile::create(&target).unwrap();
    let mut wb = OutputFile::create(&target).unwrap();
    for (ca, cb) in a.chunks(4096).zip(b.chunks(2048)) {
        wa.write_all(ca).unwrap();
        wb.write_all(cb).unwrap();
    }
    wa.commit().unwrap();
    assert_eq!(std::fs::read(&target).unwrap(), a);
    wb.commit().unwrap();
    assert_eq!(std::fs::read(&target).unwrap(), b);
    assert!(leftovers(tmp.path()).is_empty());
}

#[test]
fn new_files_take_the_umask_and_private_files_are_0600() {
    let tmp = tempfile::tempdir().unwrap();
    let target = tmp.path().join("report.json");
    ccvm_output::write(&target, b"{}").unwrap();
    // SAFETY: umask only swaps the process's mask; it is put back at once.
    let mask = unsafe {
        let m = libc::umask(0o022);
        libc::umask(m);
        m
    };
    let mode = std::fs::metadata(&target).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o666 & !mask);
    let private = ccvm_output::private_file(tmp.path(), "swap-").unwrap();
    assert_eq!(
        private.as_file().metadata().unwrap().permissions().mode() & 0o777,
        0o600
    );
}

#[test]
fn devices_and_fifos_are_written_in_place_folders_refused() {
    let mut out = OutputFile::create("/dev/null").unwrap();
    out.write_all(b"gone").unwrap();
    out.commit().unwrap();
    assert!(std::fs::metadata("/dev/null").unwrap().permissions().mode() & 0o777 == 0o666);
    let tmp = tempfile::tempdir().unwrap();
    let err = OutputFile::create(tmp.path()).unwrap_err();
    assert!(err.to_string().contains("a folder"), "{err}");

    let fifo = tmp.path().join("fifo");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid, NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::read(fifo).unwrap())
    };
    let mut out = OutputFile::create(&fifo).unwrap();
    out.write_all(b"through the fifo").unwrap();
    out.commit().unwrap();
    assert_eq!(reader.join().unwrap(), b"through the fifo");
    assert!(std::fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo());
}

#[test]
fn an_output_dir_made_for_a_failed_run_is_removed_one_in_use_is_kept() {
    let tmp = tempfile::tempdir().unwrap();
    let made = tmp.path().join("a/b");
    drop(OutputDir::create(&made).unwrap());
    assert!(!made.exists());
    let dir = OutputDir::create(&made).unwrap();
    dir.file("sweep.csv").unwrap().commit().unwrap();
    drop(dir);
    assert!(made.join("sweep.csv").exists(), "a folder with files is never removed");
    let existing = tmp.path().join("existing");
    std::fs::create_dir(&existing).unwrap();
    drop(OutputDir::create(&existing).unwrap());
    assert!(existing.exists(), "a folder the run did not make is never removed");
}

#[test]
fn an_output_dir_linked_by_another_user_is_refused() {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: needs root to make a link owned by another user");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let victim = tmp.path().join("victim");
    std::fs::create_dir(&victim).unwrap();
    let link = tmp.path().join("results");
    std::os::unix::fs::symlink(&victim, &link).unwrap();
    assert!(
        OutputDir::create(&link).is_ok(),
        "one's own link to a folder is followed"
    );
    std::os::unix::fs::lchown(&link, Some(4242), Some(4242)).unwrap();
    let err = OutputDir::create(&link).unwrap_err();
    assert!(matches!(err, OutputError::Link(_)), "{err}");
}
