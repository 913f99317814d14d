//! The filesystem itself, without FUSE: inodes, directories and file
//! blocks in a [`Store`], each operation returning a result or an errno.

use std::collections::{BTreeMap, HashMap};
use std::ffi::{OsStr, OsString};
use std::time::SystemTime;

use ccvm_codec::PAGE_SIZE;
use ccvm_store::{Store, StoreError};

/// An errno, as the operations fail with.
pub type Errno = i32;

/// The root directory's inode number.
pub const ROOT: u64 = 1;

/// Inode numbers stay below this.
const MAX_INO: u64 = 1 << 31;

/// Most blocks of one file: 16 TiB.
const MAX_BLOCKS: u64 = 1 << 32;

/// What an inode is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// A regular file; its blocks are in the store.
    File,
    /// A directory and its entries.
    Dir(BTreeMap<OsString, u64>),
    /// A symbolic link and its target.
    Symlink(OsString),
}

/// An inode's attributes and contents (file blocks are in the store).
#[derive(Debug, Clone)]
pub struct Inode {
    /// Its number.
    pub ino: u64,
    /// What it is.
    pub kind: Kind,
    /// Permission bits.
    pub perm: u16,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// Length in bytes (files; 0 for directories).
    pub size: u64,
    /// Links to it.
    pub nlink: u32,
    /// Last modification.
    pub mtime: SystemTime,
    /// Last access.
    pub atime: SystemTime,
    /// Last status change.
    pub ctime: SystemTime,
    /// Its parent directory (directories only, for `..`).
    pub parent: u64,
    /// The store key of each block of a file; 0 for a hole.
    blocks: Vec<u64>,
}

/// What `setattr` changes; `None` leaves a field as it is.
#[derive(Debug, Clone, Default)]
pub struct SetAttr {
    /// New permission bits.
    pub mode: Option<u32>,
    /// New owner.
    pub uid: Option<u32>,
    /// New group.
    pub gid: Option<u32>,
    /// New length (truncate or extend with zeros).
    pub size: Option<u64>,
    /// New access time.
    pub atime: Option<SystemTime>,
    /// New modification time.
    pub mtime: Option<SystemTime>,
}

/// Space used and saved.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// Bytes of file data (the files' lengths, holes included).
    pub file_bytes: u64,
    /// Blocks of file data stored.
    pub blocks: u64,
    /// Bytes of the blocks compressed (the slots as requested).
    pub compressed: u64,
    /// Memory the store uses for them, all counted.
    pub memory: u64,
    /// The memory limit.
    pub limit: u64,
}

/// A compressed RAM filesystem. See the crate docs.
///
/// Invariants: every inode but the root is named by at least one
/// directory entry; a file's blocks past its length are not in the store;
/// every store key is some block's, once.
///
/// Blocks get store keys from one counter (freed keys are reused), not
/// from their inode and index: the store's mapping table is a radix of
/// 256-entry leaves, and keys spread over inodes would give every small
/// file a leaf of its own (4 KiB of table for a 1 KiB file).
pub struct Fs {
    nodes: HashMap<u64, Inode>,
    next_ino: u64,
    store: Store,
    limit: u64,
    next_key: u64,
    free_keys: Vec<u64>,
}

impl Fs {
    /// An empty filesystem over `store`, whose memory limit is `limit`.
    pub fn new(store: Store, limit: u64, uid: u32, gid: u32) -> Fs {
        let now = SystemTime::now();
        let root = Inode {
            ino: ROOT,
            kind: Kind::Dir(BTreeMap::new()),
            perm: 0o755,
            uid,
            gid,
            size: 0,
            nlink: 2,
            mtime: now,
            atime: now,
            ctime: now,
            parent: ROOT,
            blocks: Vec::new(),
        };
        Fs {
            nodes: HashMap::from([(ROOT, root)]),
            next_ino: ROOT + 1,
            store,
            limit,
            next_key: 1,
            free_keys: Vec::new(),
        }
    }

    /// The inode `ino`.
    ///
    /// # Errors
    ///
    /// `ENOENT` if there is none.
    pub fn get(&self, ino: u64) -> Result<&Inode, Errno> {
        self.nodes.get(&ino).ok_or(libc::ENOENT)
    }

    fn dir(&self, ino: u64) -> Result<&BTreeMap<OsString, u64>, Errno> {
        match &self.get(ino)?.kind {
            Kind::Dir(d) => Ok(d),
            _ => Err(libc::ENOTDIR),
        }
    }

    fn dir_mut(&mut self, ino: u64) -> Result<&mut BTreeMap<OsString, u64>, Errno> {
        match &mut self.nodes.get_mut(&ino).ok_or(libc::ENOENT)?.kind {
            Kind::Dir(d) => Ok(d),
            _ => Err(libc::ENOTDIR),
        }
    }

    /// The inode named `name` in directory `parent`.
    ///
    /// # Errors
    ///
    /// `ENOENT`, `ENOTDIR`.
    pub fn lookup(&self, parent: u64, name: &OsStr) -> Result<&Inode, Errno> {
        let ino = *self.dir(parent)?.get(name).ok_or(libc::ENOENT)?;
        self.get(ino)
    }

    /// Makes `name` in `parent`: a file, a directory or a symlink.
    ///
    /// # Errors
    ///
    /// `EEXIST` if the name is taken, `ENOTDIR`, `ENAMETOOLONG`, `ENOSPC`
    /// when inode numbers run out.
    pub fn make(
        &mut self,
        parent: u64,
        name: &OsStr,
        kind: Kind,
        perm: u16,
        uid: u32,
        gid: u32,
    ) -> Result<&Inode, Errno> {
        if name.len() > 255 {
            return Err(libc::ENAMETOOLONG);
        }
        if self.dir(parent)?.contains_key(name) {
            return Err(libc::EEXIST);
        }
        if self.next_ino >= MAX_INO {
            return Err(libc::ENOSPC);
        }
        let ino = self.next_ino;
        self.next_ino += 1;
        let is_dir = matches!(kind, Kind::Dir(_));
        let now = SystemTime::now();
        self.nodes.insert(
            ino,
            Inode {
                ino,
                kind,
                perm: perm & 0o7777,
                uid,
                gid,
                size: 0,
                nlink: if is_dir { 2 } else { 1 },
                mtime: now,
                atime: now,
                ctime: now,
                parent,
                blocks: Vec::new(),
            },
        );
        self.dir_mut(parent)?.insert(name.to_os_string(), ino);
        let p = self.nodes.get_mut(&parent).expect("the parent exists");
        p.mtime = now;
        p.ctime = now;
        if is_dir {
            p.nlink += 1;
        }
        self.get(ino)
    }

    /// Removes the name `name` from `parent`: a file or symlink (`dir`
    /// false) or an empty directory (`dir` true).
    ///
    /// # Errors
    ///
    /// `ENOENT`, `ENOTDIR`, `EISDIR` (unlink of a directory),
    /// `ENOTEMPTY`.
    pub fn remove(&mut self, parent: u64, name: &OsStr, dir: bool) -> Result<(), Errno> {
        let ino = self.lookup(parent, name)?.ino;
        match (&self.get(ino)?.kind, dir) {
            (Kind::Dir(d), true) if !d.is_empty() => return Err(libc::ENOTEMPTY),
            (Kind::Dir(_), false) => return Err(libc::EISDIR),
            (Kind::Dir(_), true) => {}
            (_, true) => return Err(libc::ENOTDIR),
            (_, false) => {}
        }
        self.dir_mut(parent)?.remove(name);
        let now = SystemTime::now();
        let p = self.nodes.get_mut(&parent).expect("the parent exists");
        p.mtime = now;
        p.ctime = now;
        if dir {
            p.nlink -= 1;
        }
        self.unlink_inode(ino);
        Ok(())
    }

    /// One name of `ino` is gone: at the last, its blocks and inode go.
    fn unlink_inode(&mut self, ino: u64) {
        let node = self.nodes.get_mut(&ino).expect("the inode exists");
        node.nlink = node
            .nlink
            .saturating_sub(if matches!(node.kind, Kind::Dir(_)) { 2 } else { 1 });
        node.ctime = SystemTime::now();
        if node.nlink == 0 {
            let node = self.nodes.remove(&ino).expect("the inode exists");
            for k in node.blocks.into_iter().filter(|&k| k != 0) {
                self.store.remove(k);
                self.free_keys.push(k);
            }
            self.store.compact_when_due();
        }
    }

    /// Moves `name` in `parent` to `new_name` in `new_parent`, replacing
    /// a file there, or an empty directory by a directory.
    ///
    /// # Errors
    ///
    /// `ENOENT`, `ENOTDIR`, `EISDIR`, `ENOTEMPTY`, `EINVAL` (a directory
    /// into itself).
    pub fn rename(&mut self, parent: u64, name: &OsStr, new_parent: u64, new_name: &OsStr) -> Result<(), Errno> {
        let ino = self.lookup(parent, name)?.ino;
        self.dir(new_parent)?;
        let is_dir = matches!(self.get(ino)?.kind, Kind::Dir(_));
        if is_dir {
            // Not into itself or below it.
            let mut p = new_parent;
            loop {
                if p == ino {
                    return Err(libc::EINVAL);
                }
                if p == ROOT {
                    break;
                }
                p = self.get(p)?.parent;
            }
        }
        if let Some(&old) = self.dir(new_parent)?.get(new_name) {
            if old == ino {
                return Ok(());
            }
            // Checks the replaced entry's kind before changing anything.
            self.remove(new_parent, new_name, is_dir)?;
        }
        self.dir_mut(parent)?.remove(name);
        self.dir_mut(new_parent)?.insert(new_name.to_os_string(), ino);
        let now = SystemTime::now();
        if is_dir && parent != new_parent {
            self.nodes.get_mut(&parent).expect("exists").nlink -= 1;
            self.nodes.get_mut(&new_parent).expect("exists").nlink += 1;
        }
        for p in [parent, new_parent] {
            let n = self.nodes.get_mut(&p).expect("exists");
            n.mtime = now;
            n.ctime = now;
        }
        let n = self.nodes.get_mut(&ino).expect("exists");
        n.ctime = now;
        if is_dir {
            n.parent = new_parent;
        }
        Ok(())
    }

    /// A second name for the file `ino`.
    ///
    /// # Errors
    ///
    /// `EPERM` for a directory, `EEXIST`, `ENOENT`, `ENOTDIR`.
    pub fn link(&mut self, ino: u64, new_parent: u64, new_name: &OsStr) -> Result<&Inode, Errno> {
        if matches!(self.get(ino)?.kind, Kind::Dir(_)) {
            return Err(libc::EPERM);
        }
        if self.dir(new_parent)?.contains_key(new_name) {
            return Err(libc::EEXIST);
        }
        self.dir_mut(new_parent)?.insert(new_name.to_os_string(), ino);
        let n = self.nodes.get_mut(&ino).expect("exists");
        n.nlink += 1;
        n.ctime = SystemTime::now();
        self.get(ino)
    }

    /// Changes attributes; a new size truncates or extends with zeros.
    ///
    /// # Errors
    ///
    /// `ENOENT`; `EISDIR` for a size on a directory; `ENOSPC` when the
    /// block cut at the new end does not fit (then nothing changed).
    pub fn set_attr(&mut self, ino: u64, s: &SetAttr) -> Result<&Inode, Errno> {
        if let Some(size) = s.size {
            if !matches!(self.get(ino)?.kind, Kind::File) {
                return Err(libc::EISDIR);
            }
            self.truncate(ino, size)?;
        }
        let n = self.nodes.get_mut(&ino).ok_or(libc::ENOENT)?;
        if let Some(m) = s.mode {
            n.perm = (m & 0o7777) as u16;
        }
        if let Some(u) = s.uid {
            n.uid = u;
        }
        if let Some(g) = s.gid {
            n.gid = g;
        }
        if let Some(t) = s.atime {
            n.atime = t;
        }
        if let Some(t) = s.mtime {
            n.mtime = t;
        }
        n.ctime = SystemTime::now();
        self.get(ino)
    }

    fn truncate(&mut self, ino: u64, size: u64) -> Result<(), Errno> {
        let old = self.get(ino)?.size;
        let page = PAGE_SIZE as u64;
        if size < old && !size.is_multiple_of(page) {
            // Zero the cut block's tail, so that a later extension reads zeros.
            let b = size / page;
            let mut block = [0u8; PAGE_SIZE];
            self.read_block(ino, b, &mut block)?;
            block[(size % page) as usize..].fill(0);
            self.write_block(ino, b, &block)?;
        }
        let keep = size.div_ceil(page) as usize;
        let n = self.nodes.get_mut(&ino).expect("exists");
        if n.blocks.len() > keep {
            for k in n.blocks.split_off(keep).into_iter().filter(|&k| k != 0) {
                self.store.remove(k);
                self.free_keys.push(k);
            }
            self.store.compact_when_due();
        }
        let n = self.nodes.get_mut(&ino).expect("exists");
        n.size = size;
        n.mtime = SystemTime::now();
        Ok(())
    }

    /// The store key of block `block` of `ino`, 0 for a hole.
    fn key(&self, ino: u64, block: u64) -> u64 {
        self.nodes
            .get(&ino)
            .and_then(|n| n.blocks.get(block as usize))
            .copied()
            .unwrap_or(0)
    }

    fn read_block(&self, ino: u64, block: u64, out: &mut [u8; PAGE_SIZE]) -> Result<(), Errno> {
        let k = self.key(ino, block);
        if k == 0 {
            out.fill(0);
            return Ok(());
        }
        self.store.get(k, out).map_err(|_| libc::EIO)
    }

    fn write_block(&mut self, ino: u64, block: u64, data: &[u8; PAGE_SIZE]) -> Result<(), Errno> {
        let old = self.key(ino, block);
        if data.iter().all(|&b| b == 0) {
            // A hole reads as zeros: nothing to store.
            if old != 0 {
                self.store.remove(old);
                self.free_keys.push(old);
                self.nodes.get_mut(&ino).expect("exists").blocks[block as usize] = 0;
            }
            return Ok(());
        }
        let k = if old != 0 {
            old
        } else {
            self.free_keys.pop().unwrap_or_else(|| {
                self.next_key += 1;
                self.next_key - 1
            })
        };
        let stored = match self.store.put(k, data) {
            Ok(_) => Ok(()),
            Err(StoreError::Full { .. } | StoreError::OutOfMemory) => {
                // Gather scattered free space once before saying no.
                if self.store.compact_when_due() > 0 && self.store.put(k, data).is_ok() {
                    Ok(())
                } else {
                    Err(libc::ENOSPC)
                }
            }
            Err(_) => Err(libc::EIO),
        };
        match stored {
            Ok(()) if old == 0 => {
                let blocks = &mut self.nodes.get_mut(&ino).expect("exists").blocks;
                if blocks.len() <= block as usize {
                    blocks.resize(block as usize + 1, 0);
                }
                blocks[block as usize] = k;
                Ok(())
            }
            Ok(()) => Ok(()),
            Err(e) => {
                if old == 0 {
                    self.free_keys.push(k);
                }
                Err(e)
            }
        }
    }

    /// Up to `len` bytes of file `ino` from `offset`.
    ///
    /// # Errors
    ///
    /// `ENOENT`, `EISDIR`, `EIO` if the store's memory is damaged.
    pub fn read(&mut self, ino: u64, offset: u64, len: usize) -> Result<Vec<u8>, Errno> {
        let n = self.get(ino)?;
        if !matches!(n.kind, Kind::File) {
            return Err(libc::EISDIR);
        }
        let end = (offset + len as u64).min(n.size);
        let mut out = Vec::with_capacity(end.saturating_sub(offset) as usize);
        let page = PAGE_SIZE as u64;
        let mut at = offset;
        let mut block = [0u8; PAGE_SIZE];
        while at < end {
            let b = at / page;
            self.read_block(ino, b, &mut block)?;
            let from = (at % page) as usize;
            let to = ((end - b * page).min(page)) as usize;
            out.extend_from_slice(&block[from..to]);
            at = b * page + to as u64;
        }
        Ok(out)
    }

    /// Writes `data` into file `ino` at `offset`, extending it.
    ///
    /// # Errors
    ///
    /// `ENOENT`, `EISDIR`, `EFBIG` past 16 TiB, `ENOSPC` when the store
    /// is full: then the blocks before the one that did not fit are
    /// written and the file's length covers them (a short write).
    pub fn write(&mut self, ino: u64, offset: u64, data: &[u8]) -> Result<usize, Errno> {
        if !matches!(self.get(ino)?.kind, Kind::File) {
            return Err(libc::EISDIR);
        }
        let page = PAGE_SIZE as u64;
        if (offset + data.len() as u64).div_ceil(page) > MAX_BLOCKS {
            return Err(libc::EFBIG);
        }
        let mut done = 0usize;
        let mut block = [0u8; PAGE_SIZE];
        let size = self.get(ino)?.size;
        while done < data.len() {
            let at = offset + done as u64;
            let b = at / page;
            let from = (at % page) as usize;
            let take = (PAGE_SIZE - from).min(data.len() - done);
            if from != 0 || take != PAGE_SIZE {
                if b * page < size {
                    self.read_block(ino, b, &mut block)?;
                } else {
                    block.fill(0);
                }
            }
            block[from..from + take].copy_from_slice(&data[done..done + take]);
            if let Err(e) = self.write_block(ino, b, &block) {
                if done == 0 {
                    return Err(e);
                }
                break;
            }
            done += take;
            let n = self.nodes.get_mut(&ino).expect("exists");
            n.size = n.size.max(at + take as u64);
        }
        let n = self.nodes.get_mut(&ino).expect("exists");
        n.mtime = SystemTime::now();
        n.ctime = n.mtime;
        Ok(done)
    }

    /// The entries of directory `ino`, `.` and `..` first.
    ///
    /// # Errors
    ///
    /// `ENOENT`, `ENOTDIR`.
    pub fn entries(&self, ino: u64) -> Result<Vec<(u64, &Inode, OsString)>, Errno> {
        let d = self.dir(ino)?;
        let me = self.get(ino)?;
        let mut out = vec![
            (ino, me, OsString::from(".")),
            (me.parent, self.get(me.parent)?, OsString::from("..")),
        ];
        for (name, &child) in d {
            out.push((child, self.get(child)?, name.clone()));
        }
        Ok(out)
    }

    /// Space used and saved.
    pub fn usage(&self) -> Usage {
        let s = self.store.stats();
        Usage {
            file_bytes: self
                .nodes
                .values()
                .filter(|n| matches!(n.kind, Kind::File))
                .map(|n| n.size)
                .sum(),
            blocks: s.pages,
            compressed: s.compr_data_size,
            memory: self.store.memory_used(),
            limit: self.limit,
        }
    }
}
