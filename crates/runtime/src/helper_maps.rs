//! The program's own writable data, kept out of the compressor's helper.
//!
//! The helper process (see `compressor`) is forked from the program and
//! runs only ccvm's code and the C library. Every page it shares with the
//! program at the fork that the program writes later is copied for the
//! writer, and the helper keeps the old copy: memory charged to the
//! program's tree for nothing. Most of it is the writable data of the
//! program's own binary and libraries (CPython's interpreter state and
//! static type objects: 1.1 MiB of the helper's 2.4 MiB on the key-value
//! cache, `docs/results.md`). Those mappings are marked `MADV_DONTFORK`
//! for the helper's fork and unmarked at once after it, so the helper
//! never has them.
//!
//! # Choices
//!
//! * Only file-backed private writable mappings (`rw-p` with a path) are
//!   left out. The anonymous mapping after one (its `.bss`) may have been
//!   merged with memory allocated later, which the helper may use (its
//!   codec's tables), so it stays.
//! * Kept: the object that holds this code (the `ccvm` binary, or the
//!   preload library of `ccvm exec`), and the C library and its companions
//!   (`ld-linux`, `libc`, `libm`, `libgcc_s`, `libpthread`, `libdl`,
//!   `librt`), whose data the helper's system calls and unwinding read.
//! * The helper starts with every signal's handler of the program in
//!   place; it is forked before the program runs (the preload's
//!   constructor), so none of the program's own handlers are installed
//!   yet.

/// Libraries whose data the helper may read: prefixes of their file names.
const KEPT: [&str; 7] = [
    "ld-linux",
    "libc.so",
    "libm.so",
    "libgcc_s",
    "libpthread",
    "libdl",
    "librt",
];

/// Ranges `[start, end)` marked `MADV_DONTFORK` until dropped, when they
/// are marked `MADV_DOFORK` again.
pub(crate) struct LeftOut(Vec<(usize, usize)>);

impl LeftOut {
    /// Marks the program's writable file mappings (see the module docs);
    /// none if `/proc/self/maps` cannot be read or this code's object
    /// cannot be named.
    pub fn mark() -> LeftOut {
        let ranges = own_object().map_or_else(Vec::new, |own| left_out(&own));
        let mut marked = Vec::with_capacity(ranges.len());
        for (start, end) in ranges {
            // SAFETY: a whole mapping of this process, read from its maps.
            if unsafe { crate::sys_madvise(start as *mut libc::c_void, end - start, libc::MADV_DONTFORK) } == 0 {
                marked.push((start, end));
            }
        }
        LeftOut(marked)
    }
}

impl Drop for LeftOut {
    fn drop(&mut self) {
        for &(start, end) in &self.0 {
            // SAFETY: as in `mark`; the program's own forks get them again.
            unsafe { crate::sys_madvise(start as *mut libc::c_void, end - start, libc::MADV_DOFORK) };
        }
    }
}

/// The path of the object this code was loaded from.
fn own_object() -> Option<String> {
    // SAFETY: dladdr with an address of this object's code and a valid
    // out-pointer; the name it returns lives as long as the object.
    unsafe {
        let mut info: libc::Dl_info = std::mem::zeroed();
        if libc::dladdr(own_object as *const () as *const libc::c_void, &mut info) == 0 || info.dli_fname.is_null() {
            return None;
        }
        let name = std::ffi::CStr::from_ptr(info.dli_fname).to_string_lossy().into_owned();
        std::fs::canonicalize(&name)
            .ok()
            .map(|p| p.to_string_lossy().into_owned())
            .or(Some(name))
    }
}

/// The file-backed private writable mappings of `/proc/self/maps` that
/// belong neither to `own` nor to a kept library.
fn left_out(own: &str) -> Vec<(usize, usize)> {
    let Ok(maps) = std::fs::read_to_string("/proc/self/maps") else {
        return Vec::new();
    };
    maps.lines().filter_map(|line| parse(line, own)).collect()
}

/// One line of `/proc/PID/maps`, if its mapping is to be left out.
fn parse(line: &str, own: &str) -> Option<(usize, usize)> {
    let mut rest = line;
    let mut field = || {
        let t = rest.trim_start();
        let end = t.find(char::is_whitespace).unwrap_or(t.len());
        rest = &t[end..];
        &t[..end]
    };
    let (range, perms) = (field(), field());
    (0..3).for_each(|_| {
        field();
    });
    // The path is the rest of the line: it may hold spaces, and ends in
    // " (deleted)" once its file is gone.
    let path = rest.trim();
    let path = path.strip_suffix(" (deleted)").unwrap_or(path);
    if perms != "rw-p" || !path.starts_with('/') || path == own {
        return None;
    }
    let name = path.rsplit('/').next().unwrap_or(path);
    if KEPT.iter().any(|k| name.starts_with(k)) {
        return None;
    }
    let (start, end) = range.split_once('-')?;
    Some((
        usize::from_str_radix(start, 16).ok()?,
        usize::from_str_radix(end, 16).ok()?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_other_objects_writable_file_data_is_left_out() {
        let own = "/tmp/a dir/libccvm_preload-1.so";
        let lines = [
            ("5000-5100 rw-p 00001000 fe:00 6 /tmp/a dir/libccvm_preload-1.so", None),
            (
                "5100-5200 rw-p 00001000 fe:00 6 /tmp/a dir/libccvm_preload-1.so (deleted)",
                None,
            ),
            (
                "5200-5300 rw-p 00001000 fe:00 7 /tmp/a dir/libother.so",
                Some((0x5200, 0x5300)),
            ),
            (
                "5600-5700 rw-p 0000a000 fe:00 1 /usr/lib/libpython3.11.so.1.0",
                Some((0x5600, 0x5700)),
            ),
            ("5700-5800 rw-p 00000000 00:00 0 ", None),
            ("5800-5900 r--p 00000000 fe:00 2 /usr/lib/libpython3.11.so.1.0", None),
            (
                "5900-5a00 rw-p 001d3000 fe:00 3 /usr/lib/x86_64-linux-gnu/libc.so.6",
                None,
            ),
            ("5a00-5b00 rw-p 00001000 fe:00 4 /usr/bin/ccvm", Some((0x5a00, 0x5b00))),
            ("5b00-5c00 rw-p 00000000 00:00 0 [heap]", None),
            (
                "5c00-5d00 rw-p 00002000 fe:00 5 /usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2",
                None,
            ),
        ];
        for (line, want) in lines {
            assert_eq!(parse(line, own), want, "{line}");
        }
    }

    #[test]
    fn this_process_keeps_its_own_data_and_the_c_librarys() {
        let own = own_object().expect("dladdr names the test binary");
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        assert!(
            maps.lines().any(|l| l.contains(" rw-p ") && l.ends_with(own.as_str())),
            "{own} has writable data in\n{maps}"
        );
        let out = left_out(&own);
        for line in maps
            .lines()
            .filter(|l| l.contains(" rw-p ") && (l.ends_with(own.as_str()) || l.contains("/libc.so")))
        {
            let start = usize::from_str_radix(line.split('-').next().unwrap(), 16).unwrap();
            assert!(!out.iter().any(|&(s, _)| s == start), "left out: {line}");
        }
    }
}
