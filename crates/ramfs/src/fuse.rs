//! The FUSE side: [`fuser::Filesystem`] over a locked [`Fs`].

use std::ffi::OsStr;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use fuser::{
    Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo, LockOwner, OpenFlags,
    RenameFlags, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyStatfs, ReplyWrite,
    Request, TimeOrNow, WriteFlags,
};

use crate::fs::{Fs, Inode, Kind, SetAttr, Usage};

/// How long the kernel may cache names and attributes: everything changes
/// through this process, so the kernel's view stays right as long as the
/// kernel is told; one second bounds any slip.
const TTL: Duration = Duration::from_secs(1);

/// The mounted filesystem: one lock around the [`Fs`], since every
/// operation is short next to the FUSE round trip.
pub struct Mounted {
    /// The filesystem.
    pub fs: Mutex<Fs>,
    /// Its usage when it was unmounted, for the caller of `mount`.
    pub last: Arc<Mutex<Usage>>,
}

fn attr(n: &Inode) -> FileAttr {
    let (kind, size) = match &n.kind {
        Kind::File => (FileType::RegularFile, n.size),
        Kind::Dir(_) => (FileType::Directory, 4096),
        Kind::Symlink(t) => (FileType::Symlink, t.len() as u64),
    };
    FileAttr {
        ino: INodeNo(n.ino),
        size,
        blocks: size.div_ceil(512),
        atime: n.atime,
        mtime: n.mtime,
        ctime: n.ctime,
        crtime: n.ctime,
        kind,
        perm: n.perm,
        nlink: n.nlink,
        uid: n.uid,
        gid: n.gid,
        rdev: 0,
        blksize: 4096,
        flags: 0,
    }
}

fn err(e: i32) -> Errno {
    Errno::from_i32(e)
}

fn time(t: TimeOrNow) -> SystemTime {
    match t {
        TimeOrNow::SpecificTime(t) => t,
        TimeOrNow::Now => SystemTime::now(),
    }
}

impl Mounted {
    fn fs(&self) -> std::sync::MutexGuard<'_, Fs> {
        self.fs.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn entry(&self, r: Result<&Inode, i32>, reply: ReplyEntry) {
        match r {
            Ok(n) => reply.entry(&TTL, &attr(n), Generation(0)),
            Err(e) => reply.error(err(e)),
        }
    }
}

impl Filesystem for Mounted {
    fn destroy(&mut self) {
        let usage = self.fs().usage();
        *self.last.lock().unwrap_or_else(|e| e.into_inner()) = usage;
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let fs = self.fs();
        self.entry(fs.lookup(parent.0, name), reply);
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match self.fs().get(ino.0) {
            Ok(n) => reply.attr(&TTL, &attr(n)),
            Err(e) => reply.error(err(e)),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let s = SetAttr {
            mode,
            uid,
            gid,
            size,
            atime: atime.map(time),
            mtime: mtime.map(time),
        };
        match self.fs().set_attr(ino.0, &s) {
            Ok(n) => reply.attr(&TTL, &attr(n)),
            Err(e) => reply.error(err(e)),
        }
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        match self.fs().get(ino.0).map(|n| n.kind.clone()) {
            Ok(Kind::Symlink(t)) => reply.data(t.as_encoded_bytes()),
            Ok(_) => reply.error(err(libc::EINVAL)),
            Err(e) => reply.error(err(e)),
        }
    }

    fn mkdir(&self, req: &Request, parent: INodeNo, name: &OsStr, mode: u32, umask: u32, reply: ReplyEntry) {
        let mut fs = self.fs();
        let r = fs.make(
            parent.0,
            name,
            Kind::Dir(Default::default()),
            (mode & !umask) as u16,
            req.uid(),
            req.gid(),
        );
        self.entry(r, reply);
    }

    fn mknod(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        _rdev: u32,
        reply: ReplyEntry,
    ) {
        if mode & libc::S_IFMT != libc::S_IFREG {
            return reply.error(err(libc::EPERM));
        }
        let mut fs = self.fs();
        let r = fs.make(parent.0, name, Kind::File, (mode & !umask) as u16, req.uid(), req.gid());
        self.entry(r, reply);
    }

    fn symlink(&self, req: &Request, parent: INodeNo, link_name: &OsStr, target: &Path, reply: ReplyEntry) {
        let mut fs = self.fs();
        let r = fs.make(
            parent.0,
            link_name,
            Kind::Symlink(target.as_os_str().to_os_string()),
            0o777,
            req.uid(),
            req.gid(),
        );
        self.entry(r, reply);
    }

    fn link(&self, _req: &Request, ino: INodeNo, newparent: INodeNo, newname: &OsStr, reply: ReplyEntry) {
        let mut fs = self.fs();
        self.entry(fs.link(ino.0, newparent.0, newname), reply);
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        match self.fs().remove(parent.0, name, false) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(err(e)),
        }
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        match self.fs().remove(parent.0, name, true) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(err(e)),
        }
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        if !flags.is_empty() {
            return reply.error(err(libc::EINVAL));
        }
        match self.fs().rename(parent.0, name, newparent.0, newname) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(err(e)),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        match self.fs().read(ino.0, offset, size as usize) {
            Ok(data) => reply.data(&data),
            Err(e) => reply.error(err(e)),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn write(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        match self.fs().write(ino.0, offset, data) {
            Ok(n) => reply.written(n as u32),
            Err(e) => reply.error(err(e)),
        }
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        _flags: i32,
        reply: ReplyCreate,
    ) {
        let mut fs = self.fs();
        match fs.make(parent.0, name, Kind::File, (mode & !umask) as u16, req.uid(), req.gid()) {
            Ok(n) => reply.created(&TTL, &attr(n), Generation(0), FileHandle(0), FopenFlags::empty()),
            Err(e) => reply.error(err(e)),
        }
    }

    fn readdir(&self, _req: &Request, ino: INodeNo, _fh: FileHandle, offset: u64, mut reply: ReplyDirectory) {
        let fs = self.fs();
        match fs.entries(ino.0) {
            Ok(entries) => {
                for (i, (child, n, name)) in entries.into_iter().enumerate().skip(offset as usize) {
                    let kind = attr(n).kind;
                    if reply.add(INodeNo(child), i as u64 + 1, kind, name) {
                        break;
                    }
                }
                reply.ok();
            }
            Err(e) => reply.error(err(e)),
        }
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        let u = self.fs().usage();
        let blocks = u.limit / 4096;
        let free = u.limit.saturating_sub(u.memory) / 4096;
        reply.statfs(blocks, free, free, 1 << 31, 1 << 30, 4096, 255, 4096);
    }
}
